#pragma once
/// \file
/// The simulator's verdict on a finished plan: every planner whose own
/// accounting is not the simulator's (fixed strategies, the online
/// policies' issue-order count, Capuchin's guided runs) reports the
/// simulator's peak, or infeasible with the peak the plan needs; and the
/// validator's, on every plan a registered planner calls feasible
/// (`confirm_valid`: DESIGN.md §5, one verdict).

#include "memplan/cost/device.hpp"
#include "memplan/error.hpp"
#include "memplan/format_bytes.hpp"
#include "memplan/plan.hpp"
#include "memplan/problem.hpp"
#include "memplan/sim/simulator.hpp"
#include "memplan/sim/validator.hpp"

namespace memplan::detail {

/// Records the simulator's verdict `r` on `pl` under its budget: the peak
/// reached, or, when it does not fit, infeasible with the peak it needs.
inline void record_verdict(const problem& p, plan& pl, const report& r, const device_spec& dev, simulator& sim) {
  if (r.feasible) {
    pl.best_peak = r.peak_bytes;
    return;
  }
  const report unlimited = sim.run(p, pl, dev, simulator::unlimited);
  pl.feasible = false;
  pl.kind = r.kind;
  pl.best_peak = unlimited.peak_bytes;
  pl.reason = concat(pl.planner, ": the plan needs ", unlimited.peak_bytes, " bytes (",
                     format_bytes(unlimited.peak_bytes), ") at its peak; the budget is ", pl.budget, " bytes (",
                     format_bytes(pl.budget), "): ", r.failure);
}

/// Whether plan `b` (simulated under its budget as `rb`) is better than
/// `a` (`ra`): it fits where `a` does not, runs faster where both fit,
/// needs a lower peak (`plan::best_peak`) where neither does.
[[nodiscard]] inline bool better_plan(const plan& b, const report& rb, const plan& a, const report& ra) {
  if (a.feasible != b.feasible) return b.feasible;
  return b.feasible ? rb.time_us < ra.time_us : b.best_peak < a.best_peak;
}

/// One verdict (DESIGN.md §5): a plan its planner calls feasible under
/// `budget` is re-checked by the validator, independently of the simulator
/// that judged it. A plan the validator rejects is a planner bug: it
/// becomes infeasible, `invalid_plan`, with the validator's first error in
/// `reason` — never returned as if it fitted.
inline void confirm_valid(const problem& p, plan& pl, const device_spec& dev, bytes_t budget) {
  if (!pl.feasible) return;
  validation v = validate(p, pl, dev, budget);
  if (v.ok) return;
  pl.feasible = false;
  pl.kind = failure_kind::invalid_plan;
  pl.reason = concat(pl.planner, ": the validator rejects the plan (a planner bug): ", v.errors.front(),
                     v.errors.size() > 1 ? concat(" (and ", v.errors.size() - 1, " more)") : std::string());
}

/// Simulates `pl` under its budget and records the verdict.
inline void judge(const problem& p, plan& pl, const device_spec& dev) {
  simulator sim;
  const report r = sim.run(p, pl, dev, pl.budget);
  record_verdict(p, pl, r, dev, sim);
}

}  // namespace memplan::detail
