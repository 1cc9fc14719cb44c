#pragma once
/// \file
/// What the fixed-strategy baselines (vdnn.hpp, checkpoint.hpp,
/// superneurons.hpp) share: which tensors are saved for the backward pass, an action emitter
/// that tracks where each tensor lives and brings it back (swap-in or
/// recompute) when an op needs it, and the final check against the budget.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "memplan/cost/device.hpp"
#include "memplan/error.hpp"
#include "memplan/plan.hpp"
#include "memplan/problem.hpp"
#include "memplan/planners/baselines/whole_tensor_builder.hpp"
#include "memplan/planners/verdict.hpp"
#include "memplan/sim/simulator.hpp"

namespace memplan::detail::baselines {

/// Per tensor: its last forward reader and first backward reader (no_index: none).
struct forward_backward_uses {
  std::vector<index_t> last_forward;
  std::vector<index_t> first_backward;

  explicit forward_backward_uses(const problem& p)
      : last_forward(p.num_tensors(), no_index), first_backward(p.num_tensors(), no_index) {
    for (std::size_t t = 0; t < p.num_tensors(); ++t) {
      for (const index_t s : p.uses(static_cast<index_t>(t))) {
        const phase ph = p.op_phase[static_cast<std::size_t>(s)];
        if (ph == phase::forward) last_forward[t] = s;
        if (ph == phase::backward && first_backward[t] == no_index) first_backward[t] = s;
      }
    }
  }
  /// The step after which the forward pass is done with t: its last forward
  /// reader, or its producer when no forward op reads it.
  [[nodiscard]] index_t forward_done(const problem& p, index_t t) const {
    const index_t f = last_forward[static_cast<std::size_t>(t)];
    return f != no_index ? f : p.producer[static_cast<std::size_t>(t)];
  }
  /// An activation (or input) made in the forward pass and read again in the
  /// backward pass after every forward read: what the baselines may evict.
  [[nodiscard]] bool saved_for_backward(const problem& p, index_t t) const {
    const auto ti = static_cast<std::size_t>(t);
    if (p.kind[ti] != tensor_kind::activation && p.kind[ti] != tensor_kind::input) return false;
    const index_t made = p.producer[ti];
    if (made != no_index && p.op_phase[static_cast<std::size_t>(made)] != phase::forward) return false;
    const index_t done = forward_done(p, t);
    return first_backward[ti] != no_index && done != no_index && done < first_backward[ti];
  }
  /// saved_for_backward and its producer may run again.
  [[nodiscard]] bool droppable(const problem& p, index_t t) const {
    const index_t made = p.producer[static_cast<std::size_t>(t)];
    return saved_for_backward(p, t) && made != no_index && p.recomputable[static_cast<std::size_t>(made)] != 0;
  }
};

enum class residence : std::uint8_t { device, freed, host };

/// Appends `extra` (action, earlier action it waits on), sorted by action,
/// to the waits of `pl`: plan_builder derives only the waits of swap-ins.
inline void add_waits(plan& pl, std::span<const std::pair<index_t, index_t>> extra) {
  if (extra.empty()) return;
  std::vector<index_t> begin{0};
  std::vector<index_t> waits;
  waits.reserve(pl.waits.size() + extra.size());
  std::size_t e = 0;
  for (std::size_t a = 0; a < pl.actions.size(); ++a) {
    for (const index_t w : pl.waits_of(a)) waits.push_back(w);
    for (; e < extra.size() && static_cast<std::size_t>(extra[e].first) == a; ++e) waits.push_back(extra[e].second);
    begin.push_back(static_cast<index_t>(waits.size()));
  }
  pl.wait_begin = std::move(begin);
  pl.waits = std::move(waits);
}

/// Emits a baseline's actions in issue order over a `Builder`
/// (whole_tensor_builder; plan_builder writes the same plans) and keeps
/// track of where each tensor is, so that an op's inputs can be brought back
/// on demand: a swapped tensor by a swap-in, a freed one by recomputing its
/// producer (after bringing back the producer's inputs, recursively).
template <class Builder>
class basic_emitter {
 public:
  /// `record` false: a pass that only tracks where each tensor is and when
  /// it is first needed back (`needed_at`), emitting no actions; the
  /// methods that return an action return no_index.
  basic_emitter(const problem& p, std::string planner, bytes_t budget, bool record = true)
      : p_(&p), where_(p.num_tensors(), residence::device), needed_at_(p.num_tensors(), no_index) {
    if (record) b_.emplace(p, std::move(planner), budget);
  }

  /// Starts again with every tensor on the device and, where it records,
  /// an empty plan, keeping the buffers (a search emits plan after plan).
  void restart() {
    std::ranges::fill(where_, residence::device);
    std::ranges::fill(needed_at_, no_index);
    recomputed_.clear();
    extra_.clear();
    last_compute_ = no_index;
    step_ = no_index;
    if (b_) b_->restart();
  }

