#pragma once
/// \file
/// TSPLIT (Nie et al., ICDE 2022) §IV-C, Algo 2 over Eq. 2-6: walk the
/// schedule keeping M_i, the memory of step i under the decisions so far,
/// and at every memory bottleneck (M_i above the budget) evict the live
/// tensor whose option has the smallest ΔT/ΔM until the bottleneck is gone.
///
/// A decision evicts a tensor for one gap between two consecutive uses (or
/// its producer and its first use): it leaves the device after step `from`
/// and is back for step `to`. TSPLIT decides per tensor; a tensor read in
/// the forward pass and twice in the backward pass has two gaps, and a gap
/// is what a swap-out/swap-in pair or a free/recompute pair spans.
///
/// With `split` on, Algo 2's Step 2 also costs splitting the current op
/// into p_num micro-ops along the batch dimension (the only split dim whose
/// micro-tensors a plan can name, plan.hpp) and releasing one input's
/// micro-tensors as the micro-ops finish (Eq. 5-6), and Step 3 takes the
/// better of the two.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <set>
#include <utility>
#include <vector>

#include "memplan/cost/device.hpp"
#include "memplan/cost/split.hpp"
#include "memplan/plan.hpp"
#include "memplan/planners/tsplit/candidates.hpp"
#include "memplan/planners/tsplit/cost.hpp"
#include "memplan/problem.hpp"

namespace memplan::detail::tsplit {

/// One decision of Algo 2: tensor `tensor` is off the device after step
/// `from` until it is swapped in from step `prefetch` on, or recomputed just
/// before step `to`.
struct eviction {
  index_t tensor = no_index;
  index_t from = no_index;
  index_t to = no_index;
  index_t prefetch = no_index;  ///< swap: the step whose start triggers the swap-in
  option how = option::swap;
  index_t parts = 1;  ///< > 1: released micro-tensor by micro-tensor by the split op `from`
  /// Offloaded state (plan::offloaded_state): from the start (from =
  /// no_index) until its swap-in before its first use, and after its last
  /// use to the end (prefetch = to = the step count: it is not swapped in).
  bool offload = false;
  /// The first step at which the tensor is back on the device.
  [[nodiscard]] index_t back() const noexcept { return how == option::swap ? prefetch : to; }
};

/// Step `step` split into `parts` micro-ops (TSPLIT §IV-B, Split); micro-
/// tensor k of input `tensor` goes after micro-op k. `dead`: the input is
/// not read again, so its micro-tensors are just freed.
struct split_choice {
  index_t step = no_index;
  index_t tensor = no_index;
  index_t parts = 1;
  bool dead = false;
  index_t eviction = no_index;  ///< unless dead: into the evictions, how the input comes back
};

/// A costed option (TSPLIT Eq. 2-6) for the bottleneck at the current step.
struct candidate {
  eviction what;
  split_choice split;  ///< parts > 1: a split option (Eq. 5-6)
  bool delay = false;  ///< a swap-in already started (back <= i < to) moved after step i
  double delta_t = std::numeric_limits<double>::infinity();  ///< ΔT_i, µs
  bytes_t delta_m = 0;                                       ///< ΔM_i, bytes (Eq. 2: size(s_j))
  [[nodiscard]] bool valid() const noexcept { return delta_m > 0 && delta_t < std::numeric_limits<double>::infinity(); }
  /// Smaller ΔT/ΔM first; cross-multiplied so that ΔT = 0 ties exactly.
  [[nodiscard]] bool better_than(const candidate& o) const noexcept {
    if (!o.valid()) return valid();
    return valid() && delta_t * static_cast<double>(o.delta_m) < o.delta_t * static_cast<double>(delta_m);
  }
};

/// Which options Algo 2 weighs (tsplit.hpp walks with several and keeps the
/// plan the simulator finds best).
struct walk_options {
  bool split = false;  ///< Step 2 of Algo 2: split options on the current op's inputs
  /// Parameters and optimizer state are candidates too, when no other
  /// option is left (see algo2::best()), and so are the tensors without a
  /// producer before their first use.
  bool swap_state = false;
  /// A checkpoint that a planned recomputation reads (an input of its
  /// chain on the device then, Eq. 4) counts as read at that step: a later
  /// decision's gap ends or starts there. Without it, Algo 2 may swap a
  /// checkpoint out across that read, and the recomputation then waits for
  /// a swap-in on demand; with it, the walk keeps more on the device, which
  /// costs other evictions. tsplit.hpp walks both ways.
  bool guard_checkpoints = false;
  /// With `swap_state`: the state's first and last gaps are one, across
  /// iterations: it lives in host memory between them (plan::offloaded_state),
  /// swapped in before its first use and out after its last (its update).
  /// The contract otherwise keeps it on the device at the start and the end,
  /// so the state alone caps what fits (TSPLIT Table V's parameter scale).
  bool offload_state = false;
  /// Eq. 3's occupancy on the compute stream's timeline with the
  /// collectives on the link (host_link); false: every op's time in turn,
  /// collectives aside, as the paper's one-stream model. tsplit.hpp walks
  /// both ways on a graph that communicates.
  bool collectives_on_link = true;
};

/// Does an update-phase op read (and so write, in place) t? Then offloaded
/// state is saved after its last use; else its host copy stays current.
[[nodiscard]] inline bool updated(const problem& p, index_t t) {
  return std::ranges::any_of(p.uses(t),
                             [&](index_t s) { return p.op_phase[static_cast<std::size_t>(s)] == phase::update; });
}

class algo2 {
 public:
  /// Split candidates: p_num tried for each input of the current op.
  static constexpr index_t split_parts[] = {2, 4, 8, 16, 32};

