#pragma once
/// \file
/// Capuchin (Peng et al., ASPLOS 2020) §4.5, Algo 1: the hybrid policy.
/// Swaps ranked by FT come first
/// while their in-trigger hides the prefetch; after that, each round
/// compares the next swap with the recomputation of largest MSPS (Algo 2)
/// and confirms the one of smaller overhead, until the memory the
/// measured execution says is missing has been saved.
///
/// "mem_saving" (Algo 1 line 12, Algo 2 line 15) is kept as the inferred
/// memory curve rather than one number: a tensor saves memory only over
/// the steps it is away, so the loop ends when no step exceeds the budget.

#include <algorithm>
#include <cstddef>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include "memplan/cost/device.hpp"
#include "memplan/planners/capuchin/measured.hpp"
#include "memplan/planners/capuchin/memory_estimate.hpp"
#include "memplan/planners/capuchin/msps.hpp"
#include "memplan/planners/capuchin/swap.hpp"
#include "memplan/problem.hpp"

namespace memplan::detail::capuchin {

enum class regeneration : std::uint8_t { swap, recompute };

/// A tensor in the eviction set.
struct eviction {
  candidate pair;
  regeneration how = regeneration::swap;
  index_t in_trigger = no_index;        ///< swap: the step whose end starts the swap-in
  double free_time_us = 0;              ///< swap: FT (Eq. 1)
  double overhead_us = 0;               ///< estimated time added
};

struct policy {
  std::vector<eviction> evictions;   ///< in the order chosen
  memory_estimate memory;            ///< the inferred curve with the evictions applied
  [[nodiscard]] bool fits() const noexcept { return memory.excess() == 0; }
};

/// ChooseSwapTrigger (Algo 1 line 3) once the eviction set is known: the
/// h2d stream copies one tensor at a time (§4.4), so walking back from the
/// last back-access, each swap-in must end by its back-access and before
/// the next one starts; its in-trigger is the latest step that ends by
/// then, reached only as far as the inferred memory has room (never inside
/// the peak).
inline void place_swap_ins(const problem& p, const measured_execution& m, const device_spec& dev, policy& pol) {
  std::vector<eviction*> swaps;
  for (eviction& ev : pol.evictions) {
    if (ev.how == regeneration::swap) swaps.push_back(&ev);
  }
  std::ranges::stable_sort(swaps, [](const eviction* a, const eviction* b) { return a->pair.back_us > b->pair.back_us; });
  double channel_free = std::numeric_limits<double>::infinity();
  for (eviction* ev : swaps) {
    const bytes_t bytes = p.bytes[static_cast<std::size_t>(ev->pair.tensor)];
    const double start = std::min(ev->pair.back_us, channel_free) - dev.h2d.transfer_us(bytes);
    channel_free = start;
    const index_t want = std::max(ev->pair.evicted_access, latest_step_ending_by(m, start, ev->pair.back_access - 1));
    if (want < ev->in_trigger) ev->in_trigger = pol.memory.advance(bytes, ev->in_trigger, want);
    ev->free_time_us = m.end_us[static_cast<std::size_t>(ev->in_trigger)] - ev->pair.evicted_us -
                       dev.d2h.transfer_us(bytes);
  }
}

/// Algo 1 under `budget`, from the access list of measured execution.
/// \param no_swap per tensor (or empty): 1 where a guided iteration found
///        that swapping it makes a recomputation wait for it (see `replan`).
/// \param lineage_must_fit a recomputation whose lineage would not fit
///        beside what its back-access holds loses to any swap (after a
///        guided iteration ran out of memory).
[[nodiscard]] inline policy choose_policy(const problem& p, const measured_execution& m, const device_spec& dev,
                                          bytes_t budget, std::span<const std::uint8_t> no_swap = {},
                                          bool lineage_must_fit = false) {
  policy out{{}, memory_estimate(m.memory, budget)};
  memory_estimate& mem = out.memory;
  const std::vector<candidate> cands = identify_candidates(p, m, dev, mem);
  msps_recomputation rec(p, m, cands);
  std::vector<std::uint8_t> taken(cands.size(), 0);
  std::size_t next = 0;  // the swap list, by FT
  link_bookings d2h;     // the confirmed swaps' copies
  link_bookings h2d;
  // §4.4 assumes a recomputation's sources are on the device: a swap and a
  // recomputation that would start from it while it is away exclude each other.
  std::vector<std::pair<index_t, index_t>> away(p.num_tensors(), {no_index, no_index});
  std::vector<index_t> recomputed;  // chosen recomputation targets (candidate indices)
  // The most a candidate's lineage holds at once besides the tensor itself
  // while it runs again: the lineage releases each output once the next op
  // has read it (guided.hpp), so one op's outputs and its input from the lineage.
  const auto lineage_transient = [&](index_t i) {
    const index_t t = cands[static_cast<std::size_t>(i)].tensor;
    bytes_t most = 0;
    bytes_t previous = 0;
    for (const index_t op : rec.of(i).ops) {
      bytes_t made = 0;
      for (const index_t y : p.outputs(op)) {
        if (y != t) made += p.bytes[static_cast<std::size_t>(y)];
      }
      most = std::max(most, made + previous);
      previous = made;
    }
    return most;
  };
  const auto away_at = [&](index_t t, index_t step) {
    const auto& [from, to] = away[static_cast<std::size_t>(t)];
    return from != no_index && from <= step && step <= to;
  };
  const auto sources_here = [&](index_t i) {
    return std::ranges::none_of(rec.of(i).srcs, [&](index_t t) {
      return away_at(t, cands[static_cast<std::size_t>(i)].back_access);
    });
  };
  const auto feeds_recomputation = [&](const candidate& c, index_t trigger) {
    return std::ranges::any_of(recomputed, [&](index_t r) {
      const index_t back = cands[static_cast<std::size_t>(r)].back_access;
      return back > c.evicted_access && back <= trigger && std::ranges::find(rec.of(r).srcs, c.tensor) != rec.of(r).srcs.end();
    });
  };

  while (mem.excess() > 0) {
    // Algo 1 lines 3-4: the next swap, its in-trigger and overhead. One
    // whose time away no longer meets the peak leaves the swap list (line 16).
    eviction swap;
    swap_estimate est;
    bool have_swap = false;
    for (; next < cands.size(); ++next) {
      const candidate& c = cands[next];
      if (taken[next] || (!no_swap.empty() && no_swap[static_cast<std::size_t>(c.tensor)])) continue;
      const bytes_t bytes = p.bytes[static_cast<std::size_t>(c.tensor)];
      est = estimate_swap(m, dev, bytes, c, peak_bound(mem, c), d2h, h2d);
      // Otherwise it stays a recomputation candidate.
      if (!mem.covers_peak(est.released_from, est.in_trigger) || feeds_recomputation(c, est.in_trigger)) continue;
      swap = {c, regeneration::swap, est.in_trigger, est.free_time_us, est.overhead_us};
      have_swap = true;
      break;
    }
    // Line 5: the recomputation of largest MSPS among those that help.
    index_t best = no_index;
    if (!have_swap || swap.overhead_us > 0) {
      double best_msps = 0;
      for (std::size_t i = 0; i < cands.size(); ++i) {
        if (taken[i] || !mem.covers_peak(cands[i].evicted_access + 1, cands[i].back_access - 1) ||
            !sources_here(static_cast<index_t>(i))) {
          continue;
        }
        const double v = rec.msps(static_cast<index_t>(i));
        if (v > best_msps) {
          best_msps = v;
          best = static_cast<index_t>(i);
        }
      }
    }
    if (!have_swap && best == no_index) break;  // nothing left to evict
    // Lines 6-11: the smaller overhead is confirmed; the other stays a
    // candidate.
    const bool lineage_fits = !lineage_must_fit || (best != no_index &&
                                                    mem.at(cands[static_cast<std::size_t>(best)].back_access) +
                                                            lineage_transient(best) <= budget);
    if (best != no_index && (!have_swap || (lineage_fits && rec.overhead_us(best) < swap.overhead_us))) {
      const auto bi = static_cast<std::size_t>(best);
      const candidate& c = cands[bi];
      // Freed after its evicted-access; back on demand at its back-access.
      const bytes_t bytes = p.bytes[static_cast<std::size_t>(c.tensor)];
      mem.add(c.evicted_access + 1, c.back_access - 1, -bytes);
      mem.add(c.back_access, c.back_access, lineage_transient(best));
      out.evictions.push_back({c, regeneration::recompute, no_index, 0, rec.overhead_us(best)});
      rec.choose(best);
      recomputed.push_back(best);
      taken[bi] = 1;
    } else {
      const bytes_t bytes = p.bytes[static_cast<std::size_t>(swap.pair.tensor)];
      mem.add(est.released_from, est.in_trigger, -bytes);
      d2h.book(est.swap_out_end_us - dev.d2h.transfer_us(bytes), dev.d2h.transfer_us(bytes));
      h2d.book(est.swap_in_start_us, dev.h2d.transfer_us(bytes));
      away[static_cast<std::size_t>(swap.pair.tensor)] = {swap.pair.evicted_access + 1, swap.in_trigger};
      out.evictions.push_back(swap);
      rec.drop(static_cast<index_t>(next));
      taken[next] = 1;
    }
  }
  place_swap_ins(p, m, dev, out);
  return out;
}

}  // namespace memplan::detail::capuchin
