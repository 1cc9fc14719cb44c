#pragma once
/// \file
/// The largest batch (or width factor, or any positive integer size) at
/// which something fits: the search behind `memplan maxbatch`, TSPLIT's
/// Tables IV and V and Capuchin's Table 2.

#include <algorithm>
#include <concepts>
#include <limits>

#include "memplan/error.hpp"

namespace memplan {

/// What `max_batch` found.
struct batch_search {
  int batch = 0;   ///< the largest batch found to fit; 0 when batch 1 does not
  int probes = 0;  ///< calls to `fits`: the plans made, where each call makes one
};

/// The largest batch in [1, `limit`] for which `fits(batch)` is true, by
/// doubling from 1 until a batch fails (or passes `limit`), then bisection
/// between the last batch that fit and the first that failed.
///
/// Assumes feasibility is monotone in the batch: where batch B fits, every
/// smaller batch does. The batch reported fits (`fits` said so); where
/// feasibility is not monotone a larger one may fit too. The last call that
/// returned true was for the batch reported, so a `fits` that keeps what it
/// made on success holds the reported batch's result.
///
/// Cost: for a result B >= 1, floor(log2 B) + 2 calls doubling and
/// floor(log2 B) bisecting, 2 floor(log2 B) + 2 in all (B = 37: 1, 2, 4,
/// ..., 64, then 48, 40, 36, 38, 37: 12 calls); fewer where the doubling
/// passes `limit`; one call when batch 1 does not fit.
///
/// @param fits   called with batches from 1 to `limit`, one at a time
/// @param limit  the largest batch tried
/// @return the batch found and the number of calls
/// @throws invalid_argument when `limit` is not in [1, INT_MAX)
template <class Fits>
  requires std::predicate<Fits&, int>
[[nodiscard]] batch_search max_batch(Fits&& fits, int limit = 1 << 20) {
  MEMPLAN_EXPECTS(limit >= 1 && limit < std::numeric_limits<int>::max(), invalid_argument,
                  "max_batch: the limit must be from 1 to ", std::numeric_limits<int>::max() - 1, ", got ", limit);
  batch_search found;
  const auto probe = [&](int batch) {
    ++found.probes;
    return static_cast<bool>(fits(batch));
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
  found.batch = lo;
  return found;
}

}  // namespace memplan
