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
/// - Tensors without a producer are on the device at time 0, except the
///   plan's `offloaded_state`: parameters and optimizer state (without a
///   producer) that live in
///   host memory between iterations (as in ZeRO-Offload, or TSPLIT Table V's
///   parameter scale). Each starts in host memory, its host copy there from
///   the start, so a `swap_in` without an earlier swap_out brings it in; and
///   it must end the iteration there: not on the device at the end, its
///   latest swap_out waiting on the last update-phase compute that reads it
///   (an update writes the state it reads, in place).
/// - If an allocation does not fit the budget, the action waits for frees
///   of actions in flight; if none can come, the plan is out of memory.
///
/// Split ops and micro-tensors (TSPLIT §V-A, Fig. 10). `parts` > 1 cuts an
/// op into micro-ops along the outermost (batch) dimension:
/// - `compute(s, parts)` with `part` = no_index runs all micro-ops back to
///   back as one action: it takes `split_time_us` and needs one part's
///   workspace, ceil(workspace / parts); its tensors stay whole.
/// - `compute(s, parts, k)` runs micro-op k only (0 <= k < parts), for
///   split_time_us / parts with ceil(workspace / parts) of workspace. A step
///   is computed either whole, once, or by micro-ops 0, 1, ..., parts-1 in
///   that order; `recompute(s, parts, k)` redoes a micro-op of a computed step.
/// - The *sample tensors* of a micro-op — its inputs and outputs of kind
///   input, activation or gradient (`splits_with_batch`) — are split:
///   micro-op k reads and makes micro-tensor k of each, of
///   `micro_bytes(bytes, parts, k)` bytes (the parts add up to the tensor).
///   Its other tensors are whole: parameters are read whole, and a whole
///   output (a parameter gradient: the micro-ops' sum) is made by micro-op 0
///   and written by the later ones.
/// - A tensor is on the device whole, or as micro-tensors of one `parts`
///   count. Micro-tensors of one tensor are contiguous, so views are free
///   (zero-copy): micro-tensor k can be read from the whole tensor, and an
///   op reads a tensor whole when all its micro-tensors are on the device
///   (the merge of Fig. 10). Reading micro-tensor k of `parts` needs the
///   whole tensor, micro-tensor k of that same `parts`, or all the
///   micro-tensors of another `parts` count (merged and split again in place).
/// - `swap_out(t, parts, k)` and `free(t, parts, k)` release micro-tensor k
///   alone; `swap_in(t, parts, k)` brings it back from a host copy of that
///   micro-tensor or of the whole tensor. Releasing a micro-tensor of a
///   whole tensor splits it in place: every earlier-issued action holding
///   the whole tensor must have ended before the release starts (by stream
///   order or waits), then the tensor is `parts` micro-tensors and only the
///   released one goes. A whole release or swap-in of a tensor held as
///   micro-tensors is invalid; a whole recompute leaves an output that is
///   on the device whole or as all its micro-tensors, makes it if none of
///   them is there, and is invalid if only some are.

#include <algorithm>
#include <array>
#include <cstdint>
#include <string_view>
#include <utility>
#include <span>
#include <string>
#include <vector>

#include "memplan/failure.hpp"
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
  index_t parts = 1;          ///< micro-batches the op (or the tensor) is split into (1 = whole)
  index_t part = no_index;    ///< with parts > 1: the micro-op or micro-tensor; no_index: all of them
};

/// Tensors split with the batch dimension when their op is (plan.hpp's
/// comment): those that carry samples.
[[nodiscard]] constexpr bool splits_with_batch(tensor_kind k) noexcept {
  return k == tensor_kind::input || k == tensor_kind::activation || k == tensor_kind::gradient;
}
/// Bytes of micro-tensor k of a tensor of `bytes` cut into `parts`.
[[nodiscard]] constexpr bytes_t micro_bytes(bytes_t bytes, index_t parts, index_t k) noexcept {
  return bytes * (k + 1) / parts - bytes * k / parts;
}

/// A search planner's best plan after one iteration (HOME Fig. 8): its
/// simulated time, and by how much it exceeds the budget (0: it fits).
struct search_point {
  double time_us = 0;
  bytes_t excess_bytes = 0;
};

struct plan {
  std::string planner;
  bool feasible = true;
  /// Why not feasible: `none` when feasible; else out_of_memory (its best
  /// plan needs more than the budget), planner_gave_up, time_limit, or
  /// invalid_plan (a planner's bug). Not stored in plan documents.
  failure_kind kind = failure_kind::none;
  std::string reason;        ///< why not feasible; for a feasible plan, a caveat (milp: stopped early, its gap) or empty
  bytes_t budget = 0;
  bytes_t best_peak = 0;     ///< the smallest peak the planner reached, as it estimated it
  std::vector<decision> decisions;  ///< per tensor
  std::vector<action> actions;
  std::vector<index_t> wait_begin{0};  ///< CSR offsets into `waits` (actions + 1)
  std::vector<index_t> waits;          ///< indices of earlier actions
  std::vector<search_point> history;   ///< search planners: the best plan after each iteration; else empty
  std::vector<index_t> offloaded_state;  ///< persistent tensors in host memory between iterations, ascending

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
  plan_builder(const problem& p, std::string planner, bytes_t budget)
      : p_(&p), made_by_(p.num_tensors(), no_index), saved_by_(p.num_tensors(), no_index),
        on_device_(p.num_tensors(), 0), micro_(p.num_tensors()) {
    for (std::size_t t = 0; t < p.num_tensors(); ++t) on_device_[t] = p.producer[t] == no_index ? 1 : 0;
    plan_.planner = std::move(planner);
    plan_.budget = budget;
    plan_.decisions.assign(p.num_tensors(), decision::keep);
  }

