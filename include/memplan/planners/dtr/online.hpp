#pragma once
/// \file
/// DELTA (Tang et al.) Algo 1 and DTR (Kirisame et al., ICLR 2021) §3: the
/// online runtime. It executes a schedule step by step the way DTR and
/// DELTA run inside a framework — no plan ahead, only a policy asked which
/// tensor to release whenever an allocation would exceed the budget — and
/// records what it did as an ordinary action list (DESIGN.md §6, last
/// paragraph), so the simulator and the validator judge it like any plan.
///
/// Per step s:
/// 1. pin the inputs of s and bring back those not resident (DELTA Algo 1,
///    lines 2-10): an evicted tensor by recomputing its producer, whose own
///    evicted inputs are brought back first (recursive rematerialisation,
///    DTR §3); an offloaded one by a reload, or by recomputation where the
///    policy prefers it (DELTA §5.5);
/// 2. make room for the outputs and workspace of s, asking the policy for a
///    tensor to release until they fit (DELTA Algo 1, lines 11-19; DTR's
///    eviction loop), then run s;
/// 3. free the tensors s read or made for the last time (their death: a
///    tensor nothing can recompute stays until no rematerialisation can need
///    it), then let the policy release early (DELTA's start at 3/4 of the
///    budget) and prefetch (DELTA Algo 4).
///
/// Memory is counted in issue order (a release counts at once, an
/// allocation when issued). Every earlier action ends eventually, so a list
/// that fits in issue order also fits the simulator's timed run, which only
/// adds waits for in-flight copies; the timed run's peak can be lower (a
/// reload's copy starts after the frees issued just before it), so the
/// planners report the simulator's (planners/verdict.hpp).

#include <chrono>
#include <concepts>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "memplan/cost/device.hpp"
#include "memplan/error.hpp"
#include "memplan/plan.hpp"
#include "memplan/plan_builder.hpp"
#include "memplan/problem.hpp"
#include "memplan/planners/dtr/online_state.hpp"

namespace memplan::detail::dtr {

/// How a policy releases a tensor (DELTA Table I).
enum class release_kind : std::uint8_t { evict, offload };

/// A policy's choice: the tensor (no_index: nothing to release) and how.
struct release {
  index_t tensor = no_index;
  release_kind kind = release_kind::evict;
};

/// How an offloaded tensor comes back when an op needs it.
enum class fetch_kind : std::uint8_t { reload, recompute };

/// An online memory policy. Required: `offloads` (whether tensors that
/// cannot be recomputed may be released, by offloading) and `choose`, called
/// whenever an allocation would exceed the budget. Optional hooks, detected
/// with `if constexpr`:
/// - `fetch(state, t) -> fetch_kind` for an offloaded t an op needs
///   (default: reload);
/// - `early_start() -> double`: release early once this fraction of the
///   budget is in use, as long as `choose` answers offload;
/// - `prefetch(state) -> index_t`: an offloaded tensor to reload now, or
///   no_index; called after each step until it answers no_index;
/// - `on_release(state, release)`: told of every release made.
template <class P>
concept eviction_policy = requires(P& policy, const online_state& s) {
  { P::offloads } -> std::convertible_to<bool>;
  { policy.choose(s) } -> std::same_as<release>;
};

/// What the runtime did besides the action list.
struct online_counts {
  index_t evictions = 0;       ///< releases without a copy (deaths not counted)
  index_t offloads = 0;        ///< releases to the host
  index_t reloads = 0;         ///< swap-ins on demand
  index_t prefetches = 0;      ///< swap-ins ahead of demand
  index_t recomputations = 0;  ///< recompute actions
};

struct online_result {
  plan result;
  online_counts counts;
};


/// The last step at which each tensor may be read: its last use, or, for a
/// tensor nothing can recompute (no producer, or one that may not run
/// again), the last step at which rematerialising a tensor made from it may
/// still need it. Persistent tensors never die (num_steps).
[[nodiscard]] inline std::vector<index_t> death_steps(const problem& p) {
  const auto n = static_cast<index_t>(p.num_steps());
  std::vector<index_t> horizon(p.num_tensors(), 0);  // last step a remat may need t
  const auto reach = [&](index_t t) {
    index_t h = p.live_end(t);
    for (const index_t u : p.uses(t)) {
      if (p.recomputable[static_cast<std::size_t>(u)] == 0) continue;
      for (const index_t out : p.outputs(u)) {
        if (!p.persistent(out)) h = std::max(h, horizon[static_cast<std::size_t>(out)]);
      }
    }
    horizon[static_cast<std::size_t>(t)] = h;
  };
  for (index_t s = n - 1; s >= 0; --s) {  // consumers' outputs first
    for (const index_t t : p.outputs(s)) reach(t);
  }
  std::vector<index_t> death(p.num_tensors(), n);
  for (std::size_t t = 0; t < p.num_tensors(); ++t) {
    const auto ti = static_cast<index_t>(t);
    if (p.persistent(ti)) continue;
    if (p.producer[t] == no_index) reach(ti);
    const index_t made = p.producer[t];
    const bool remat = made != no_index && p.recomputable[static_cast<std::size_t>(made)] != 0;
    death[t] = remat ? p.live_end(ti) : horizon[t];
  }
  return death;
}

template <eviction_policy P>
class online_runtime {
 public:
  online_runtime(const problem& p, bytes_t budget, P& policy, std::string name, double time_limit_s)
      : p_(&p), policy_(&policy), state_(p, budget, P::offloads), b_(p, std::move(name), budget),
        death_(death_steps(p)), dies_at_(p.num_steps() + 1), time_limit_s_(time_limit_s) {
    for (std::size_t t = 0; t < death_.size(); ++t) {
      dies_at_[static_cast<std::size_t>(death_[t])].push_back(static_cast<index_t>(t));
    }
  }

