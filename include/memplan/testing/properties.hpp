#pragma once
/// \file
/// The properties every plan of every planner must have, checked in one
/// place for property tests, regression replays and planners' own tests:
/// a feasible plan passes the independent validator, the simulator accepts
/// it with a peak within the budget (and not below the problem's lower
/// bound), the two agree on peak and time; an infeasible plan says why, with
/// a failure kind; a planner never throws on a well-formed problem.

#include <algorithm>
#include <cmath>
#include <exception>
#include <string>
#include <utility>

#include "memplan/cost/device.hpp"
#include "memplan/error.hpp"
#include "memplan/plan.hpp"
#include "memplan/planners/registry.hpp"
#include "memplan/problem.hpp"
#include "memplan/sim/simulator.hpp"
#include "memplan/sim/validator.hpp"
#include "memplan/testing/generators.hpp"

namespace memplan::testing {

/// Checks the properties of `pl`, a plan for `p` under `budget`.
/// \returns "" when they hold, else one line starting with the property
///          broken ("validator: ...", "over budget: ...").
[[nodiscard]] inline std::string check_plan(const problem& p, const plan& pl, const device_spec& dev, bytes_t budget) {
  using memplan::detail::concat;
  if (pl.feasible != (pl.kind == failure_kind::none)) {
    return concat("kind: ", pl.feasible ? "feasible" : "infeasible", " with failure kind ", to_string(pl.kind));
  }
  if (!pl.feasible) return pl.reason.empty() ? "infeasible without a reason: the plan's reason is empty" : "";
  if (pl.decisions.size() != p.num_tensors()) {
    return concat("decisions: ", pl.decisions.size(), " for ", p.num_tensors(), " tensors");
  }
  const report r = simulate(p, pl, dev, budget);
  if (!r.feasible) return concat("simulator: ", r.failure);
  if (r.peak_bytes > budget) return concat("over budget: simulated peak ", r.peak_bytes, " B > budget ", budget, " B");
  const bytes_t bound = peak_lower_bound(p);
  if (r.peak_bytes < bound) return concat("below the lower bound: simulated peak ", r.peak_bytes, " B < ", bound, " B");
  const validation v = validate(p, pl, dev, budget);
  if (!v.ok) return concat("validator: ", v.errors.front());
  if (v.peak_bytes != r.peak_bytes || std::abs(v.time_us - r.time_us) > 1e-6 * std::max(1.0, r.time_us)) {
    return concat("validator and simulator disagree: peak ", v.peak_bytes, " vs ", r.peak_bytes, " B, time ",
                  v.time_us, " vs ", r.time_us, " us");
  }
  return "";
}

/// The outcome of one planner on one case.
struct planner_check {
  bool feasible = false;  ///< the planner said its plan fits
  std::string failure;    ///< "" when every property holds, else `check_plan`'s line or "threw: ..."
  memplan::plan plan;     ///< the plan checked (empty if the planner threw)
};

/// Runs planner `entry` on `p` under `budget` and checks its plan
/// (`check_plan`); an exception from the planner is a failure ("threw: ...").
[[nodiscard]] inline planner_check check_planner(const planner_entry& entry, const problem& p,
                                                 const device_spec& dev, bytes_t budget, const planner_options& o) {
  try {
    plan pl = entry.run(p, dev, budget, o);
    std::string failure = check_plan(p, pl, dev, budget);
    return {pl.feasible, std::move(failure), std::move(pl)};
  } catch (const std::exception& e) {
    return {false, memplan::detail::concat("threw: ", e.what()), {}};
  } catch (...) {
    return {false, "threw something that is not a std::exception", {}};
  }
}

/// The property a failure message says was broken: its text up to the first
/// colon ("validator", "over budget", "threw"). Shrinking keeps it fixed so
/// that a smaller graph does not trade one bug for another.
[[nodiscard]] inline std::string broken_property(const std::string& failure) {
  return failure.substr(0, failure.find(':'));
}

}  // namespace memplan::testing