  /// `part` >= 0: micro-op `part` of `parts` (plan.hpp's comment).
  index_t compute(index_t step, index_t parts = 1, index_t part = no_index) {
    return run(action_kind::compute, step, parts, part);
  }
  index_t recompute(index_t step, index_t parts = 1, index_t part = no_index) {
    return run(action_kind::recompute, step, parts, part);
  }
  /// `after`: more actions to wait for. Copy streams run ahead of the
  /// compute stream, so a swap starts as soon as its events fire; a prefetch
  /// needs an in-trigger (Capuchin §4.3) or it would bring the tensor back
  /// as soon as it left.
  index_t swap_out(index_t t, std::span<const index_t> after = {}) {
    const index_t a = swap(action_kind::swap_out, t, made_by_[static_cast<std::size_t>(t)], after, 1, no_index);
    saved_by_[static_cast<std::size_t>(t)] = a;
    on_device_[static_cast<std::size_t>(t)] = 0;
    return a;
  }
  index_t swap_in(index_t t, std::span<const index_t> after = {}) {
    const index_t a = swap(action_kind::swap_in, t, saved_by_[static_cast<std::size_t>(t)], after, 1, no_index);
    made_by_[static_cast<std::size_t>(t)] = a;
    on_device_[static_cast<std::size_t>(t)] = 1;
    return a;
  }
  index_t free(index_t t) {
    on_device_[static_cast<std::size_t>(t)] = 0;
    return last_compute_ = plan_.push({action_kind::free, no_index, t, 1, no_index});
  }
  /// Micro-tensor `part` of `parts` of t. Releasing one of a whole tensor
  /// splits it in place, so the release also waits for the latest
  /// compute-stream action and the copies that hold the whole tensor.
  index_t swap_out(index_t t, index_t parts, index_t part, std::span<const index_t> after = {}) {
    const index_t a = swap(action_kind::swap_out, t, release_source(t, parts, part), after, parts, part);
    micro_of(t, parts).saved[static_cast<std::size_t>(part)] = a;
    return a;
  }
  index_t swap_in(index_t t, index_t parts, index_t part, std::span<const index_t> after = {}) {
    micro_state& m = micro_of(t, parts);
    const index_t saved = m.saved[static_cast<std::size_t>(part)];
    const index_t a = swap(action_kind::swap_in, t, saved != no_index ? saved : saved_by_[static_cast<std::size_t>(t)],
                           after, parts, part);
    m.made[static_cast<std::size_t>(part)] = a;
    m.on_device[static_cast<std::size_t>(part)] = 1;
    return a;
  }
  index_t free(index_t t, index_t parts, index_t part) {
    const index_t source = release_source(t, parts, part);
    on_.assign(extra_.begin(), extra_.end());
    if (source != no_index) on_.push_back(source);
    return last_compute_ = plan_.push({action_kind::free, no_index, t, parts, part}, on_);
  }

  /// Persistent tensor t lives in host memory between iterations (see
  /// plan::offloaded_state); call before any action that touches it, in
  /// increasing order of t. Its last swap_out waits on its update.
  void offload(index_t t) {
    plan_.offloaded_state.push_back(t);
    on_device_[static_cast<std::size_t>(t)] = 0;
  }
  void decide(index_t t, decision d) { plan_.decisions[static_cast<std::size_t>(t)] = d; }
  void infeasible(failure_kind kind, std::string reason, bytes_t best_peak) {
    plan_.feasible = false;
    plan_.kind = kind;
    plan_.reason = std::move(reason);
    plan_.best_peak = best_peak;
  }
  void set_best_peak(bytes_t peak) { plan_.best_peak = peak; }
  [[nodiscard]] const plan& current() const noexcept { return plan_; }
  [[nodiscard]] plan finish() && { return std::move(plan_); }

