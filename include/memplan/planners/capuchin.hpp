#pragma once
/// \file
/// `capuchin`: Capuchin (Peng et al., "Capuchin: Tensor-based GPU Memory
/// Management for Deep Learning", ASPLOS 2020), a planner that learns from
/// observed tensor accesses, in three stages:
/// 1. measured execution (§4.2, §5.2; capuchin/measured.hpp): the first
///    iteration in passive mode records the tensor access list;
/// 2. the policy maker (§4.3-4.5; capuchin/policy.hpp): swaps ranked by
///    FT (Eq. 1) with in-triggers, MSPS recomputation (Eq. 2, Algo 2) and
///    the hybrid choice (Algo 1);
/// 3. guided execution (§4.4, §5.3; capuchin/guided.hpp): decoupled
///    swap-out, collective recomputation, and feedback-driven in-trigger
///    adjustment over simulated iterations until the plan is stable.
/// The schedule is the order the ops ran in (a recorded order from a
/// `memplan-graph` file, or the zoo's).

#include <algorithm>
#include <cstdint>
#include <vector>
#include <string>
#include <utility>

#include "memplan/plan_builder.hpp"
#include "memplan/planners/capuchin/guided.hpp"
#include "memplan/planners/capuchin/measured.hpp"
#include "memplan/planners/capuchin/policy.hpp"
#include "memplan/planners/verdict.hpp"
#include "memplan/planners/planner.hpp"
#include "memplan/sim/simulator.hpp"

namespace memplan {

namespace detail::capuchin {

/// At most this many guided iterations (Capuchin §6.3.2: the policy is
/// "usually" stable "within 50 iterations").
inline constexpr index_t max_guided_iterations = 100;
/// At most this many times the policy is remade for a budget lower by
/// 1 / `replan_step` of the real one each time.
inline constexpr index_t max_replans = 12;
inline constexpr bytes_t replan_step = 32;

/// Everything Capuchin learned on the way to its plan.
struct outcome {
  plan result;
  report sim;                   ///< the simulator's verdict on the last guided iteration
  measured_execution measured;  ///< the first iteration, in passive mode
  index_t swaps = 0;            ///< tensors in the eviction set, by how they come back
  index_t recomputations = 0;
  index_t guided_iterations = 0;  ///< of the returned plan, until its in-triggers were stable
  index_t trigger_moves = 0;
  index_t replans = 0;            ///< policies remade for a lower budget (see `replan`)
};

/// Capuchin's policy and guided execution from measured execution `m`.
/// Where a guided iteration still runs out of memory — where Capuchin
/// falls back on passive mode at run time — the policy is remade for a
/// lower budget, and after half the re-plans, from the real budget again
/// with recomputations only where their lineage fits beside what the
/// back-access holds; where a recomputation had to bring a swapped source
/// back on demand, it is remade without that swap; at most `max_replans`
/// times. `keep_sources` as in emit_guided.
[[nodiscard]] inline outcome replan(const problem& p, const device_spec& dev, bytes_t budget,
                                   const measured_execution& m, bool keep_sources) {
  outcome out;
  simulator sim;
  bytes_t target = budget;
  std::vector<std::uint8_t> no_swap(p.num_tensors(), 0);
  bool lineage_must_fit = false;
  for (;; ++out.replans) {
    const policy pol = choose_policy(p, m, dev, target, no_swap, lineage_must_fit);
    guided_execution g = guide(p, m, dev, budget, pol, max_guided_iterations, sim, keep_sources);
    if ((g.sim.feasible && g.on_demand.empty()) || out.replans == max_replans) {
      out.result = std::move(g.result);
      out.sim = std::move(g.sim);
      out.guided_iterations = g.iterations;
      out.trigger_moves = g.trigger_moves;
      for (const eviction& ev : pol.evictions) (ev.how == regeneration::swap ? out.swaps : out.recomputations) += 1;
      detail::record_verdict(p, out.result, out.sim, dev, sim);
      out.result.history = std::move(g.history);
      if (!out.result.feasible) out.result.history.back().excess_bytes = out.result.best_peak - budget;
      return out;
    }
    // A swapped tensor that came back on demand for a recomputation stays
    // on the device next time; a plan that ran out of memory is remade with
    // recomputations only where their lineage fits, then for a lower budget.
    for (const index_t t : g.on_demand) no_swap[static_cast<std::size_t>(t)] = 1;
    if (!g.sim.feasible) {
      target -= budget / replan_step;
      if (out.replans + 1 == max_replans / 2) {
        lineage_must_fit = true;
        target = budget;
      }
    }
  }
}

/// Plans `p` for `budget` as Capuchin does: measured execution, then
/// `replan` with the recomputations' sources past their last access gone
/// and kept.
[[nodiscard]] inline outcome plan_capuchin(const problem& p, const device_spec& dev, bytes_t budget) {
  MEMPLAN_EXPECTS(budget >= 0, invalid_argument, "capuchin: the budget must be non-negative, got ", budget);
  const measured_execution m = measure(p, dev, budget);
  if (!m.failure.empty()) {
    outcome out;
    out.measured = m;
    plan_builder b(p, "capuchin", budget);
    b.infeasible(failure_kind::out_of_memory, "capuchin: measured execution cannot run: " + m.failure,
                 p.baseline_peak());
    out.result = std::move(b).finish();
    return out;
  }
  // The recomputations' sources past their last access gone, as in a
  // framework (§4.4), and kept until the recomputations have read them:
  // neither is better everywhere, so the better plan is kept — the one
  // that fits, the faster of two that do, the lower peak of two that do not.
  outcome gone = replan(p, dev, budget, m, false);
  outcome kept = replan(p, dev, budget, m, true);
  outcome out = std::move(detail::better_plan(kept.result, kept.sim, gone.result, gone.sim) ? kept : gone);
  out.measured = m;
  return out;
}

}  // namespace detail::capuchin

/// The `capuchin` planner: its three stages on the simulator (see the file comment).
struct capuchin_planner {
  /// Plans `p` on `dev` within `budget`.
  /// \throws invalid_argument if `budget` is negative.
  plan operator()(const problem& p, const device_spec& dev, bytes_t budget, const planner_options&) const {
    return detail::capuchin::plan_capuchin(p, dev, budget).result;
  }
};
static_assert(planner<capuchin_planner>);

}  // namespace memplan