  [[nodiscard]] residence where(index_t t) const { return where_[static_cast<std::size_t>(t)]; }
  /// Whether a recomputation releases, right after it runs, the evicted
  /// inputs it had to recompute first (unless the step being prepared reads
  /// them), so that a chain of evicted tensors holds two at a time instead
  /// of all of them until their own last reads. Off by default.
  void release_chain_sources(bool on) noexcept { release_sources_ = on; }
  /// Per tensor: the step that first needed it back from the host while it
  /// was still there (a swap-in on demand), or no_index.
  [[nodiscard]] const std::vector<index_t>& needed_at() const noexcept { return needed_at_; }

  /// Brings every input of step s onto the device.
  void bring_inputs(index_t s) {
    step_ = s;
    recomputed_.clear();
    for (const index_t t : p_->inputs(s)) {
      if (where_[static_cast<std::size_t>(t)] != residence::device) bring(t);  // most are there
    }
  }
  /// The freed tensors that the last `bring_inputs` recomputed, in order.
  [[nodiscard]] const std::vector<index_t>& recomputed() const noexcept { return recomputed_; }
  /// Brings t onto the device: swap-in or recompute.
  void bring(index_t t) {
    const auto ti = static_cast<std::size_t>(t);
    switch (where_[ti]) {
      case residence::device: return;
      case residence::host:
        if (needed_at_[ti] == no_index) needed_at_[ti] = step_;
        prefetch(t);
        return;
      case residence::freed: {
        const index_t made = p_->producer[ti];
        const std::size_t sources = recomputed_.size();
        for (const index_t in : p_->inputs(made)) bring(in);
        if (b_) last_compute_ = b_->recompute(made);
        if (release_sources_) {
          // The inputs this recomputation had to recompute first, which the
          // step being prepared does not read: freed again at once.
          for (std::size_t k = sources; k < recomputed_.size(); ++k) {
            const index_t u = recomputed_[k];
            const auto reads = p_->inputs(step_);
            if (where_[static_cast<std::size_t>(u)] == residence::device &&
                std::ranges::find(reads, u) == reads.end()) {
              release_dead(u);
            }
          }
        }
        // recompute makes every output that is not on the device.
        for (const index_t out : p_->outputs(made)) {
          auto& w = where_[static_cast<std::size_t>(out)];
          if (w == residence::freed) recomputed_.push_back(out);
          w = residence::device;
        }
        return;
      }
    }
  }
  /// Swaps t in if it is on the host, started by the end of the latest
  /// compute-stream action (the in-trigger). Returns the swap-in, or
  /// no_index when t is not on the host.
  index_t prefetch(index_t t) {
    if (where_[static_cast<std::size_t>(t)] != residence::host) return no_index;
    where_[static_cast<std::size_t>(t)] = residence::device;
    if (!b_) return no_index;
    if (last_compute_ != no_index) return b_->swap_in(t, std::span(&last_compute_, 1));
    return b_->swap_in(t);
  }
  /// Runs step s (its inputs must be on the device), after `also_after`.
  index_t compute(index_t s, std::span<const index_t> also_after = {}) {
    if (!b_) return no_index;
    last_compute_ = b_->compute(s);
    for (const index_t w : also_after) extra_.emplace_back(last_compute_, w);
    return last_compute_;
  }
  index_t swap_out(index_t t) {
    where_[static_cast<std::size_t>(t)] = residence::host;
    if (!b_) return no_index;
    b_->decide(t, decision::swap);
    return b_->swap_out(t);
  }
  void free(index_t t) {
    where_[static_cast<std::size_t>(t)] = residence::freed;
    if (!b_) return;
    b_->decide(t, decision::recompute);
    b_->free(t);
  }

  /// Releases t, which the schedule no longer reads, so that a later need
  /// recomputes it rather than keeping this copy alive until then.
  void release_dead(index_t t) {
    where_[static_cast<std::size_t>(t)] = residence::freed;
    if (b_) b_->free(t);
  }

  /// The plan as emitted, not yet judged (search planners judge it
  /// themselves). Only for an emitter that records.
  [[nodiscard]] plan take() && {
    MEMPLAN_EXPECTS(b_.has_value(), error, "emitter: a pass that records no actions has no plan");
    plan result = std::move(*b_).finish();
    add_waits(result, extra_);
    return result;
  }

  /// The plan as emitted, left in place for `restart`. Only for an emitter
  /// that records and whose computes wait for nothing besides their inputs
  /// (`take` adds those waits).
  [[nodiscard]] const plan& emitted() const {
    MEMPLAN_EXPECTS(b_.has_value() && extra_.empty(), error,
                    "emitter: only a pass that records, with no extra waits, has its plan in place");
    return b_->current();
  }

  /// The plan, judged by the simulator under `budget`: a fixed strategy
  /// that does not fit is marked infeasible with the peak it needs.
  [[nodiscard]] plan finish(const device_spec& dev) && {
    plan result = std::move(*this).take();
    judge(*p_, result, dev);
    return result;
  }

