#pragma once
// The executor's data-integrity check, shared by every backend's tests
// (tests/test_executor.cpp on host::device, tests/cuda/ on cuda::device):
// each registered planner's plans, at several budgets, on the float chain
// and residual network, must read and write exactly the reference values,
// in an arena of exactly the budget with every buffer at its layout's
// offset (nothing compacted), and give every byte back.
//
// A Backend provides: `device`, `make(arena_bytes, pinned_bytes)` ->
// std::unique_ptr<device>, `op(workload, integrity&)` -> the run_op
// callback (it must call `integrity::check`), `load(workload)` -> the load
// callback.

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "float_net.hpp"
#include "memplan/cost/devices.hpp"
#include "memplan/planners/registry.hpp"
#include "memplan/planners/tsplit.hpp"
#include "memplan/planners/verdict.hpp"
#include "memplan/runtime/executor.hpp"
#include "memplan/sim/validator.hpp"

namespace memplan::test {

using example::float_workload;
using example::make_float_workload;
using example::matches;
using example::run_float_op;

/// Per action: how many of the tensors its op read or wrote differ from the
/// reference (each slot written by one action only, read after the run).
struct integrity {
  std::vector<int> mismatches;
  std::atomic<int> calls{0};
  explicit integrity(std::size_t actions) : mismatches(actions, 0) {}

