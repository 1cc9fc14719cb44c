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
/// Memory is allocated in issue order by a model of PyTorch's caching
/// allocator (runtime/caching_allocator.hpp) in an arena of exactly the
/// budget: "fits" means the allocator can place the request, so
/// fragmentation is paid for with releases (DELTA §5.2-5.3). Every device
/// allocation's offset goes into the plan (its layout, plan_layout.hpp, in
/// allocation order), and its arena is the allocator's high-water mark of
/// segments. A release gives its bytes back at once, tagged with the
/// actions still holding them; an action that reuses such bytes waits for
/// those on other streams, so the layout holds in every timing the waits
/// allow, the simulator's included. The driver calls the allocator makes
/// (cudaMalloc of a segment, cudaFree of cached ones) cost
/// `device_spec::allocator`'s times, in `plan::allocator_us`.

#include <algorithm>
#include <array>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "memplan/cost/device.hpp"
#include "memplan/error.hpp"
#include "memplan/runtime/caching_allocator.hpp"
#include "memplan/plan.hpp"
#include "memplan/plan_builder.hpp"
#include "memplan/problem.hpp"
#include "memplan/planners/dtr/lineage.hpp"
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
  // The allocator (runtime/caching_allocator.hpp).
  bytes_t arena_high_water = 0;  ///< the highest end of a segment: the arena the run needed
  bytes_t live_peak = 0;         ///< the most bytes live at once, in issue order
  index_t segment_mallocs = 0;   ///< segments made (cudaMalloc)
  index_t segment_frees = 0;     ///< cached segments given back (cudaFree)
  double allocator_us = 0;       ///< what those calls cost
};

struct online_result {
  plan result;
  online_counts counts;
};


template <eviction_policy P>
class online_runtime {
 public:
  online_runtime(const problem& p, const device_spec& dev, bytes_t budget, P& policy, std::string name,
                 double time_limit_s)
      : p_(&p), policy_(&policy), state_(p, budget, P::offloads), b_(p, std::move(name), budget),
        death_(death_steps(p)), dies_at_(p.num_steps() + 1), time_limit_s_(time_limit_s),
        alloc_(budget, dev.alignment, dev.allocator), block_of_(p.num_tensors(), no_index),
        maker_(p.num_tensors(), no_index) {
    for (std::size_t t = 0; t < death_.size(); ++t) {
      dies_at_[static_cast<std::size_t>(death_[t])].push_back(static_cast<index_t>(t));
    }
  }

  online_result run() && {
    const auto n = static_cast<index_t>(p_->num_steps());
    bool ok = load();
    for (index_t s = 0; ok && s < n; ++s) ok = step(s);
    if (ok) b_.set_best_peak(state_.peak());
    plan pl = std::move(b_).finish();
    record_allocator(pl, ok);
    return {std::move(pl), counts_};
  }

 private:
  /// The allocator's layout (of a run that went to the end) and driver time
  /// into the plan, its figures into the counts.
  void record_allocator(plan& pl, bool ok) {
    if (ok) {
      pl.offsets = std::move(offsets_);
      pl.arena_bytes = alloc_.high_water();
    }
    pl.allocator_us = alloc_.driver_us();
    counts_.arena_high_water = alloc_.high_water();
    counts_.live_peak = state_.peak();
    counts_.segment_mallocs = alloc_.driver_calls().mallocs;
    counts_.segment_frees = alloc_.driver_calls().frees;
    counts_.allocator_us = pl.allocator_us;
  }