  algo2(const problem& p, const device_spec& dev, bytes_t budget, walk_options options = {})
      : algo2(p, dev, std::vector<bytes_t>(p.num_steps(), budget), options) {}
  /// With a budget per step (tsplit.hpp lowers it where a plan overflows).
  algo2(const problem& p, const device_spec& dev, std::vector<bytes_t> budget, walk_options options = {})
      : p_(&p), dev_(&dev), budget_(std::move(budget)), options_(options), base_(p.baseline_memory()),
        starts_(p.num_steps() + 1, 0), ends_(p.num_steps() + 1, 0), split_of_(p.num_steps(), no_index),
        parts_of_(p.num_tensors(), 1),
        out_(host_link(p, dev, options.collectives_on_link)), in_(out_), cursor_(p.num_tensors(), 0), live_(p, dev),
        relink_at_(p.num_steps() + 1),
        returning_at_(p.num_steps()),
        last_eviction_(p.num_tensors(), no_index), made_(p.producer), offloaded_(p.num_tensors(), 0),
        source_reads_(p.num_tensors()),
        step_stamp_(p.num_steps(), 0), last_read_(p.num_tensors(), no_index), tensor_stamp_(p.num_tensors(), 0) {
    // Tensors without a producer are live from step 0 (TSPLIT's m_0 holds
    // the input and the parameters W).
    for (std::size_t t = 0; t < p.num_tensors(); ++t) {
      if (p.producer[t] == no_index && !p.uses(static_cast<index_t>(t)).empty()) link(static_cast<index_t>(t));
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
    reduced_ += starts_[static_cast<std::size_t>(step_)] - ends_[static_cast<std::size_t>(step_)];
    for (const index_t t : p.outputs(step_)) link(t);
    for (const index_t t : relink_at_[static_cast<std::size_t>(step_)]) {  // its gap is over
      returning_.erase(key(t));
      link(t);
    }
    for (const index_t t : returning_at_[static_cast<std::size_t>(step_)]) {
      const eviction& e = evictions_[static_cast<std::size_t>(last_eviction_[static_cast<std::size_t>(t)])];
      if (e.how == option::swap && e.prefetch == step_) returning_.insert(key(t));
    }
  }
  [[nodiscard]] index_t step() const noexcept { return step_; }
  /// M_i - ΔM(S)_i: the memory of the current step under the decisions so far.
  [[nodiscard]] bytes_t memory() const { return base_[static_cast<std::size_t>(step_)] - reduced_; }
  /// The highest memory of the steps walked so far.
  [[nodiscard]] bytes_t peak() const noexcept { return peak_; }

  /// Algo 2 lines 5-18: applies the best option until M_i fits the budget.
  /// \returns false when no option is left and M_i still does not fit.
  bool resolve() {
    while (memory() > budget_[static_cast<std::size_t>(step_)]) {
      const candidate c = best();
      if (!c.valid()) return false;
      apply(c);
    }
    return true;
  }

  /// Algo 2 line 7: the (tensor, option) with the smallest ΔT/ΔM among the
  /// live tensors not read by the current op, oldest first on ties (then
  /// swap before recompute). Parameters and optimizer state (in TSPLIT's
  /// M_i too, §IV-A), with `swap_state`, are swapped only when nothing else
  /// is left: Eq. 3 often calls their copies free, early in the iteration,
  /// yet such large copies delay the activations' swaps behind them.
  [[nodiscard]] candidate best() {
    candidate best = cheapest(false);
    // Eq. 3 asks M_k + size(s_j) <= M over the swap-in's window [p, q]: a
    // swap-in that has started before this bottleneck may start after it.
    for (const std::uint64_t key : returning_) {
      const candidate c = delay_cost(static_cast<index_t>(key & 0xffffffffU));
      if (c.better_than(best)) best = c;
    }
    // Step 2 (lines 10-13): split options on the current op's inputs; Step 3
    // (line 15): the non-split option wins ties.
    if (options_.split) {
      for (const index_t t : p_->inputs(step_)) {
        for (const index_t parts : split_parts) {
          const candidate c = split_cost(t, parts, best);
          if (c.better_than(best)) best = c;
        }
      }
    }
    return best.valid() || !options_.swap_state ? best : cheapest(true);
  }

  /// Line 7 over the live tensors of the training's state (`state`) or the
  /// others: the index offers the pairs cheapest bound first and stops
  /// where no pair left can match the best.
  [[nodiscard]] candidate cheapest(bool state) {
    candidate best;
    const auto best_ratio = [&] {
      return best.valid() ? best.delta_t / static_cast<double>(best.delta_m) : std::numeric_limits<double>::infinity();
    };
    const auto earlier = [&](index_t t, option how) {
      const std::uint64_t k = key(t);
      const std::uint64_t b = key(best.what.tensor);
      return k < b || (k == b && how < best.what.how);
    };
    live_.visit(
        out_, step_, state, best_ratio,
        [&](index_t t, option how) {
          if (best.valid() && best.delta_t == 0 && !earlier(t, how)) {  // it can at most tie a free option
            return p_->live_begin(t) <= p_->live_begin(best.what.tensor);
          }
          const candidate c = cost(t, how, best);
          if (c.better_than(best) || (c.valid() && !best.better_than(c) && earlier(t, how))) best = c;
          return true;
        },
        state && options_.offload_state);
    return best;
  }

  /// Eq. 3 for offloading state t at a bottleneck in its first or last gap:
  /// its swap-in overlaps ops p .. first use - 1 (from the start on, or
  /// after the current step when that is in the first gap), its swap-out
  /// the ops after its last use, and what the link leaves idle there does
  /// not hide delays the iteration's end.
  [[nodiscard]] candidate offload_cost(index_t t) const {
    const auto ti = static_cast<std::size_t>(t);
    const auto uses = p_->uses(t);
    candidate c;
    if (offloaded_[ti] != 0) return c;
    const index_t first = uses.front();
    const bytes_t b = p_->bytes[ti];
    const double to_device = dev_->h2d.transfer_us(b);
    const double to_host = dev_->d2h.transfer_us(b);
    const index_t prefetch = in_.latest_start(step_ < first ? step_ + 1 : 0, first, to_device);
    c.what = {t, no_index, first, prefetch, option::swap, 1, true};
    const double out = updated(*p_, t) ? to_host : 0.0;  // else the host copy is still current
    c.delta_t = std::max(to_device - in_.idle(prefetch, first), 0.0) +
                std::max(out - out_.idle(uses.back() + 1, static_cast<index_t>(p_->num_steps())), 0.0);
    c.delta_m = b;
    return c;
  }

  /// Eq. 3's backward cost of t's swap-in once it starts after the current
  /// step: a bottleneck inside the window [p, q] of Eq. 3's constraint.
  [[nodiscard]] candidate delay_cost(index_t t) const {
    const auto ti = static_cast<std::size_t>(t);
    candidate c;
    const eviction& e = evictions_[static_cast<std::size_t>(last_eviction_[ti])];
    if (e.to <= step_ + 1 || p_->bytes[ti] == 0) return c;
    const double to_device = dev_->h2d.transfer_us(p_->bytes[ti]);
    c.what = e;
    c.what.prefetch = in_.latest_start(step_ + 1, e.to, to_device);
    c.delta_t = std::max(to_device - in_.idle(c.what.prefetch, e.to), 0.0);
    c.delta_m = p_->bytes[ti];
    c.delay = true;
    return c;
  }

  /// TSPLIT Eq. 5-6 for splitting the current op into `parts` micro-ops and
  /// releasing input t's micro-tensors as they finish: ΔM is the reuse
  /// between input and output micro-tensors, ΔT the swap or recompute of
  /// the micro-tensors (Eq. 3-4 on the parts) plus the split cost model's
  /// overhead. Invalid where the op, t or `parts` do not allow it.
  [[nodiscard]] candidate split_cost(index_t t, index_t parts, const candidate& bound = {}) {
    const problem& p = *p_;
    const auto ti = static_cast<std::size_t>(t);
    const auto si = static_cast<std::size_t>(step_);
    candidate c;
    const auto dims = p.split_dims(step_);
    // Once the op is split, more of its inputs may go with the same p_num.
    const index_t first = split_of_[si];
    const bool again = first != no_index;
    // A micro-batch holds a sample at least (plan.hpp), where the problem knows the batch.
    if ((again && splits_[static_cast<std::size_t>(first)].parts != parts) || std::ranges::find(dims, 0) == dims.end() ||
        !splits_with_batch(p.kind[ti]) || (parts_of_[ti] != 1 && parts_of_[ti] != parts) || p.bytes[ti] < parts ||
        (p.batch > 0 && parts > p.batch)) {
      return c;
    }
    bytes_t released = 0;  // inputs already released micro-tensor by micro-tensor
    for (std::size_t k = again ? static_cast<std::size_t>(first) : splits_.size(); k < splits_.size(); ++k) {
      if (splits_[k].tensor == t) return c;
      released += p.bytes[static_cast<std::size_t>(splits_[k].tensor)];
    }
    bytes_t out = 0;
    for (const index_t o : p.outputs(step_)) {
      if (splits_with_batch(p.kind[static_cast<std::size_t>(o)])) out += p.bytes[static_cast<std::size_t>(o)];
    }
    // Eq. 5; with inputs already going, the reuse they leave.
    c.delta_m = (parts - 1) * (std::min(released + p.bytes[ti], out) - std::min(released, out)) / parts;
    if (c.delta_m <= 0) return c;
    const double whole = p.time_us[si];
    const double split_time = split_time_us(*dev_, whole, parts);
    c.split = {step_, t, parts, false};
    const double overhead = again ? 0.0 : split_time - whole;  // ΔT_split(p_num, dim), Eq. 6
    // The next read of t after this op.
    const auto uses = p.uses(t);
    const std::size_t k = cursor_[ti] + (cursor_[ti] < uses.size() && uses[cursor_[ti]] == step_ ? 1 : 0);
    if (k >= uses.size() && !p.persistent(t)) {
      c.split.dead = true;
      c.delta_t = overhead;
      return c;
    }
    if (k >= uses.size()) return c;
    const index_t to = uses[k];
    c.what = {t, step_, to, no_index, option::swap, parts};
    // Eq. 6, first term: Eq. 3 summed over the micro-tensors. Micro-tensor
    // j is copied out while micro-ops j+1 .. parts-1 run.
    double to_host = 0;
    double to_device = 0;
    for (index_t j = 0; j < parts; ++j) {
      to_host += dev_->d2h.transfer_us(micro_bytes(p.bytes[ti], parts, j));
      to_device += dev_->h2d.transfer_us(micro_bytes(p.bytes[ti], parts, j));
    }
    const double overlap = (1 - out_.occupancy(step_)) * split_time * static_cast<double>(parts - 1) / parts;
    const index_t prefetch = in_.latest_start(step_ + 1, to, to_device);
    const double swap = std::max(to_host - overlap, 0.0) + std::max(to_device - in_.idle(prefetch, to), 0.0);
    const double limit = bound.valid() ? bound.delta_t * static_cast<double>(c.delta_m) /
                                             static_cast<double>(bound.delta_m) - overhead
                                       : std::numeric_limits<double>::infinity();
    const double recompute = p.producer[ti] == no_index ? std::numeric_limits<double>::infinity()
                                                        : recompute_cost(t, to, std::min(limit, swap));
    if (recompute < swap) {
      c.what.how = option::recompute;
      c.delta_t = recompute + overhead;
    } else {
      c.what.prefetch = prefetch;
      c.delta_t = swap + overhead;
    }
    return c;
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
    // Parameters and optimizer state are part of M_i like any tensor (TSPLIT
    // §IV-A: m_0 holds X, W_1, W_2) and may be swapped, but never
    // recomputed: they are the training's state. After their last use they
    // are away until the end of the iteration at most, which starts the
    // next one with them on the device (DESIGN.md §4).
    const bool persists = p.persistent(t);
    if (p.bytes[ti] == 0 || (persists && how == option::recompute)) return c;
    if (k >= uses.size() ? !persists : uses[k] == step_) return c;
    if (persists && options_.offload_state && p.producer[ti] == no_index && (k == 0 || k >= uses.size())) {
      return offload_cost(t);  // uses is not empty: t is linked
    }
    const auto end = static_cast<index_t>(p.num_steps());
    index_t to = k < uses.size() ? uses[k] : end;
    if (to == end && step_ + 1 >= end) return c;  // no step left to swap it back in
    // from: the use (or producer) before the gap; no_index: the start, for
    // a tensor without a producer, which the swap-out then begins (with
    // `swap_state` only, like the state itself).
    index_t from = k > 0 ? uses[k - 1] : p.producer[ti];
    if (from >= step_ || (from == no_index && !options_.swap_state)) return c;
    if (!source_reads_[ti].empty() && !recomputation_reads(t, from, to)) return c;
    const index_t last = last_eviction_[ti];
    if (last != no_index && evictions_[static_cast<std::size_t>(last)].to > step_) return c;  // evicted already
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

  /// Narrows the gap (from, to) around the current step to the planned
  /// recomputations' reads of t: a checkpoint a recomputation reads before
  /// step r must be on the device then, so a gap ends at r, or starts
  /// there. \returns false if one reads t before the current step itself.
  bool recomputation_reads(index_t t, index_t& from, index_t& to) const {
    for (const index_t r : source_reads_[static_cast<std::size_t>(t)]) {
      if (r == step_) return false;
      if (r < step_) from = std::max(from, r);
      if (r > step_) to = std::min(to, r);
    }
    return true;
  }

  /// Records the decision: M is reduced from the current step until t is
  /// back, and a swap occupies the link from when its copy can start. A
  /// split reduces M at this step (Eq. 5) and, unless the input is dead,
  /// evicts it from the next step on.
  void apply(const candidate& c) {
    if (c.what.offload && !c.delay) return offload(c.what);
    if (c.delay) {
      const auto ti = static_cast<std::size_t>(c.what.tensor);
      eviction& e = evictions_[static_cast<std::size_t>(last_eviction_[ti])];
      reduce_now(c.delta_m);
      ends_[static_cast<std::size_t>(c.what.prefetch)] += c.delta_m;
      e.prefetch = c.what.prefetch;
      made_[ti] = e.prefetch - 1;
      returning_.erase(key(c.what.tensor));
      if (e.prefetch < e.to) returning_at_[static_cast<std::size_t>(e.prefetch)].push_back(c.what.tensor);
      in_.occupy(e.prefetch, dev_->h2d.transfer_us(c.delta_m));
      return;
    }
    if (c.split.parts > 1) {
      const auto si = static_cast<std::size_t>(step_);
      if (split_of_[si] == no_index) split_of_[si] = static_cast<index_t>(splits_.size());
      splits_.push_back(c.split);
      if (!c.split.dead) splits_.back().eviction = static_cast<index_t>(evictions_.size());
      reduce_now(c.delta_m);
      ends_[si + 1] += c.delta_m;
      for (const index_t o : p_->outputs(step_)) {
        if (splits_with_batch(p_->kind[static_cast<std::size_t>(o)])) parts_of_[static_cast<std::size_t>(o)] = c.split.parts;
      }
      if (c.split.dead) return;
      const bytes_t b = p_->bytes[static_cast<std::size_t>(c.split.tensor)];
      starts_[si + 1] += b;
      if (c.what.how == option::recompute) recompute_transient(c.what);
      evict(c.what, b, step_);
      return;
    }
    reduce_now(c.delta_m);
    if (c.what.how == option::recompute) recompute_transient(c.what);
    evict(c.what, c.delta_m, made_[static_cast<std::size_t>(c.what.tensor)] + 1);
  }

  [[nodiscard]] const std::vector<split_choice>& splits() const noexcept { return splits_; }

  /// After the walk: adds the offloaded state's last gaps to evictions()
  /// (kept apart until now: the latest eviction of a tensor is the one
  /// the walk is inside or past).
  void finish() {
    evictions_.insert(evictions_.end(), last_gaps_.begin(), last_gaps_.end());
    last_gaps_.clear();
  }

  /// M_i of every step under all the decisions made (those of later
  /// bottlenecks lower earlier steps too): what the walk counts, after it.
  [[nodiscard]] std::vector<bytes_t> memory_curve() const {
    std::vector<bytes_t> m(p_->num_steps());
    bytes_t reduced = 0;
    for (std::size_t i = 0; i < m.size(); ++i) {
      reduced += starts_[i] - ends_[i];
      m[i] = base_[i] - reduced;
    }
    return m;
  }

 private:
  /// A reduction of M that starts at the current step (starts_ keeps it
  /// for memory_curve(); advance() has read this step's entry already).
  void reduce_now(bytes_t bytes) {
    reduced_ += bytes;
    starts_[static_cast<std::size_t>(step_)] += bytes;
  }

  /// Memory-centric recomputation (§V-D) makes I's intermediates for a
  /// moment just before step `to`, when the op's own outputs and workspace
  /// are not allocated yet, nor t until its producer runs: M_to counts what
  /// the chain's peak (chain_peak) exceeds those by, so that a bottleneck
  /// there is resolved like any other.
  void recompute_transient(const eviction& e) {
    (void)recompute_cost(e.tensor, e.to, std::numeric_limits<double>::infinity());
    if (options_.guard_checkpoints) {
      for (const index_t x : sources_) {
        auto& reads = source_reads_[static_cast<std::size_t>(x)];
        reads.insert(std::ranges::upper_bound(reads, e.to), e.to);
      }
    }
    const auto to = static_cast<std::size_t>(e.to);
    bytes_t own = p_->workspace[to];
    for (const index_t o : p_->outputs(e.to)) own += p_->bytes[static_cast<std::size_t>(o)];
    const auto ti = static_cast<std::size_t>(e.tensor);
    const bytes_t extra = std::max<bytes_t>(chain_peak(p_->producer[ti], e.to) - own - p_->bytes[ti], 0);
    ends_[to] += extra;
    starts_[to + 1] += extra;
  }

  /// Offloads state e.tensor (see offload_cost): M is reduced from the start
  /// until its swap-in and after its last use to the end, and the copies
  /// occupy the links there. The first gap is an eviction like any other
  /// (its swap-in may be delayed, its gap ends at the first use); the last
  /// one waits in last_gaps_ until finish().
  void offload(const eviction& e) {
    const auto ti = static_cast<std::size_t>(e.tensor);
    const bytes_t b = p_->bytes[ti];
    const index_t last = p_->uses(e.tensor).back();
    const auto end = static_cast<index_t>(p_->num_steps());
    offloaded_[ti] = 1;
    reduced_ += b;  // the current step is in one of the two gaps
    starts_[0] += b;
    starts_[static_cast<std::size_t>(last) + 1] += b;
    ends_[static_cast<std::size_t>(end)] += b;
    if (updated(*p_, e.tensor)) out_.occupy(last + 1, dev_->d2h.transfer_us(b));
    in_.occupy(e.prefetch, dev_->h2d.transfer_us(b));
    ends_[static_cast<std::size_t>(e.prefetch)] += b;
    made_[ti] = e.prefetch - 1;
    last_eviction_[ti] = static_cast<index_t>(evictions_.size());
    evictions_.push_back(e);
    unlink(e.tensor);
    if (step_ < e.to) {  // else the walk is past the first use: t stays unlinked
      relink_at_[static_cast<std::size_t>(e.to)].push_back(e.tensor);
      if (e.prefetch < e.to) returning_at_[static_cast<std::size_t>(e.prefetch)].push_back(e.tensor);
    }
    last_gaps_.push_back({e.tensor, last, end, end, option::swap, 1, true});
  }

  /// Bookkeeping of an eviction whose reduction `bytes` has started; its
  /// swap-out can start at step `copy_from`.
  void evict(const eviction& e, bytes_t bytes, index_t copy_from) {
    const auto ti = static_cast<std::size_t>(e.tensor);
    if (e.how == option::swap) {
      out_.occupy(copy_from, dev_->d2h.transfer_us(bytes));
      in_.occupy(e.prefetch, dev_->h2d.transfer_us(bytes));
    }
    ends_[static_cast<std::size_t>(e.back())] += bytes;
    made_[ti] = e.back() - 1;
    last_eviction_[ti] = static_cast<index_t>(evictions_.size());
    evictions_.push_back(e);
    unlink(e.tensor);  // no candidate until its next gap
    relink_at_[static_cast<std::size_t>(e.to)].push_back(e.tensor);
    if (e.how == option::swap && e.prefetch < e.to) {
      returning_at_[static_cast<std::size_t>(e.prefetch)].push_back(e.tensor);
    }
  }

 public:
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
    if (made == no_index || !p.recomputable[static_cast<std::size_t>(made)]) return never;
    stack_.push_back(made);
    step_stamp_[static_cast<std::size_t>(made)] = stamp_;
    double sum = 0;
    chain_.clear();
    sources_.clear();
    while (!stack_.empty()) {
      const index_t s = stack_.back();
      stack_.pop_back();
      sum += p.time_us[static_cast<std::size_t>(s)];
      if (sum > limit) return never;
      chain_.push_back(s);
      for (const index_t x : p.inputs(s)) {
        if (resident(x, at)) {
          if (options_.guard_checkpoints) sources_.push_back(x);
          continue;
        }
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

  /// The most memory the last recompute_cost's chain I takes at once when
  /// it runs memory-centric (tsplit/emit.hpp): its ops in schedule order,
  /// each op's outputs and workspace allocated while its inputs are held,
  /// each intermediate (an output of I but of `made`, t's producer; or an
  /// input swapped in on demand) freed after its last reader in I. Not the
  /// sum of the intermediates: the emitted chain holds only a few of them
  /// at a time, and the sum would leave Algo 2 no option where one fits.
  [[nodiscard]] bytes_t chain_peak(index_t made, index_t at) {
    const problem& p = *p_;
    std::ranges::sort(chain_);
    const auto in_chain = [&](index_t x) {
      const index_t px = p.producer[static_cast<std::size_t>(x)];
      return px != no_index && px != made && std::ranges::binary_search(chain_, px);
    };
    for (const index_t s : chain_) {
      for (const index_t o : p.outputs(s)) last_read_[static_cast<std::size_t>(o)] = no_index;
    }
    for (const index_t s : chain_) {
      for (const index_t x : p.inputs(s)) last_read_[static_cast<std::size_t>(x)] = s;
    }
    bytes_t live = 0;
    bytes_t peak = 0;
    for (const index_t s : chain_) {
      for (const index_t x : p.inputs(s)) {  // swapped in on demand, once
        const auto xi = static_cast<std::size_t>(x);
        if (in_chain(x) || tensor_stamp_[xi] == stamp_ || resident(x, at)) continue;
        tensor_stamp_[xi] = stamp_;
        live += p.bytes[xi];
      }
      bytes_t out = 0;
      for (const index_t o : p.outputs(s)) out += p.bytes[static_cast<std::size_t>(o)];
      peak = std::max(peak, live + out + p.workspace[static_cast<std::size_t>(s)]);
      live += out;
      for (const index_t x : p.inputs(s)) {
        const auto xi = static_cast<std::size_t>(x);
        if (last_read_[xi] != s || (!in_chain(x) && tensor_stamp_[xi] != stamp_)) continue;
        last_read_[xi] = no_index;
        live -= p.bytes[xi];
      }
      if (s == made) continue;
      for (const index_t o : p.outputs(s)) {  // read by no op of I
        if (last_read_[static_cast<std::size_t>(o)] == no_index) live -= p.bytes[static_cast<std::size_t>(o)];
      }
    }
    return peak;
  }

  /// Live tensors are kept oldest first (by the step that made them):
  /// TSPLIT §IV-C, swapping out an earlier tensor should be prioritised.
  [[nodiscard]] std::uint64_t key(index_t t) const {
    return (static_cast<std::uint64_t>(p_->live_begin(t)) << 32) | static_cast<std::uint32_t>(t);
  }
  void link(index_t t) { live_.insert(t, made_[static_cast<std::size_t>(t)]); }
  void unlink(index_t t) { live_.erase(t); }

  const problem* p_;
  const device_spec* dev_;
  std::vector<bytes_t> budget_;  ///< per step
  walk_options options_;
  std::vector<bytes_t> base_;  ///< M_i with no decision
  std::vector<bytes_t> starts_;  ///< per step: reductions that start there
  std::vector<bytes_t> ends_;  ///< per step: reductions that end there (the tensor is back)
  std::vector<index_t> split_of_;   ///< per step: into splits_, or no_index
  std::vector<index_t> parts_of_;   ///< per tensor: micro-tensors it is made in (1: whole)
  std::vector<split_choice> splits_;
  bytes_t reduced_ = 0;        ///< ΔM(S)_i at the current step
  bytes_t peak_ = 0;
  link_occupancy out_;         ///< Oc_u of the d2h direction
  link_occupancy in_;          ///< Oc_u of the h2d direction
  index_t step_ = -1;
  std::vector<std::size_t> cursor_;  ///< per tensor: its first use at or after the current step
  candidate_index live_;  ///< the candidates: live, read again, not evicted now
  std::vector<std::vector<index_t>> relink_at_;  ///< per step (and the end): evicted tensors whose gap ends there
  std::set<std::uint64_t> returning_;  ///< swapped out, and their swap-in has started
  std::vector<std::vector<index_t>> returning_at_;  ///< per step: swap-ins that start there
  std::vector<index_t> last_eviction_;  ///< per tensor, into evictions_
  std::vector<index_t> made_;  ///< per tensor: the step after which its device copy exists (j of Eq. 3)
  std::vector<eviction> evictions_;
  std::vector<eviction> last_gaps_;      ///< offloaded state's gaps after its last use (finish())
  std::vector<std::uint8_t> offloaded_;  ///< per tensor: offloaded state
  std::vector<index_t> chain_;  ///< the last recompute_cost's I
  /// With guard_checkpoints: the last recompute_cost's inputs read on the device (its checkpoints).
  std::vector<index_t> sources_;
  /// Per tensor: the steps before which a planned recomputation reads it
  /// (as a checkpoint), ascending — reads like the schedule's own.
  std::vector<std::vector<index_t>> source_reads_;
  std::vector<std::uint32_t> step_stamp_;
  std::vector<index_t> last_read_;  ///< per tensor: its last reader in chain_ (chain_peak's scratch)
  std::vector<std::uint32_t> tensor_stamp_;  ///< per tensor: swapped in for chain_ (chain_peak's scratch)
  std::uint32_t stamp_ = 0;
  std::vector<index_t> stack_;
};

}  // namespace memplan::detail::tsplit
