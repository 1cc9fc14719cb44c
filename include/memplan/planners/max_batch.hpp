#pragma once
/// \file
/// The largest batch (or width factor, or any positive integer size) at
/// which something fits: the search behind `memplan maxbatch`, TSPLIT's
/// Tables IV and V and Capuchin's Table 2.

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <limits>
#include <vector>

#include "memplan/error.hpp"

namespace memplan {

/// What `max_batch` found.
struct batch_search {
  int batch = 0;      ///< the largest batch found to fit; 0 when none does
  int probes = 0;     ///< calls to `fits`: the plans made, where each call makes one
  int bisected = 0;   ///< where the bisection landed, before the window scan
};

/// The batches `max_batch` scans above the best it has found: W(B) =
/// max(`batches`, ceil(`percent` x B / 100)). A greedy planner's feasibility
/// jumps from batch to batch (tsplit-nosplit on resnet101 fits at 1,632,
/// fails at 1,692 and 1,704, fits at 1,716: docs/results.md, Fig. 14a),
/// gaps of a few percent at large batches: 5 % spans them there, and 16
/// batches covers small batches, where 5 % is a batch or two.
struct batch_window {
  int batches = 16;  ///< at least this many batches; 0 with `percent` 0: no scan
  int percent = 5;   ///< or this percent of the best batch, if more (0 to 100)

  /// No scan: doubling and bisection only (the search before issue 24).
  [[nodiscard]] static constexpr batch_window none() { return {0, 0}; }

  /// W(`best`), in integers so that the cost documented is exact.
  [[nodiscard]] constexpr std::int64_t size_above(int best) const {
    return std::max<std::int64_t>(batches, (std::int64_t{percent} * best + 99) / 100);
  }
};

/// The largest batch in [1, `limit`] for which `fits(batch)` is true that
/// the search reaches: doubling from 1 until a batch fails (or passes
/// `limit`), bisection between the last batch that fit and the first that
/// failed, then a scan of the window above the best batch B: the batches
/// of (B, B + W(B)] (`batch_window`) from the top down; the first that
/// fits becomes B and the window above it is scanned; the search stops
/// when a whole window fails or `limit` is reached.
///
/// Feasibility need not be monotone in the batch (a greedy planner's is
/// not): the batch reported fits, and every batch in the window above it
/// fails. The last call that returned true was for the batch reported
/// (after a success only larger batches are asked), so a `fits` that keeps
/// what it made on success holds the reported batch's result.
///
/// Cost: doubling and bisection take 2 floor(log2 B0) + 2 calls for a
/// bisection result B0 >= 1 (B0 = 37: 1, 2, 4, ..., 64, then 48, 40, 36,
/// 38, 37: 12 calls; fewer where the doubling passes `limit`; one when
/// batch 1 fails, B0 = 0). The scan asks no batch twice and none the
/// bisection saw fail: the last window costs W(B) calls less those known
/// failures, and each move up one call per failing batch above the one
/// that fits (one call where the top of the window fits). For monotone
/// feasibility B = B0 and the scan costs W(B0) less the bisection's
/// failures in the window (B0 = 37, default window: 53 down to 39 less 48
/// and 40, 13 calls; 25 in all); at B0 = 1,700 about 85.
///
/// @param fits    called with batches from 1 to `limit`, one at a time
/// @param limit   the largest batch tried
/// @param window  the batches scanned above the best; `batch_window::none()`: no scan
/// @return the batch found, the number of calls, and where the bisection landed
/// @throws invalid_argument when `limit` is not in [1, INT_MAX), or when
///         `window.batches` is negative or `window.percent` is not in [0, 100]
template <class Fits>
  requires std::predicate<Fits&, int>
[[nodiscard]] batch_search max_batch(Fits&& fits, int limit = 1 << 20, batch_window window = {}) {
  MEMPLAN_EXPECTS(limit >= 1 && limit < std::numeric_limits<int>::max(), invalid_argument,
                  "max_batch: the limit must be from 1 to ", std::numeric_limits<int>::max() - 1, ", got ", limit);
  MEMPLAN_EXPECTS(window.batches >= 0, invalid_argument,
                  "max_batch: the window's batches must be 0 or more, got ", window.batches);
  MEMPLAN_EXPECTS(window.percent >= 0 && window.percent <= 100, invalid_argument,
                  "max_batch: the window's percent of the best batch must be from 0 to 100, got ", window.percent);
  batch_search found;
  std::vector<int> failed;  // the batches doubling and bisection saw fail: the scan does not ask again
  const auto probe = [&](int batch) {
    ++found.probes;
    const bool ok = static_cast<bool>(fits(batch));
    if (!ok) failed.push_back(batch);
    return ok;
  };
  int lo = 0;  // fits (or is 0)
  int hi = 1;  // fails, once probed
  while (hi <= limit && probe(hi)) {
    lo = hi;
    hi = hi > limit / 2 ? limit + 1 : hi * 2;
  }
  hi = std::min(hi, limit + 1);  // past `limit` counts as failing, unprobed
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    (probe(mid) ? lo : hi) = mid;
  }
  found.bisected = lo;
  // The window scan, each window from its top down: the first batch that
  // fits is the new best and the window above it is scanned next.
  for (bool moved = true; moved;) {
    moved = false;
    const int top = static_cast<int>(std::min<std::int64_t>(limit, lo + window.size_above(lo)));
    for (int batch = top; batch > lo && !moved; --batch) {
      if (std::ranges::find(failed, batch) != failed.end()) continue;
      if (probe(batch)) {
        lo = batch;
        moved = true;
      }
    }
  }
  found.batch = lo;
  return found;
}

}  // namespace memplan
