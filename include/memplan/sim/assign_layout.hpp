#pragma once
/// \file
/// `assign_layout`: gives a plan its memory layout (DESIGN.md §6,
/// plan_layout.hpp) — the lifetimes of its allocations in the timeline the
/// simulator runs it in under its budget, placed in one arena by
/// `place` (arena_layout.hpp). A layout derived from that timeline keeps
/// it: the simulator, the validator and the executor then find every
/// allocation's bytes free when it is made.

#include <vector>

#include "memplan/arena_layout.hpp"
#include "memplan/cost/device.hpp"
#include "memplan/plan.hpp"
#include "memplan/plan_layout.hpp"
#include "memplan/problem.hpp"
#include "memplan/runtime/layout.hpp"
#include "memplan/sim/simulator.hpp"

namespace memplan {

/// Sets `pl.offsets` and `pl.arena_bytes` to the layout of its allocations
/// in the timeline of `simulate(p, pl, dev, pl.budget)` (any layout it had
/// is dropped first). A plan the simulator finds infeasible gets none.
/// \returns the report of that run (its `peak_bytes` the live peak).
inline report assign_layout(const problem& p, plan& pl, const device_spec& dev) {
  pl.offsets.clear();
  pl.arena_bytes = 0;
  report r = simulator().run(p, pl, dev, pl.budget, simulate_options{true, false});
  if (!r.feasible) return r;
  std::vector<double> start(pl.actions.size()), end(pl.actions.size());
  std::vector<index_t> order(pl.actions.size());
  for (const action_interval& row : r.timeline) {
    start[static_cast<std::size_t>(row.action)] = row.start_us;
    end[static_cast<std::size_t>(row.action)] = row.end_us;
    order[static_cast<std::size_t>(row.action)] = row.order;
  }
  const runtime::layout l = runtime::layout_of(p, pl);
  const allocation_lifetimes a = lifetimes_of(l, start, end, order);
  arena_layout placed = place(a.lifetimes, a.segments, dev.alignment);
  pl.offsets = std::move(placed.offsets);
  pl.arena_bytes = placed.arena_bytes;
  return r;
}

}  // namespace memplan