  /// Runs `call` on host-addressable copies and records the mismatches: of
  /// the bytes it reads and writes (a micro-op: its micro-tensors' bytes).
  /// A weight gradient that a micro-op before the last one added its share
  /// to is a partial sum, checked by the last one.
  void check(const float_workload& w, const runtime::op_call& call) {
    int bad = 0;
    const auto ins = w.p.inputs(call.step);
    for (std::size_t i = 0; i < ins.size(); ++i) bad += matches(w, ins[i], call.input_regions[i]) ? 0 : 1;
    run_float_op(w, call);
    const auto outs = w.p.outputs(call.step);
    for (std::size_t i = 0; i < outs.size(); ++i) {
      const bool partial = call.part != no_index && call.part + 1 < call.parts &&
                           !splits_with_batch(w.p.kind[static_cast<std::size_t>(outs[i])]);
      if (call.outputs[i] != nullptr && !partial) bad += matches(w, outs[i], call.output_regions[i]) ? 0 : 1;
    }
    mismatches[static_cast<std::size_t>(call.action)] = bad;
    ++calls;
  }
  [[nodiscard]] int total() const {
    int sum = 0;
    for (const int m : mismatches) sum += m;
    return sum;
  }
};

inline index_t count(const plan& pl, action_kind k) {
  index_t n = 0;
  for (const action& a : pl.actions) n += a.kind == k ? 1 : 0;
  return n;
}

/// Runs `pl` on a backend device whose arena is exactly `budget`; checks
/// every value, the kept parameters, the memory, and that every byte comes
/// back. Returns the run's figures.
/// `timing`: issue in the simulator's start order on that device (else list order).
template <class Backend>
runtime::run_stats run_checked(Backend& backend, const float_workload& w, const plan& pl, bytes_t budget,
                               const device_spec* timing = nullptr) {
  const bytes_t pinned = runtime::pinned_bytes(w.p, pl, timing);
  const auto dev = backend.make(budget, pinned);
  std::optional<runtime::executor<typename Backend::device>> made;
  if (timing != nullptr) {
    made.emplace(*dev, w.p, pl, *timing);
  } else {
    made.emplace(*dev, w.p, pl);
  }
  auto& ex = *made;
  integrity check(pl.actions.size());
  const runtime::run_stats stats = ex.run(backend.op(w, check), backend.load(w));
  CHECK(check.total() == 0);
  CHECK(check.calls.load() == count(pl, action_kind::compute) + count(pl, action_kind::recompute));
  CHECK(stats.ops_run == check.calls.load());
  for (const index_t t : w.updated) {  // the new parameters are kept after the run
    std::vector<float> out(w.values[static_cast<std::size_t>(t)].size());
    ex.read(t, std::as_writable_bytes(std::span(out)));
    CHECK(matches(w, t, out.data()));
  }
  // The buffers sit at the layout's offsets (the plan's, when it has one):
  // inside the arena, never moved.
  if (!pl.offsets.empty()) CHECK(stats.arena_bytes == pl.arena_bytes);
  CHECK(stats.arena_bytes <= budget);
  CHECK(stats.arena_high_water_bytes <= stats.arena_bytes);
  CHECK(stats.peak_live_bytes <= stats.arena_high_water_bytes);
  CHECK(stats.compactions == 0);
  CHECK(stats.compacted_bytes == 0);
  CHECK(dev->arena().peak() == stats.peak_live_bytes);
  CHECK(stats.pinned_peak_bytes <= pinned);
  ex.release();
  CHECK(dev->arena().in_use() == 0);
  CHECK(dev->pinned().in_use() == 0);
  return stats;
}

/// Every registered planner, budgets 100/80/65/50 % of the baseline peak,
/// the chain (6 layers) and the residual network (4 blocks), batch 32, width
/// 16; and TSPLIT's walk with split (`tsplit` keeps the faster of its plans
/// with and without split, which on these graphs is one without), so that
/// micro-ops and micro-tensors run too.
template <class Backend>
void check_every_planner(Backend& backend) {
  const device_spec dev = find_device("titan-rtx");
  index_t swaps = 0, recomputes = 0, frees = 0, runs = 0, micro_plans = 0, micro_actions = 0, splits = 0;
  bytes_t micro_peak = 0, micro_budget = 0;  // the tightest run with micro-ops: arena high water, budget
  // The exact oracle (milp) would otherwise prove optimality for minutes;
  // its best plan after 2 s is as good a test of the executor.
  planner_options options;
  options.time_limit_s = 2;
  for (const bool residual : {false, true}) {
    const auto w = make_float_workload(residual ? 4 : 6, residual, 32, 16);
    const bytes_t peak = w.p.baseline_peak();
    std::vector<std::pair<std::string, std::function<plan(bytes_t)>>> makers;
    for (const auto& entry : planners()) {
      makers.emplace_back(entry.name, [&](bytes_t budget) { return entry.run(w.p, dev, budget, options); });
    }
    // Its plan laid out as tsplit's are (plan_tsplit): planned again for a
    // tighter target where the layout overflows the budget.
    makers.emplace_back("tsplit's split walk",
                        [&](bytes_t budget) { return detail::tsplit::plan_tsplit(w.p, dev, budget, "tsplit", {true}, 0); });
    for (const auto& [name, make] : makers) {
      int feasible = 0;
      for (const double fraction : {1.0, 0.8, 0.65, 0.5}) {
        const auto budget = static_cast<bytes_t>(static_cast<double>(peak) * fraction) / 256 * 256;
        CAPTURE(name);
        CAPTURE(residual);
        CAPTURE(budget);
        const plan pl = make(budget);
        if (!pl.feasible) continue;
        const validation v = validate(w.p, pl, dev, budget);
        CHECK_MESSAGE(v.ok, name, "'s plan is invalid: ", (v.errors.empty() ? std::string() : v.errors.front()));
        if (!v.ok) continue;  // not the executor's to run
        ++feasible;
        ++runs;
        const runtime::run_stats stats = run_checked(backend, w, pl, budget, &dev);
        const auto micro = static_cast<index_t>(std::ranges::count_if(
            pl.actions, [](const action& a) { return runtime::detail::part_of(a) != no_index; }));
        CHECK(stats.micro_actions == micro);  // every micro-op and micro-tensor action ran as one
        if (micro > 0) {
          ++micro_plans;
          micro_actions += micro;
          splits += stats.splits_in_place;
          if (micro_budget == 0 || budget < micro_budget) {
            micro_budget = budget;
            micro_peak = stats.arena_high_water_bytes;
          }
        }
        swaps += count(pl, action_kind::swap_in);
        recomputes += count(pl, action_kind::recompute);
        frees += count(pl, action_kind::free);
      }
      if (feasible == 0) MESSAGE(name, " made no valid feasible plan for this workload");
    }
  }
  MESSAGE("executed ", runs, " plans bit-identically: ", swaps, " swap-ins, ", recomputes, " recomputes, ", frees,
          " frees; ", micro_plans, " plans with ", micro_actions, " micro-op and micro-tensor actions, ", splits,
          " in-place splits; tightest: arena high water ", micro_peak, " B of a ", micro_budget, " B budget");
  // The plans exercised every kind of action.
  CHECK(runs >= 10);  // at least the none planner at 100 % and the baselines
  CHECK(swaps > 0);
  CHECK(recomputes > 0);
  CHECK(frees > 0);
  // tsplit's split walk split ops into micro-ops, and they ran, within budget.
  CHECK(micro_plans > 0);
  CHECK(micro_actions > 0);
  CHECK(micro_peak <= micro_budget);
}

}  // namespace memplan::test