  online_result run() && {
    const auto n = static_cast<index_t>(p_->num_steps());
    // The tensors without a producer are on the device before the first
    // action (DESIGN §4, the simulator's time 0): no release can make room
    // for them.
    bool ok = state_.used() <= state_.budget() ||
              fail(failure_kind::out_of_memory,
                   memplan::detail::concat("the tensors without a producer need ", state_.used(), " bytes"));
    for (index_t s = 0; ok && s < n; ++s) ok = step(s);
    if (ok) b_.set_best_peak(state_.peak());
    return {std::move(b_).finish(), counts_};
  }

 private:
  bool step(index_t s) {
    state_.set_step(s);
    step_recomputes_ = 0;
    if (out_of_time()) return fail_time_limit();
    const auto inputs = p_->inputs(s);
    for (const index_t t : inputs) state_.pin(t);
    for (const index_t t : inputs) {
      if (!bring(t)) return false;
    }
    if (!run_op(s, action_kind::compute)) return false;
    for (const index_t t : inputs) state_.unpin(t);
    for (const index_t t : dies_at_[static_cast<std::size_t>(s)]) retire(t);
    // Dead tensors a recompute brought back (as its inputs, or as other
    // outputs of its op) go once the step is done: retiring them earlier
    // would recompute a shared dead ancestor once per path to it.
    for (const index_t t : revived_) retire(t);
    revived_.clear();
    if constexpr (requires { policy_->early_start(); }) {
      // DELTA Algo 1 line 11 / §4.3: start releasing at 3/4 of the budget so
      // that offloads overlap compute; evictions gain nothing by coming early.
      const auto early = static_cast<bytes_t>(policy_->early_start() * static_cast<double>(state_.budget()));
      while (state_.used() > early) {
        const release r = policy_->choose(state_);
        if (r.tensor == no_index || r.kind != release_kind::offload) break;
        apply(r);
      }
    }
    if constexpr (requires { policy_->prefetch(state_); }) {
      for (index_t t = policy_->prefetch(state_); t != no_index; t = policy_->prefetch(state_)) {
        reload(t);
        state_.make_resident(t, true);
        ++counts_.prefetches;
      }
    }
    return true;
  }

