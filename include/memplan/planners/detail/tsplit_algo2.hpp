#pragma once
/// \file
/// TSPLIT Algo 2 (§IV-C), the non-split options: walk the schedule keeping
/// M_i, the memory of step i under the decisions so far, and at every
/// memory bottleneck (M_i above the budget) evict the live tensor whose
/// option has the smallest ΔT/ΔM (Eq. 2-4) until the bottleneck is gone.
///
/// A decision evicts a tensor for one gap between two consecutive uses (or
/// its producer and its first use): it leaves the device after step `from`
/// and is back for step `to`. TSPLIT decides per tensor; a tensor read in
/// the forward pass and twice in the backward pass has two gaps, and a gap
/// is what a swap-out/swap-in pair or a free/recompute pair spans.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "memplan/cost/device.hpp"
#include "memplan/planners/detail/tsplit_cost.hpp"
#include "memplan/problem.hpp"

namespace memplan::detail::tsplit {

enum class option : std::uint8_t { swap, recompute };

/// One decision of Algo 2: tensor `tensor` is off the device after step
/// `from` until it is swapped in from step `prefetch` on, or recomputed just
/// before step `to`.
struct eviction {
  index_t tensor = no_index;
  index_t from = no_index;
  index_t to = no_index;
  index_t prefetch = no_index;  ///< swap: the step whose start triggers the swap-in
  option how = option::swap;
  /// The first step at which the tensor is back on the device.
  [[nodiscard]] index_t back() const noexcept { return how == option::swap ? prefetch : to; }
};

/// A costed option (TSPLIT Eq. 2-4) for the bottleneck at the current step.
struct candidate {
  eviction what;
  double delta_t = std::numeric_limits<double>::infinity();  ///< ΔT_i, µs
  bytes_t delta_m = 0;                                       ///< ΔM_i, bytes (Eq. 2: size(s_j))
  [[nodiscard]] bool valid() const noexcept { return delta_m > 0 && delta_t < std::numeric_limits<double>::infinity(); }
  /// Smaller ΔT/ΔM first; cross-multiplied so that ΔT = 0 ties exactly.
  [[nodiscard]] bool better_than(const candidate& o) const noexcept {
    if (!o.valid()) return valid();
    return valid() && delta_t * static_cast<double>(o.delta_m) < o.delta_t * static_cast<double>(delta_m);
  }
};

class algo2 {
 public:
  algo2(const problem& p, const device_spec& dev, bytes_t budget)
      : p_(&p), dev_(&dev), budget_(budget), base_(p.baseline_memory()), ends_(p.num_steps() + 1, 0),
        out_(p.time_us), in_(p.time_us), cursor_(p.num_tensors(), 0), prev_(p.num_tensors() + 1, no_index),
        next_(p.num_tensors() + 1, no_index), last_eviction_(p.num_tensors(), no_index),
        made_(p.producer), step_stamp_(p.num_steps(), 0) {
    head_ = static_cast<index_t>(p.num_tensors());
    prev_[static_cast<std::size_t>(head_)] = next_[static_cast<std::size_t>(head_)] = head_;
    // Inputs without a producer are live from step 0; older tensors first
    // (TSPLIT §IV-C: swapping out an earlier tensor should be prioritised).
    for (std::size_t t = 0; t < p.num_tensors(); ++t) {
      if (p.producer[t] == no_index && !p.persistent(static_cast<index_t>(t))) link(static_cast<index_t>(t));
    }
  }

  /// Moves the walk to step `i` (the next step), finishing the current one.
  void advance() {
    const problem& p = *p_;
    if (step_ >= 0) {
      peak_ = std::max(peak_, memory());
      for (const index_t t : p.inputs(step_)) {
        const auto ti = static_cast<std::size_t>(t);
        const auto uses = p.uses(t);
        if (cursor_[ti] < uses.size() && uses[cursor_[ti]] == step_) ++cursor_[ti];
        if (p.live_end(t) == step_) unlink(t);
      }
      for (const index_t t : p.outputs(step_)) {
        if (p.live_end(t) == step_) unlink(t);
      }
    }
    ++step_;
    if (static_cast<std::size_t>(step_) >= p.num_steps()) return;
    reduced_ -= ends_[static_cast<std::size_t>(step_)];
    for (const index_t t : p.outputs(step_)) {
      if (!p.persistent(t)) link(t);
    }
  }
  [[nodiscard]] index_t step() const noexcept { return step_; }
  /// M_i - ΔM(S)_i: the memory of the current step under the decisions so far.
  [[nodiscard]] bytes_t memory() const { return base_[static_cast<std::size_t>(step_)] - reduced_; }
  /// The highest memory of the steps walked so far.
  [[nodiscard]] bytes_t peak() const noexcept { return peak_; }

