#pragma once
/// \file
/// `none`: keep every tensor (the baseline every table starts from).

#include "memplan/plan_builder.hpp"
#include "memplan/error.hpp"
#include "memplan/planners/planner.hpp"
#include "memplan/planners/verdict.hpp"

namespace memplan {

/// The `none` planner: the plan that keeps every tensor.
struct none_planner {
  /// The keep-all plan of `p`; infeasible (out_of_memory) where its peak,
  /// problem::baseline_peak, exceeds `budget`. Where ops communicate, the
  /// communication stream overlaps the compute stream and a tensor a
  /// collective reads lives until the collective ends, past the step
  /// liveness of baseline_peak: the simulator judges the plan.
  plan operator()(const problem& p, const device_spec& dev, bytes_t budget, const planner_options&) const {
    plan result = keep_all_plan(p, budget);
    if (!p.comm.empty()) {
      detail::judge(p, result, dev);
      return result;
    }
    const bytes_t peak = p.baseline_peak();
    if (peak > budget) {
      result.feasible = false;
      result.kind = failure_kind::out_of_memory;
      result.reason = detail::concat("keeping every tensor needs ", peak, " bytes at its peak; the budget is ",
                                     budget, " bytes");
    }
    return result;
  }
};
static_assert(planner<none_planner>);

}  // namespace memplan