  /// Runs step s (compute) or runs it again (recompute): room for the
  /// outputs not on the device and the workspace, then the action.
  bool run_op(index_t s, action_kind kind) {
    bytes_t need = p_->workspace[static_cast<std::size_t>(s)];
    for (const index_t t : p_->outputs(s)) {
      if (state_.where(t) != residence::resident) need += p_->bytes[static_cast<std::size_t>(t)];
    }
    if (!make_room(need)) return false;
    last_compute_ = kind == action_kind::compute ? b_.compute(s) : b_.recompute(s);
    state_.hold(p_->workspace[static_cast<std::size_t>(s)]);
    state_.advance(p_->time_us[static_cast<std::size_t>(s)]);
    state_.drop(p_->workspace[static_cast<std::size_t>(s)]);
    for (const index_t t : p_->inputs(s)) state_.touch(t);
    for (const index_t t : p_->outputs(s)) {
      if (state_.where(t) == residence::resident) continue;
      state_.make_resident(t);
      // A recompute remakes every missing output, dead ones too.
      if (dead(t)) revived_.push_back(t);
    }
    return true;
  }

  /// Brings t onto the device (t is pinned by the caller).
  bool bring(index_t t) {
    switch (state_.where(t)) {
      case residence::resident: return true;
      case residence::offloaded: {
        fetch_kind how = fetch_kind::reload;
        if constexpr (requires { policy_->fetch(state_, t); }) how = policy_->fetch(state_, t);
        if (how == fetch_kind::recompute && state_.recomputable(t)) return rematerialise(t);
        if (!make_room(p_->bytes[static_cast<std::size_t>(t)])) return false;
        reload(t);
        state_.make_resident(t);
        ++counts_.reloads;
        return true;
      }
      case residence::evicted:
        if (state_.recomputable(t)) return rematerialise(t);
        return fail(failure_kind::out_of_memory,
                    memplan::detail::concat("tensor '", p_->tensor_name[static_cast<std::size_t>(t)],
                                            "' was released and cannot be recomputed"));
      case residence::unmade: break;
    }
    return fail(failure_kind::planner_gave_up,
                memplan::detail::concat("tensor '", p_->tensor_name[static_cast<std::size_t>(t)],
                                        "' is read before it is made"));
  }

  /// Recomputes t's producer after bringing back its inputs (DTR §3).
  bool rematerialise(index_t t) {
    const index_t r = p_->producer[static_cast<std::size_t>(t)];
    const auto inputs = p_->inputs(r);
    for (const index_t in : inputs) state_.pin(in);
    for (const index_t in : inputs) {
      if (!bring(in)) return false;
    }
    // More recomputes for one step than there are steps: every op ran again
    // and still nothing fits; what is left is evicting and remaking the same
    // tensors (thrashing).
    if (++step_recomputes_ > static_cast<index_t>(p_->num_steps())) {
      return fail(failure_kind::out_of_memory, memplan::detail::concat("rematerialisation thrashes (", step_recomputes_,
                                                                       " recomputes for one step)"));
    }
    if (out_of_time()) return fail_time_limit();
    if (!run_op(r, action_kind::recompute)) return false;
    ++counts_.recomputations;
    for (const index_t in : inputs) state_.unpin(in);
    return true;
  }

  /// Swaps t in once the compute-stream action issued last has ended (its
  /// in-trigger). Copy streams run ahead of the compute stream; without the
  /// trigger the copy could allocate before earlier-issued compute actions
  /// have made room for it.
  void reload(index_t t) { b_.swap_in(t, std::span(&last_compute_, last_compute_ == no_index ? 0 : 1)); }

  /// Asks the policy for releases until `need` more bytes fit.
  bool make_room(bytes_t need) {
    while (state_.used() + need > state_.budget()) {
      const release r = policy_->choose(state_);
      if (r.tensor == no_index) {
        return fail(failure_kind::out_of_memory,
                    memplan::detail::concat("needs ", need, " more bytes with ", state_.used(),
                                            " in use; nothing left to release"));
      }
      apply(r);
    }
    return true;
  }

