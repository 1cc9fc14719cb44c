#pragma once
/// \file
/// `memplan::report`: what the simulator says a plan costs (DESIGN.md §5,
/// last bullet), the numbers every planner is judged by.

#include <string>
#include <vector>

#include "memplan/failure.hpp"
#include "memplan/fwd.hpp"
#include "memplan/plan.hpp"

namespace memplan {

/// When one action ran (a row of the per-stream timeline).
struct action_interval {
  index_t action = no_index;  ///< index into `plan::actions`
  stream_kind stream = stream_kind::compute;  ///< the stream it ran on (stream_of its kind)
  double start_us = 0;  ///< when it started, µs into the iteration
  double end_us = 0;    ///< when it ended, µs into the iteration
  index_t order = 0;  ///< it was the order-th action to start (ties in time broken as the simulator did)
};

/// Device memory in use from `time_us` until the next point.
struct memory_point {
  double time_us = 0;  ///< µs into the iteration
  bytes_t bytes = 0;   ///< device memory in use from then on
};

/// The simulator's verdict on one plan.
struct report {
  std::string planner;    ///< the plan's planner (plan::planner), for tables
  bool feasible = false;  ///< the plan is valid and never needs more than the budget
  /// The verdict: `none` when feasible, else out_of_memory or invalid_plan.
  failure_kind kind = failure_kind::none;
  /// Why not feasible, for people (decide on `kind`), empty when feasible:
  /// "out of memory at action 17 (compute 'conv3'): ..." or "invalid plan: ...".
  std::string failure;

  bytes_t budget_bytes = 0;  ///< the budget it was judged against
  /// Device memory the plan takes: its layout's arena when it has one
  /// (plan_layout.hpp), else `peak_live_bytes`.
  bytes_t peak_bytes = 0;
  bytes_t peak_live_bytes = 0;  ///< the most tensor bytes live at once (so far, when infeasible)
  bytes_t arena_bytes = 0;      ///< the layout's arena: highest offset + footprint (0: no layout)
  bytes_t baseline_peak_bytes = 0;  ///< `problem::baseline_peak()`: no planning (0 without `simulate_options::baseline_peak`)
  bytes_t swapped_out_bytes = 0;    ///< sum over swap_out actions
  bytes_t swapped_in_bytes = 0;     ///< sum over swap_in actions
  bytes_t offloaded_state_bytes = 0;  ///< the plan's offloaded state: in host memory between iterations

  double time_us = 0;           ///< iteration time: when the last action of any stream ends
  double baseline_time_us = 0;  ///< `problem::baseline_time_us()`: the time with no planning
  /// time_us / baseline_time_us - 1 (0 when the baseline is 0); NaN when not
  /// feasible: a plan that does not run has no overhead (JSON: null).
  double overhead = 0;
  /// Time the compute stream sat idle (waiting for swap-ins, memory or the
  /// tail of the copy streams): time_us minus its busy time, so that
  /// time = baseline + recompute + split extra + stall.
  double stall_us = 0;
  double recompute_us = 0;  ///< total duration of recompute actions
  double allocator_us = 0;  ///< the plan's allocator driver time (plan::allocator_us), in time_us and stall_us

  index_t recomputed_ops = 0;  ///< recompute actions
  index_t split_ops = 0;       ///< compute / recompute actions with parts > 1

  std::vector<action_interval> timeline;  ///< one row per action that started, in issue order; empty unless recorded
  std::vector<memory_point> memory_curve;  ///< after every change, time ascending; empty unless recorded
};

}  // namespace memplan