 private:
  /// Per tensor held as micro-tensors: their makers, swap-outs, presence.
  struct micro_state {
    index_t parts = 0;
    std::vector<index_t> made, saved;
    std::vector<std::uint8_t> on_device;
  };
  micro_state& micro_of(index_t t, index_t parts) {
    micro_state& m = micro_[static_cast<std::size_t>(t)];
    if (m.parts != parts) {
      m.parts = parts;
      m.made.assign(static_cast<std::size_t>(parts), no_index);
      m.saved.assign(static_cast<std::size_t>(parts), no_index);
      m.on_device.assign(static_cast<std::size_t>(parts), 0);
    }
    return m;
  }
  /// Before releasing micro-tensor `part`: if t is whole, it becomes micro-
  /// tensors in place (extra waits go to `extra_`); returns the action that
  /// made the micro-tensor's data.
  index_t release_source(index_t t, index_t parts, index_t part) {
    const auto ti = static_cast<std::size_t>(t);
    extra_.clear();
    micro_state& m = micro_of(t, parts);
    if (on_device_[ti]) {
      on_device_[ti] = 0;
      for (const index_t h : {last_compute_, saved_by_[ti] > made_by_[ti] ? saved_by_[ti] : no_index}) {
        if (h != no_index) extra_.push_back(h);
      }
      m.made.assign(static_cast<std::size_t>(parts), made_by_[ti]);
      m.on_device.assign(static_cast<std::size_t>(parts), 1);
    }
    m.on_device[static_cast<std::size_t>(part)] = 0;
    return m.made[static_cast<std::size_t>(part)];
  }
  index_t swap(action_kind kind, index_t t, index_t source, std::span<const index_t> after, index_t parts,
               index_t part) {
    on_.assign(after.begin(), after.end());
    if (source != no_index) on_.push_back(source);
    if (kind == action_kind::swap_out && part != no_index) on_.insert(on_.end(), extra_.begin(), extra_.end());
    return plan_.push({kind, no_index, t, parts, part}, on_);
  }
  /// Waits for the swap-in that made the copy step `step` reads of t.
  void wait_for_maker(index_t t, index_t parts, index_t part) {
    const auto ti = static_cast<std::size_t>(t);
    const micro_state& m = micro_[ti];
    const auto add = [&](index_t maker) {
      if (maker != no_index && plan_.actions[static_cast<std::size_t>(maker)].kind == action_kind::swap_in) {
        on_.push_back(maker);
      }
    };
    if (on_device_[ti] || m.parts == 0) return add(made_by_[ti]);
    if (part != no_index && m.parts == parts) return add(m.made[static_cast<std::size_t>(part)]);
    for (const index_t maker : m.made) add(maker);  // read whole: every micro-tensor
  }
  index_t run(action_kind kind, index_t step, index_t parts, index_t part) {
    on_.clear();
    for (const index_t t : p_->inputs(step)) {
      const bool micro = part != no_index && splits_with_batch(p_->kind[static_cast<std::size_t>(t)]);
      wait_for_maker(t, parts, micro ? part : no_index);
    }
    const index_t a = last_compute_ = plan_.push({kind, step, no_index, parts, part}, on_);
    // An update writes the state it reads, in place: a later swap-out saves that.
    if (p_->op_phase[static_cast<std::size_t>(step)] == phase::update) {
      for (const index_t t : p_->inputs(step)) {
        if (p_->persistent(t)) made_by_[static_cast<std::size_t>(t)] = a;
      }
    }
    // A recompute makes only the outputs that are not on the device; a
    // swapped-in one keeps its swap-in as its maker.
    for (const index_t t : p_->outputs(step)) {
      const auto ti = static_cast<std::size_t>(t);
      if (part != no_index && splits_with_batch(p_->kind[ti]) && !on_device_[ti]) {
        micro_state& m = micro_of(t, parts);
        const auto k = static_cast<std::size_t>(part);
        if (kind == action_kind::recompute && m.on_device[k]) continue;
        m.made[k] = a;
        m.on_device[k] = 1;
        continue;
      }
      const micro_state& held = micro_[ti];
      const bool as_micro = held.parts > 0 && std::ranges::find(held.on_device, 0) == held.on_device.end();
      if (kind == action_kind::recompute && (on_device_[ti] || as_micro)) continue;
      if (part != no_index && part > 0 && on_device_[ti]) {  // a whole output: micro-op 0 made it, this one writes it too
        made_by_[ti] = a;
        continue;
      }
      made_by_[ti] = a;
      on_device_[ti] = 1;
      micro_[ti].parts = 0;
    }
    return a;
  }

  const problem* p_;
  plan plan_;
  std::vector<index_t> made_by_;   ///< per tensor: the action that made its current whole device copy
  std::vector<index_t> saved_by_;  ///< per tensor: its latest whole swap_out
  std::vector<std::uint8_t> on_device_;  ///< per tensor: a whole device copy exists after the actions so far
  std::vector<micro_state> micro_;       ///< per tensor: its micro-tensors, when split
  index_t last_compute_ = no_index;      ///< the latest compute-stream action
  std::vector<index_t> on_;
  std::vector<index_t> extra_;
};

/// The `none` plan: every op once, in schedule order; nothing released early.
[[nodiscard]] inline plan keep_all_plan(const problem& p, bytes_t budget) {
  plan_builder b(p, "none", budget);
  for (std::size_t s = 0; s < p.num_steps(); ++s) b.compute(static_cast<index_t>(s));
  b.set_best_peak(p.baseline_peak());
  return std::move(b).finish();
}

}  // namespace memplan