  void apply(const release& r) {
    MEMPLAN_EXPECTS(state_.candidate(r.tensor), invalid_argument, "online policy chose tensor ", r.tensor,
                    ", which is not a candidate (resident, unpinned, releasable)");
    if (r.kind == release_kind::evict) {
      MEMPLAN_EXPECTS(state_.recomputable(r.tensor), invalid_argument, "online policy evicts tensor '",
                      p_->tensor_name[static_cast<std::size_t>(r.tensor)], "', which cannot be recomputed");
      last_compute_ = b_.free(r.tensor);
      b_.decide(r.tensor, decision::recompute);
      state_.make_evicted(r.tensor);
      ++counts_.evictions;
    } else {
      // A tensor whose host copy is still valid leaves without a new copy.
      if (state_.has_host_copy(r.tensor)) {
        last_compute_ = b_.free(r.tensor);
      } else {
        b_.swap_out(r.tensor);
      }
      b_.decide(r.tensor, decision::swap);
      state_.make_offloaded(r.tensor);
      ++counts_.offloads;
    }
    if constexpr (requires { policy_->on_release(state_, r); }) policy_->on_release(state_, r);
  }

  /// t has been read for the last time it can be: its device copy goes, and
  /// a host copy is forgotten.
  void retire(index_t t) {
    const residence w = state_.where(t);
    if (w == residence::resident) last_compute_ = b_.free(t);
    if (w == residence::resident || w == residence::offloaded) state_.make_evicted(t);
  }

  /// planner_options::time_limit_s has run out. An online policy has no
  /// plan before the end of the schedule, so the run stops, infeasible.
  [[nodiscard]] bool out_of_time() const {
    return time_limit_s_ > 0 &&
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count() >= time_limit_s_;
  }
  bool fail_time_limit() {
    return fail(failure_kind::time_limit,
                memplan::detail::concat("the time limit of ", time_limit_s_, " s ran out before the last step"));
  }

  /// Read for the last time before the current step.
  [[nodiscard]] bool dead(index_t t) const { return death_[static_cast<std::size_t>(t)] < state_.step(); }

  /// Stops the run, infeasible: `kind` and `why` at the current step.
  bool fail(failure_kind kind, std::string why) {
    const auto s = static_cast<std::size_t>(state_.step());
    const std::string at = s < p_->num_steps() ? memplan::detail::concat("at step ", s, " (op '", p_->op_name[s], "'), ") : "";
    b_.infeasible(kind,
                  memplan::detail::concat(b_.current().planner, ": ", at, why, "; budget ", state_.budget(), " bytes"),
                  state_.peak());
    return false;
  }

  const problem* p_;
  P* policy_;
  online_state state_;
  plan_builder b_;
  std::vector<index_t> death_;
  std::vector<std::vector<index_t>> dies_at_;
  online_counts counts_;
  index_t step_recomputes_ = 0;
  std::vector<index_t> revived_;  ///< dead tensors recomputed during the current step
  index_t last_compute_ = no_index;  ///< the compute-stream action issued last
  double time_limit_s_;              ///< 0: none
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};


/// Executes `p`'s schedule under `budget` with `policy` deciding what to
/// release. An allocation that cannot be made room for makes the plan
/// infeasible (`result.feasible == false`, with the reason); the plan is
/// then cut at that step. So is one that runs past `time_limit_s` (0:
/// no limit).
/// \throws invalid_argument if the policy chooses a tensor that is not a
///         candidate, or evicts one that cannot be recomputed.
template <eviction_policy P>
[[nodiscard]] online_result run_online(const problem& p, bytes_t budget, P& policy, std::string name,
                                       double time_limit_s = 0) {
  return online_runtime<P>(p, budget, policy, std::move(name), time_limit_s).run();
}

}  // namespace memplan::detail::dtr
