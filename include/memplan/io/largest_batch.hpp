#pragma once
/// \file
/// The largest batch (or width factor) at which a planner's plan fits a
/// device within an overhead, as `memplan maxbatch` reports it: planned.hpp's
/// run at each batch max_batch.hpp's search asks for.

#include <concepts>
#include <functional>
#include <limits>
#include <optional>
#include <utility>

#include "memplan/cost/device.hpp"
#include "memplan/error.hpp"
#include "memplan/io/planned.hpp"
#include "memplan/io/size.hpp"
#include "memplan/planners/max_batch.hpp"
#include "memplan/planners/registry.hpp"
#include "memplan/problem.hpp"

namespace memplan::io {

/// What counts as fitting, and how far `largest_batch` looks.
struct largest_batch_options {
  /// The budget at each batch: bytes, or a percent of that batch's baseline
  /// peak; none: the device's memory.
  std::optional<size_spec> budget;
  /// Plans slower than the unplanned step by more than this do not count.
  double max_overhead = std::numeric_limits<double>::infinity();
  std::optional<bytes_t> host_memory;  ///< as run_and_simulate's; none: no limit
  batch_window window;                 ///< max_batch's scan above the best batch
  int limit = 1 << 20;                 ///< the largest batch tried
  /// Called after each plan with its batch (progress on a terminal).
  std::function<void(int batch, const planned&)> progress;
};

/// What `largest_batch` found.
struct largest_batch_result {
  batch_search search;             ///< the batch (0: none fits) and the plans made
  std::optional<planned> at_best;  ///< the plan at `search.batch`; none when it is 0
};

/// The largest batch at which `planner` plans `build(batch)` to fit on `d`:
/// succeeded (planner, simulator and host memory agree) and at most
/// `o.max_overhead` slower than unplanned. One plan per call max_batch
/// makes (its cost is documented there).
///
/// @param build  the problem at a batch: `build(int) -> problem`
/// @param d  the device: its memory is the budget unless `o.budget` says otherwise
/// @param planner  the planner, as the registry lists it
/// @param options  the planner's options, the same at every batch
/// @param o  the budget, the overhead limit and the search window
/// @return the search and the plan at the batch it reports
/// @throws invalid_argument as max_batch, or if `o.max_overhead` is negative or NaN;
///         what `build` and the planner throw
template <class Build>
  requires std::invocable<Build&, int> && std::convertible_to<std::invoke_result_t<Build&, int>, problem>
[[nodiscard]] largest_batch_result largest_batch(Build&& build, const device_spec& d, const planner_entry& planner,
                                                 const planner_options& options, const largest_batch_options& o = {}) {
  MEMPLAN_EXPECTS(o.max_overhead >= 0, invalid_argument, "largest_batch: the max overhead must be 0 or more, got ",
                  o.max_overhead);
  largest_batch_result best;
  const auto fits = [&](int batch) {
    const problem p = build(batch);
    const bytes_t budget = o.budget ? resolve(*o.budget, p.baseline_peak()) : d.memory_bytes;
    planned r = run_and_simulate(planner, p, d, budget, options, false, o.host_memory);
    if (o.progress) o.progress(batch, r);
    if (!succeeded(r) || r.sim.overhead > o.max_overhead) return false;
    best.at_best = std::move(r);  // max_batch's last success is the batch it reports
    return true;
  };
  best.search = max_batch(fits, o.limit, o.window);
  return best;
}

}  // namespace memplan::io