  /// The tensors without a producer are on the device before the first
  /// action (DESIGN §4, the simulator's time 0), allocated in tensor order
  /// (plan_layout.hpp): no release can make room for them.
  bool load() {
    for (std::size_t t = 0; t < p_->num_tensors(); ++t) {
      if (p_->producer[t] != no_index) continue;
      const auto got = alloc_.allocate(p_->bytes[t]);
      if (!got) {
        return fail(failure_kind::out_of_memory,
                    memplan::detail::concat("the tensors without a producer need ", state_.used(),
                                            " bytes; the allocator cannot place '", p_->tensor_name[t], "' (",
                                            p_->bytes[t], " bytes) with ", alloc_.reserved(), " in segments"));
      }
      take(*got, block_of_[t]);
    }
    return true;
  }
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
        const auto got = alloc_.allocate(p_->bytes[static_cast<std::size_t>(t)]);  // a prefetch releases nothing
        if (!got) break;
        take(*got, block_of_[at(t)]);
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
    const auto outputs = p_->outputs(s);
    // Pinned: making room for one output must not release another (a
    // recompute would then make it without an allocation).
    for (const index_t t : outputs) state_.pin(t);
    for (const index_t t : outputs) {
      if (state_.where(t) == residence::resident) continue;
      if (!allocate(p_->bytes[at(t)], block_of_[at(t)])) return false;
    }
    index_t workspace = no_index;
    const bytes_t ws = p_->workspace[static_cast<std::size_t>(s)];
    if (ws > 0 && !allocate(ws, workspace)) return false;
    const stream_kind stream = p_->communicates(s) ? stream_kind::comm : stream_kind::compute;
    const std::vector<index_t> after = reuse_waits(stream);
    const index_t a = issue(kind == action_kind::compute ? b_.compute(s, 1, no_index, after)
                                                        : b_.recompute(s, 1, no_index, after));
    if (workspace != no_index) {
      runtime::release_clock ended = runtime::no_release;
      ended[static_cast<std::size_t>(stream)] = a;
      alloc_.free(workspace, ended);
    }
    state_.hold(p_->workspace[static_cast<std::size_t>(s)]);
    state_.advance(p_->time_us[static_cast<std::size_t>(s)]);
    state_.drop(p_->workspace[static_cast<std::size_t>(s)]);
    for (const index_t t : p_->inputs(s)) state_.touch(t);
    for (const index_t t : outputs) {
      if (state_.where(t) == residence::resident) continue;
      maker_[at(t)] = a;
      state_.make_resident(t);
      // A recompute remakes every missing output, dead ones too.
      if (dead(t)) revived_.push_back(t);
    }
    for (const index_t t : outputs) state_.unpin(t);
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
        if (!allocate(p_->bytes[static_cast<std::size_t>(t)], block_of_[at(t)])) return false;
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

  /// Swaps t in (its copy allocated) once the compute-stream action issued
  /// last has ended (its in-trigger). Copy streams run ahead of the compute
  /// stream; without the trigger the copy could start before earlier-issued
  /// compute actions have made room for it.
  void reload(index_t t) {
    auto& trigger = reused_[static_cast<std::size_t>(stream_kind::compute)];
    trigger = std::max(trigger, last_[static_cast<std::size_t>(stream_kind::compute)]);
    const std::vector<index_t> after = reuse_waits(stream_kind::h2d);
    maker_[at(t)] = issue(b_.swap_in(t, after));
  }

