#pragma once
/// \file
/// `memplan::plan`: what a planner decides — a decision per tensor and the
/// action list the simulator judges and the executor runs.
///
/// Semantics of the action list (the contract between planners, the
/// simulator, the validator and the executor):
/// - Actions are listed in issue order. Each runs on the stream its kind
///   names (`stream_of`) after the previous action of that stream has ended
///   and after every action in its wait list (always earlier in the list)
///   has ended. Nothing else orders actions on different streams.
/// - `compute(s)` runs the op of step s; `recompute(s)` runs it again to
///   bring back those of its outputs that are not on the device. Both read
///   the op's inputs, which must be on the device (made by an earlier action
///   that has ended). They allocate the outputs they make and the op's
///   workspace when they start and free the workspace when they end.
/// - `swap_out(t)` copies t to the host (d2h) and then releases t's device
///   copy; `swap_in(t)` allocates t when it starts and copies it back (h2d);
///   it must come after a swap_out of t has ended.
/// - `free(t)` releases t's device copy without saving it (it will be
///   recomputed or is dead).
/// - A release (by swap_out or free) takes effect once every earlier-issued
///   action that reads or writes that copy has ended; a tensor whose last
///   reader in the whole list has ended is released automatically, unless
///   it is persistent (parameter, optimizer state).
/// - Tensors without a producer are on the device at time 0.
/// - If an allocation does not fit the budget, the action waits for frees
///   of actions in flight; if none can come, the plan is out of memory.

#include <array>
#include <cstdint>
#include <string_view>
#include <utility>
#include <span>
#include <string>
#include <vector>

#include "memplan/fwd.hpp"
#include "memplan/problem.hpp"

namespace memplan {

enum class action_kind : std::uint8_t { compute, recompute, swap_out, swap_in, free };
enum class stream_kind : std::uint8_t { compute, d2h, h2d };
inline constexpr int stream_count = 3;

[[nodiscard]] constexpr stream_kind stream_of(action_kind k) noexcept {
  switch (k) {
    case action_kind::swap_out: return stream_kind::d2h;
    case action_kind::swap_in: return stream_kind::h2d;
    default: return stream_kind::compute;
  }
}

/// Action kinds as files, messages and traces spell them.
inline constexpr std::array<std::string_view, 5> action_kind_names{"compute", "recompute", "swap_out", "swap_in",
                                                                   "free"};
[[nodiscard]] constexpr std::string_view to_string(action_kind k) noexcept {
  return action_kind_names[static_cast<std::size_t>(k)];
}

/// What a planner decided for a tensor, for reports; the actions are the truth.
enum class decision : std::uint8_t { keep, swap, recompute, split };

struct action {
  action_kind kind = action_kind::compute;
  index_t step = no_index;    ///< compute / recompute: the step whose op runs
  index_t tensor = no_index;  ///< swap_out / swap_in / free: the tensor
  index_t parts = 1;          ///< compute / recompute: micro-batches the op is split into (1 = whole)
};

/// A search planner's best plan after one iteration (HOME Fig. 8): its
/// simulated time, and by how much it exceeds the budget (0: it fits).
struct search_point {
  double time_us = 0;
  bytes_t excess_bytes = 0;
};

struct plan {
  std::string planner;
  bool feasible = true;
  std::string reason;        ///< why not feasible; for a feasible plan, a caveat (milp: stopped early, its gap) or empty
  bytes_t budget = 0;
  bytes_t best_peak = 0;     ///< the smallest peak the planner reached, as it estimated it
  std::vector<decision> decisions;  ///< per tensor
  std::vector<action> actions;
  std::vector<index_t> wait_begin{0};  ///< CSR offsets into `waits` (actions + 1)
  std::vector<index_t> waits;          ///< indices of earlier actions
  std::vector<search_point> history;   ///< search planners: the best plan after each iteration; else empty

