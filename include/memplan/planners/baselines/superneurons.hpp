#pragma once
/// \file
/// `superneurons`: SuperNeurons' memory policy (Wang et al., "SuperNeurons:
/// Dynamic GPU Memory Management for Training Deep Neural Networks", PPoPP
/// 2018), the baseline of TSPLIT §VI and HOME §4.1, at full strength:
/// - liveness analysis (§3.1): every tensor is freed after its last reader;
/// - a unified tensor pool with an LRU tensor cache (§3.2): a tensor the
///   backward pass needs stays on the device until memory is needed; then
///   the least recently used ones leave, starting with the one the forward
///   pass was done with first, until the step fits;
/// - cost-aware recomputation (§3.3): an evicted output of a cheap layer
///   (pooling, activation, batch norm, LRN) is freed and recomputed when
///   the backward pass needs it, kept from then on until its last reader
///   ("speed-centric"); any other evicted tensor is offloaded to the host
///   once the forward pass is done with it and prefetched one op ahead of
///   the first op that needs it back;
/// - a step that needs the memory an offload frees waits for that offload,
///   as SuperNeurons' runtime blocks an allocation until the pool has room.
/// Which tensors leave, and when their memory is needed, is decided by
/// counting bytes along the schedule (problem::baseline_memory less each
/// evicted tensor from the step that needed its bytes to the step before
/// its prefetch); where the simulated
/// plan still exceeds the budget (recomputations and copies in flight hold
/// memory the count misses) the count is repeated for a budget lowered by
/// 1, 2, 4, ... times the excess, and last for none (every candidate
/// evicted), at most `max_tries` times in all.

#include <algorithm>
#include <array>
#include <cstddef>
#include <set>
#include <span>
#include <string_view>
#include <tuple>
#include <vector>

#include "memplan/planners/baselines/common.hpp"
#include "memplan/planners/planner.hpp"

namespace memplan {

/// The `superneurons` planner (see the file comment).
struct superneurons_planner {
  /// The layers SuperNeurons recomputes rather than stores.
  static constexpr std::array<std::string_view, 9> cheap_types{"max_pool", "avg_pool", "avgpool", "relu", "relu6",
                                                              "batch_norm", "lrn", "tanh", "gelu"};
  /// Counts along the schedule at most, each for a lower target (the file comment).
  static constexpr int max_tries = 8;

  /// Plans `p` on `dev`: evicts by the count, then lowers the target until
  /// the plan fits `budget` or `max_tries` are spent; returns the best tried.
  plan operator()(const problem& p, const device_spec& dev, bytes_t budget, const planner_options&) const {
    plan best;
    bytes_t target = budget;
    for (int attempt = 0; attempt < max_tries; ++attempt) {
      plan pl = emit(p, dev, budget, evictions(p, target));
      const bool again = !pl.feasible && pl.kind == failure_kind::out_of_memory && pl.best_peak > budget && target > 0;
      // The count misses what recomputations and copies in flight hold at
      // one step, not everywhere: lower the target by 1, 2, 4, ... times the
      // excess; the last try evicts everything it can (target 0).
      const bytes_t lower = (pl.best_peak - budget) << attempt;
      if (attempt == 0 || pl.feasible || pl.best_peak < best.best_peak) best = std::move(pl);
      if (!again) break;
      target = attempt + 2 == max_tries || lower >= target ? 0 : target - lower;
    }
    return best;
  }

  /// Per tensor, the step at which the LRU cache evicts it so that every
  /// step fits `target` bytes by the count described above (no_index: kept).
  static std::vector<index_t> evictions(const problem& p, bytes_t target) {
    const detail::baselines::forward_backward_uses uses(p);
    const std::size_t n = p.num_steps();
    // A candidate can be off the device over steps [first, last]: after its
    // last forward use, before the step ahead of its first backward use.
    std::vector<std::vector<index_t>> opens(n + 1);
    std::vector<index_t> last(p.num_tensors(), no_index);
    for (std::size_t t = 0; t < p.num_tensors(); ++t) {
      const auto ti = static_cast<index_t>(t);
      if (!uses.saved_for_backward(p, ti)) continue;
      const index_t first = uses.forward_done(p, ti) + 1;
      last[t] = uses.first_backward[t] - 2;
      if (first <= last[t]) opens[static_cast<std::size_t>(first)].push_back(ti);
    }
    const std::vector<bytes_t> live = p.baseline_memory();
    std::vector<bytes_t> returns(n + 1, 0);  // bytes back on the device after each step
    std::vector<index_t> at(p.num_tensors(), no_index);
    // Least recently used first: the forward pass was done with it earliest;
    // then the largest. Entries past their `last` are skipped when reached.
    std::set<std::tuple<index_t, bytes_t, index_t>> cache;
    bytes_t saved = 0;
    for (std::size_t s = 0; s < n; ++s) {
      const auto si = static_cast<index_t>(s);
      for (const index_t t : opens[s]) cache.emplace(si, -p.bytes[static_cast<std::size_t>(t)], t);
      if (s > 0) saved -= returns[s - 1];
      while (live[s] - saved > target && !cache.empty()) {
        const auto t = static_cast<std::size_t>(std::get<2>(*cache.begin()));
        cache.erase(cache.begin());
        if (last[t] < si) continue;  // already needed back
        at[t] = si;
        saved += p.bytes[t];
        returns[static_cast<std::size_t>(last[t])] += p.bytes[t];
      }
    }
    return at;
  }

  /// Whether tensor `t` (which has a producer) is the output of a layer in
  /// `cheap_types`: recomputed rather than offloaded when evicted.
  static bool cheap(const problem& p, index_t t) {
    const std::string_view type = p.op_type[static_cast<std::size_t>(p.producer[static_cast<std::size_t>(t)])];
    return std::ranges::find(cheap_types, type) != cheap_types.end();
  }

  /// The plan that evicts each tensor `at` a step: offloaded (or freed,
  /// cost-aware) once the forward pass is done with it; the step at which
  /// the count needed its memory waits for the offload.
  static plan emit(const problem& p, const device_spec& dev, bytes_t budget, const std::vector<index_t>& at) {
    const detail::baselines::forward_backward_uses uses(p);
    const std::size_t n = p.num_steps();
    std::vector<std::vector<index_t>> swap_after(n);
    std::vector<std::vector<index_t>> free_after(n);
    for (std::size_t t = 0; t < p.num_tensors(); ++t) {
      const auto ti = static_cast<index_t>(t);
      if (at[t] == no_index) continue;
      const auto done = static_cast<std::size_t>(uses.forward_done(p, ti));
      (uses.droppable(p, ti) && cheap(p, ti) ? free_after : swap_after)[done].push_back(ti);
    }
    std::vector<std::vector<index_t>> waits(n);  // per step, the offloads its compute waits for
    return detail::baselines::emit_evictions(
               p, "superneurons", budget,
               [&](index_t s, auto& em) {
                 for (const index_t t : swap_after[static_cast<std::size_t>(s)]) {
                   const index_t a = em.swap_out(t);
                   if (a != no_index) waits[static_cast<std::size_t>(at[static_cast<std::size_t>(t)])].push_back(a);
                 }
                 for (const index_t t : free_after[static_cast<std::size_t>(s)]) em.free(t);
               },
               false, [&](index_t s) { return std::span<const index_t>(waits[static_cast<std::size_t>(s)]); })
        .finish(dev);
  }
};
static_assert(planner<superneurons_planner>);

}  // namespace memplan