  /// Algo 2 lines 5-8: evicts the best option until M_i fits the budget.
  /// \returns false when no option is left and M_i still does not fit.
  bool resolve() {
    while (memory() > budget_) {
      const candidate c = best();
      if (!c.valid()) return false;
      apply(c);
    }
    return true;
  }

  /// Algo 2 line 7: the (tensor, option) with the smallest ΔT/ΔM among the
  /// live tensors not read by the current op, oldest first on ties.
  [[nodiscard]] candidate best() {
    candidate best;
    for (index_t t = next_[static_cast<std::size_t>(head_)]; t != head_; t = next_[static_cast<std::size_t>(t)]) {
      for (const option how : {option::swap, option::recompute}) {
        const candidate c = cost(t, how, best);
        if (c.better_than(best)) best = c;
      }
      if (best.valid() && best.delta_t == 0) break;  // nothing beats a free option
    }
    return best;
  }

  /// ΔT and ΔM of evicting t with `how` for the bottleneck at the current
  /// step; invalid when t may not be evicted so. `bound`: give up computing
  /// (invalid) once ΔT/ΔM cannot beat it.
  [[nodiscard]] candidate cost(index_t t, option how, const candidate& bound = {}) {
    const problem& p = *p_;
    const auto ti = static_cast<std::size_t>(t);
    candidate c;
    const auto uses = p.uses(t);
    const std::size_t k = cursor_[ti];
    if (p.bytes[ti] == 0 || p.persistent(t) || k >= uses.size() || uses[k] == step_) return c;
    const index_t from = k > 0 ? uses[k - 1] : p.producer[ti];
    const index_t to = uses[k];
    if (from == no_index || from >= step_) return c;
    const index_t last = last_eviction_[ti];
    if (last != no_index && evictions_[static_cast<std::size_t>(last)].to == to) return c;  // evicted already
    c.what = {t, from, to, no_index, how};
    c.delta_m = p.bytes[ti];  // TSPLIT Eq. 2
    if (how == option::swap) {
      const swap_cost s = swap_cost_of(out_, in_, *dev_, p.bytes[ti], made_[ti], step_, to);  // Eq. 3
      c.what.prefetch = s.prefetch;
      c.delta_t = s.total_us();
    } else {
      const double limit = bound.valid() ? bound.delta_t * static_cast<double>(c.delta_m) /
                                                static_cast<double>(bound.delta_m)
                                          : std::numeric_limits<double>::infinity();
      c.delta_t = recompute_cost(t, to, limit);
    }
    return c;
  }

  /// Records the decision: M is reduced from the current step until t is
  /// back, and a swap occupies the link from when its copy can start.
  void apply(const candidate& c) {
    const eviction& e = c.what;
    const auto ti = static_cast<std::size_t>(e.tensor);
    if (e.how == option::swap) {
      out_.occupy(made_[ti] + 1, dev_->d2h.transfer_us(c.delta_m));
      in_.occupy(e.prefetch, dev_->h2d.transfer_us(c.delta_m));
    }
    reduced_ += c.delta_m;
    ends_[static_cast<std::size_t>(e.back())] += c.delta_m;
    made_[ti] = e.back() - 1;
    last_eviction_[ti] = static_cast<index_t>(evictions_.size());
    evictions_.push_back(e);
  }

  [[nodiscard]] const std::vector<eviction>& evictions() const noexcept { return evictions_; }
  [[nodiscard]] const link_occupancy& d2h() const noexcept { return out_; }
  [[nodiscard]] const link_occupancy& h2d() const noexcept { return in_; }