  [[nodiscard]] std::span<const index_t> waits_of(std::size_t a) const {
    const auto b = static_cast<std::size_t>(wait_begin[a]);
    return {waits.data() + b, static_cast<std::size_t>(wait_begin[a + 1]) - b};
  }
  /// Appends an action that waits on `on` (indices of earlier actions).
  index_t push(action a, std::span<const index_t> on = {}) {
    actions.push_back(a);
    waits.insert(waits.end(), on.begin(), on.end());
    wait_begin.push_back(static_cast<index_t>(waits.size()));
    return static_cast<index_t>(actions.size() - 1);
  }
};

/// Builds an action list and adds the waits it needs: a compute waits for
/// the swap-ins of its inputs, a swap-out for the action that made the copy
/// it saves, a swap-in for the swap-out it undoes. Planners emit actions in
/// issue order and let the builder derive the events.
class plan_builder {
 public:
  plan_builder(const problem& p, std::string planner, bytes_t budget) : p_(&p), made_by_(p.num_tensors(), no_index), saved_by_(p.num_tensors(), no_index), on_device_(p.num_tensors(), 0) {
    for (std::size_t t = 0; t < p.num_tensors(); ++t) on_device_[t] = p.producer[t] == no_index ? 1 : 0;
    plan_.planner = std::move(planner);
    plan_.budget = budget;
    plan_.decisions.assign(p.num_tensors(), decision::keep);
  }

  index_t compute(index_t step, index_t parts = 1) { return run(action_kind::compute, step, parts); }
  index_t recompute(index_t step, index_t parts = 1) { return run(action_kind::recompute, step, parts); }
  /// `after`: more actions to wait for. Copy streams run ahead of the
  /// compute stream, so a swap starts as soon as its events fire; a prefetch
  /// needs an in-trigger (Capuchin §4.3) or it would bring the tensor back
  /// as soon as it left.
  index_t swap_out(index_t t, std::span<const index_t> after = {}) {
    const index_t a = swap(action_kind::swap_out, t, made_by_[static_cast<std::size_t>(t)], after);
    saved_by_[static_cast<std::size_t>(t)] = a;
    on_device_[static_cast<std::size_t>(t)] = 0;
    return a;
  }
  index_t swap_in(index_t t, std::span<const index_t> after = {}) {
    const index_t a = swap(action_kind::swap_in, t, saved_by_[static_cast<std::size_t>(t)], after);
    made_by_[static_cast<std::size_t>(t)] = a;
    on_device_[static_cast<std::size_t>(t)] = 1;
    return a;
  }
  index_t free(index_t t) {
    on_device_[static_cast<std::size_t>(t)] = 0;
    return plan_.push({action_kind::free, no_index, t, 1});
  }

  void decide(index_t t, decision d) { plan_.decisions[static_cast<std::size_t>(t)] = d; }
  void infeasible(std::string reason, bytes_t best_peak) {
    plan_.feasible = false;
    plan_.reason = std::move(reason);
    plan_.best_peak = best_peak;
  }
  void set_best_peak(bytes_t peak) { plan_.best_peak = peak; }
  [[nodiscard]] const plan& current() const noexcept { return plan_; }
  [[nodiscard]] plan finish() && { return std::move(plan_); }

 private:
  index_t swap(action_kind kind, index_t t, index_t source, std::span<const index_t> after) {
    on_.assign(after.begin(), after.end());
    if (source != no_index) on_.push_back(source);
    return plan_.push({kind, no_index, t, 1}, on_);
  }
  index_t run(action_kind kind, index_t step, index_t parts) {
    on_.clear();
    for (const index_t t : p_->inputs(step)) {
      const index_t m = made_by_[static_cast<std::size_t>(t)];
      if (m != no_index && plan_.actions[static_cast<std::size_t>(m)].kind == action_kind::swap_in) on_.push_back(m);
    }
    const index_t a = plan_.push({kind, step, no_index, parts}, on_);
    // A recompute makes only the outputs that are not on the device; a
    // swapped-in one keeps its swap-in as its maker.
    for (const index_t t : p_->outputs(step)) {
      const auto ti = static_cast<std::size_t>(t);
      if (kind == action_kind::recompute && on_device_[ti]) continue;
      made_by_[ti] = a;
      on_device_[ti] = 1;
    }
    return a;
  }

  const problem* p_;
  plan plan_;
  std::vector<index_t> made_by_;   ///< per tensor: the action that made its current device copy
  std::vector<index_t> saved_by_;  ///< per tensor: its latest swap_out
  std::vector<std::uint8_t> on_device_;  ///< per tensor: a device copy exists after the actions so far
  std::vector<index_t> on_;
};

/// The `none` plan: every op once, in schedule order; nothing released early.
[[nodiscard]] inline plan keep_all_plan(const problem& p, bytes_t budget) {
  plan_builder b(p, "none", budget);
  for (std::size_t s = 0; s < p.num_steps(); ++s) b.compute(static_cast<index_t>(s));
  b.set_best_peak(p.baseline_peak());
  return std::move(b).finish();
}

}  // namespace memplan