 private:
  const problem* p_;
  std::optional<Builder> b_;  ///< empty: nothing is recorded
  std::vector<residence> where_;
  std::vector<index_t> needed_at_;
  std::vector<index_t> recomputed_;
  std::vector<std::pair<index_t, index_t>> extra_;  ///< (compute action, swap-out it waits for)
  index_t last_compute_ = no_index;
  index_t step_ = no_index;
  bool release_sources_ = false;
};

/// The baselines' emitter.
using emitter = basic_emitter<whole_tensor_builder>;

/// Swap planners run twice: the first pass (which records no actions)
/// swaps everything in on demand and learns the step that first needs each
/// tensor back; the second prefetches it one op ahead of that step. Per
/// step s, the tensors to prefetch before s runs, ascending; a
/// default-constructed schedule prefetches nothing.
class prefetch_schedule {
 public:
  prefetch_schedule() = default;
  prefetch_schedule(const problem& p, const std::vector<index_t>& needed_at) : begin_(p.num_steps() + 1, 0) {
    for (const index_t s : needed_at) {
      if (s != no_index && s > 0) ++begin_[static_cast<std::size_t>(s)];  // before step s - 1
    }
    for (std::size_t s = 1; s < begin_.size(); ++s) begin_[s] += begin_[s - 1];
    tensors_.resize(static_cast<std::size_t>(begin_.back()));
    std::vector<index_t> fill(begin_.begin(), begin_.end() - 1);
    for (std::size_t t = 0; t < needed_at.size(); ++t) {
      const index_t s = needed_at[t];
      if (s == no_index || s == 0) continue;
      tensors_[static_cast<std::size_t>(fill[static_cast<std::size_t>(s) - 1]++)] = static_cast<index_t>(t);
    }
  }
  [[nodiscard]] std::span<const index_t> before(std::size_t s) const {
    if (begin_.empty()) return {};
    const auto b = static_cast<std::size_t>(begin_[s]);
    return {tensors_.data() + b, static_cast<std::size_t>(begin_[s + 1]) - b};
  }

 private:
  std::vector<index_t> begin_;  ///< per step, plus one: offsets into tensors_
  std::vector<index_t> tensors_;
};

/// `emit_evictions`'s `waits_of` where computes wait only for their inputs.
inline std::span<const index_t> no_extra_waits(index_t) { return {}; }

/// `emit_evictions` on emitters the caller keeps (new, or `restart`ed), so
/// that a search emitting plan after plan reuses their buffers: `first`
/// records nothing (the pass that learns when each tensor is needed back),
/// `second` records the plan.
template <class Builder, class Evict, class Waits = std::span<const index_t> (*)(index_t)>
void emit_evictions_into(const problem& p, basic_emitter<Builder>& first, basic_emitter<Builder>& second,
                         const Evict& evict, bool release_chain_sources = false,
                         const Waits& waits_of = no_extra_waits) {
  const auto pass = [&](basic_emitter<Builder>& em, const prefetch_schedule& prefetches, bool record) {
    em.release_chain_sources(release_chain_sources);
    for (std::size_t s = 0; s < p.num_steps(); ++s) {
      const auto si = static_cast<index_t>(s);
      for (const index_t t : prefetches.before(s)) em.prefetch(t);
      em.bring_inputs(si);
      em.compute(si, record ? waits_of(si) : std::span<const index_t>{});
      evict(si, em);
    }
  };
  pass(first, prefetch_schedule(), false);
  pass(second, prefetch_schedule(p, first.needed_at()), true);
}

/// Emits a strategy that evicts tensors once the forward pass is done with
/// them: every step runs in schedule order, and after step s `evict(s, em)`
/// swaps out (`em.swap_out`) or frees (`em.free`) the tensors the strategy
/// chose. They come back on demand (`emitter::bring`); a swapped one is
/// prefetched one op ahead of the step that first needs it, learned from a
/// first pass (`prefetch_schedule`).
/// `release_chain_sources`: see `emitter::release_chain_sources`.
/// `waits_of(s)`: the actions step s's compute waits for, besides its
/// inputs' (a span of action indices; those of a pass that records).
template <class Builder = whole_tensor_builder, class Evict, class Waits = std::span<const index_t> (*)(index_t)>
[[nodiscard]] basic_emitter<Builder> emit_evictions(const problem& p, std::string_view planner, bytes_t budget, const Evict& evict,
                                     bool release_chain_sources = false,
                                     const Waits& waits_of = no_extra_waits) {
  basic_emitter<Builder> first(p, std::string(planner), budget, /*record=*/false);
  basic_emitter<Builder> second(p, std::string(planner), budget);
  emit_evictions_into(p, first, second, evict, release_chain_sources, waits_of);
  return second;
}

}  // namespace memplan::detail::baselines