 private:
  /// The eviction that keeps t off the device at step s, if any (only the
  /// latest can: s is past every earlier one).
  [[nodiscard]] const eviction* evicted_at(index_t t, index_t s) const {
    const index_t last = last_eviction_[static_cast<std::size_t>(t)];
    if (last == no_index) return nullptr;
    const eviction& e = evictions_[static_cast<std::size_t>(last)];
    return e.from < s && s < e.back() ? &e : nullptr;
  }
  /// Is t on the device at step s under the decisions so far?
  [[nodiscard]] bool resident(index_t t, index_t s) const {
    const problem& p = *p_;
    if (p.persistent(t)) return true;
    if (s < p.live_begin(t) || s > p.live_end(t)) return false;
    return evicted_at(t, s) == nullptr;
  }

  /// TSPLIT Eq. 4: Σ T_u over the ops I that must run just before step `at`
  /// to make t again — its producer, and recursively the producers of those
  /// inputs that are themselves recomputed or dead by then; an input swapped
  /// out then is swapped in on demand, costing its transfer. Infinite if
  /// some op of I may not be recomputed, or once the sum passes `limit`.
  [[nodiscard]] double recompute_cost(index_t t, index_t at, double limit) {
    const problem& p = *p_;
    constexpr double never = std::numeric_limits<double>::infinity();
    ++stamp_;
    stack_.clear();
    const index_t made = p.producer[static_cast<std::size_t>(t)];
    if (!p.recomputable[static_cast<std::size_t>(made)]) return never;
    stack_.push_back(made);
    step_stamp_[static_cast<std::size_t>(made)] = stamp_;
    double sum = 0;
    while (!stack_.empty()) {
      const index_t s = stack_.back();
      stack_.pop_back();
      sum += p.time_us[static_cast<std::size_t>(s)];
      if (sum > limit) return never;
      for (const index_t x : p.inputs(s)) {
        if (resident(x, at)) continue;
        if (const eviction* e = evicted_at(x, at); e != nullptr && e->how == option::swap) {
          sum += dev_->h2d.transfer_us(p.bytes[static_cast<std::size_t>(x)]);
          continue;
        }
        const index_t px = p.producer[static_cast<std::size_t>(x)];
        if (px == no_index || !p.recomputable[static_cast<std::size_t>(px)]) return never;
        if (step_stamp_[static_cast<std::size_t>(px)] == stamp_) continue;
        step_stamp_[static_cast<std::size_t>(px)] = stamp_;
        stack_.push_back(px);
      }
    }
    return sum;
  }

  void link(index_t t) {
    const index_t tail = prev_[static_cast<std::size_t>(head_)];
    prev_[static_cast<std::size_t>(t)] = tail;
    next_[static_cast<std::size_t>(t)] = head_;
    next_[static_cast<std::size_t>(tail)] = t;
    prev_[static_cast<std::size_t>(head_)] = t;
  }
  void unlink(index_t t) {
    const auto ti = static_cast<std::size_t>(t);
    if (prev_[ti] == no_index) return;
    next_[static_cast<std::size_t>(prev_[ti])] = next_[ti];
    prev_[static_cast<std::size_t>(next_[ti])] = prev_[ti];
    prev_[ti] = next_[ti] = no_index;
  }

  const problem* p_;
  const device_spec* dev_;
  bytes_t budget_;
  std::vector<bytes_t> base_;  ///< M_i with no decision
  std::vector<bytes_t> ends_;  ///< per step: reductions that end there (the tensor is back)
  bytes_t reduced_ = 0;        ///< ΔM(S)_i at the current step
  bytes_t peak_ = 0;
  link_occupancy out_;         ///< Oc_u of the d2h direction
  link_occupancy in_;          ///< Oc_u of the h2d direction
  index_t step_ = -1;
  std::vector<std::size_t> cursor_;  ///< per tensor: its first use at or after the current step
  // The live non-persistent tensors, a list in the order they became live.
  std::vector<index_t> prev_;
  std::vector<index_t> next_;
  index_t head_ = 0;
  std::vector<index_t> last_eviction_;  ///< per tensor, into evictions_
  std::vector<index_t> made_;  ///< per tensor: the step after which its device copy exists (j of Eq. 3)
  std::vector<eviction> evictions_;
  std::vector<std::uint32_t> step_stamp_;
  std::uint32_t stamp_ = 0;
  std::vector<index_t> stack_;
};

}  // namespace memplan::detail::tsplit
