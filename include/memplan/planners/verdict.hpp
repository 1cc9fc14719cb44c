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
#include "memplan/sim/assign_layout.hpp"
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

/// How often `with_layout` plans again for a tighter target.
inline constexpr int layout_retries = 5;

/// A planner's plan for `budget` with its memory layout (DESIGN.md §6: the
/// budget is the arena). `plan_for(target)` plans for a live-bytes target;
/// where the layout of a feasible plan overflows the budget, planning runs
/// again with the target below that plan's live peak by the overflow
/// (doubled on each try), up to `layout_retries` times; a plan whose layout still does not fit is infeasible
/// (out_of_memory), its best peak the arena it needs.
template <class PlanFor>
plan with_layout(PlanFor plan_for, const problem& p, const device_spec& dev, bytes_t budget) {
  bytes_t target = budget;
  plan pl = plan_for(target);
  for (int tries = 0;; ++tries) {
    pl.budget = budget;
    if (!pl.feasible) return pl;
    const report r = assign_layout(p, pl, dev);
    if (!r.feasible) return pl;  // the simulator disagrees with the planner: the validator names why (confirm_valid)
    if (pl.arena_bytes <= budget) {
      pl.best_peak = pl.arena_bytes;  // the simulator's peak of a plan with a layout
      return pl;
    }
    const bytes_t need = pl.arena_bytes;
    // The next target: below this plan's live peak by the overflow, doubled
    // on each try (a plan under the old target may still overflow by as much).
    const bytes_t overflow = ((need - budget + dev.alignment - 1) / dev.alignment * dev.alignment) << tries;
    const bytes_t next = std::min(target, r.peak_bytes) - overflow;
    if (tries == layout_retries || next <= 0) {
      pl.feasible = false;  // it keeps the overflowing layout: the simulator finds it out of memory too
      pl.kind = failure_kind::out_of_memory;
      pl.best_peak = need;
      pl.reason = concat(pl.planner, ": the plan's memory layout needs an arena of ", need, " bytes (",
                         format_bytes(need), "; ", r.peak_bytes, " bytes live at its peak) after ", tries,
                         " tighter tries; the budget is ", budget, " bytes (", format_bytes(budget), ")",
                         "");
      return pl;
    }
    target = next;
    plan tighter = plan_for(target);
    if (!tighter.feasible) {  // keep the overflowing plan's verdict
      tries = layout_retries - 1;
      continue;
    }
    pl = std::move(tighter);
  }
}

}  // namespace memplan::detail