  /// A block of `bytes` from the allocator, asking the policy for releases
  /// until it can place them (DTR's eviction loop, now on the allocator's
  /// terms: live bytes under the budget are not enough where the free
  /// bytes are fragmented).
  bool allocate(bytes_t bytes, index_t& block) {
    for (;;) {
      if (const auto got = alloc_.allocate(bytes)) {
        take(*got, block);
        return true;
      }
      const release r = policy_->choose(state_);
      if (r.tensor == no_index) {
        return fail(failure_kind::out_of_memory,
                    memplan::detail::concat("the allocator cannot place ", bytes, " bytes with ", state_.used(),
                                            " bytes live (", alloc_.allocated(), " in blocks, ", alloc_.reserved(),
                                            " in segments; the largest free block ", alloc_.largest_free_block(),
                                            ", the largest gap between segments ", alloc_.largest_gap(),
                                            "); nothing left to release"));
      }
      apply(r);
    }
  }
  /// Records an allocation: its block, its offset (allocation order), and
  /// the actions its bytes wait for.
  void take(const runtime::caching_allocator::allocation& got, index_t& block) {
    block = got.block;
    offsets_.push_back(got.offset);
    reused_ = runtime::latest(reused_, got.after);
  }
  /// The waits of the action on `stream` that makes the allocations taken
  /// since the last one: the holders of the bytes they reuse on other
  /// streams (its own stream orders the rest).
  std::vector<index_t> reuse_waits(stream_kind stream) {
    std::vector<index_t> after;
    for (std::size_t k = 0; k < reused_.size(); ++k) {
      if (k != static_cast<std::size_t>(stream) && reused_[k] != no_index) after.push_back(reused_[k]);
    }
    reused_ = runtime::no_release;
    return after;
  }
  /// Action a was issued: the latest of its stream.
  index_t issue(index_t a) {
    last_[static_cast<std::size_t>(stream_of(*p_, b_.current().actions[static_cast<std::size_t>(a)]))] = a;
    return a;
  }
  /// t's device copy, released by action `by`, goes back to the allocator,
  /// its bytes held until the latest actions of the compute and the
  /// communication streams (its readers), its maker and `by` have ended.
  void give_back(index_t t, index_t by) {
    index_t& block = block_of_[at(t)];
    if (block == no_index) return;
    runtime::release_clock c = runtime::no_release;
    for (const stream_kind k : {stream_kind::compute, stream_kind::comm}) {
      c[static_cast<std::size_t>(k)] = last_[static_cast<std::size_t>(k)];
    }
    for (const index_t h : {maker_[at(t)], by}) {
      if (h == no_index) continue;
      index_t& e = c[static_cast<std::size_t>(stream_of(*p_, b_.current().actions[static_cast<std::size_t>(h)]))];
      e = std::max(e, h);
    }
    alloc_.free(block, c);
    block = no_index;
  }
  [[nodiscard]] static std::size_t at(index_t t) { return static_cast<std::size_t>(t); }

  void apply(const release& r) {
    MEMPLAN_EXPECTS(state_.candidate(r.tensor), invalid_argument, "online policy chose tensor ", r.tensor,
                    ", which is not a candidate (resident, unpinned, releasable)");
    if (r.kind == release_kind::evict) {
      MEMPLAN_EXPECTS(state_.recomputable(r.tensor), invalid_argument, "online policy evicts tensor '",
                      p_->tensor_name[static_cast<std::size_t>(r.tensor)], "', which cannot be recomputed");
      give_back(r.tensor, issue(b_.free(r.tensor)));
      b_.decide(r.tensor, decision::recompute);
      state_.make_evicted(r.tensor);
      ++counts_.evictions;
    } else {
      // A tensor whose host copy is still valid leaves without a new copy.
      give_back(r.tensor, issue(state_.has_host_copy(r.tensor) ? b_.free(r.tensor) : b_.swap_out(r.tensor)));
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
    if (w == residence::resident) give_back(t, issue(b_.free(t)));
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
  double time_limit_s_;              ///< 0: none
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  runtime::caching_allocator alloc_;
  std::vector<index_t> block_of_;  ///< per tensor: its block while on the device (no_index: none, or 0 bytes)
  std::vector<index_t> maker_;     ///< per tensor: the action that made its device copy (no_index: there at the start)
  std::vector<bytes_t> offsets_;   ///< per device allocation, in allocation order (plan_layout.hpp)
  std::array<index_t, stream_count> last_ = no_stream_actions;  ///< per stream, the action issued last
  runtime::release_clock reused_ = runtime::no_release;  ///< the holders of the bytes the next action reuses
};


/// Executes `p`'s schedule under `budget` with `policy` deciding what to
/// release, allocating through `dev`'s allocator model (its `allocator`
/// and `alignment`) in an arena of the budget. An allocation that cannot be made room for makes the plan
/// infeasible (`result.feasible == false`, with the reason); the plan is
/// then cut at that step. So is one that runs past `time_limit_s` (0:
/// no limit).
/// \throws invalid_argument if the policy chooses a tensor that is not a
///         candidate, or evicts one that cannot be recomputed.
template <eviction_policy P>
[[nodiscard]] online_result run_online(const problem& p, const device_spec& dev, bytes_t budget, P& policy,
                                       std::string name, double time_limit_s = 0) {
  return online_runtime<P>(p, dev, budget, policy, std::move(name), time_limit_s).run();
}

}  // namespace memplan::detail::dtr
