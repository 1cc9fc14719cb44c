// Writing your own planner: a type with
//   plan operator()(const problem&, const device_spec&, bytes_t budget, const planner_options&) const
// registered under a name, after which find_planner, `auto --portfolio` and
// `--seed-with` know it and its plans are laid out and validated like the
// papers'. This one leaves the host link alone: of the plans the registry's
// capuchin, tsplit-nosplit and checkpoint make, it keeps the one that swaps
// the fewest bytes (the faster on a tie), for a job that shares PCIe with
// its data loader.
//
// Run: own_planner [MODEL [BATCH [BUDGET_PERCENT]]] (default resnet50 32 60).
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <utility>

#include "memplan/compile.hpp"
#include "memplan/cost/devices.hpp"
#include "memplan/model/zoo.hpp"
#include "memplan/plan_builder.hpp"
#include "memplan/planners/registry.hpp"
#include "memplan/sim/simulator.hpp"
#include "memplan/sim/validator.hpp"

namespace {

struct fewest_swaps {
  memplan::plan operator()(const memplan::problem& p, const memplan::device_spec& dev, memplan::bytes_t budget,
                           const memplan::planner_options& o) const {
    std::optional<memplan::plan> best;
    memplan::report best_report;
    for (const char* name : {"capuchin", "tsplit-nosplit", "checkpoint"}) {
      memplan::plan pl = memplan::find_planner(name).run(p, dev, budget, o);
      if (!pl.feasible) continue;
      const memplan::report r = memplan::simulate(p, pl, dev, budget);
      const bool fewer = !best || r.swapped_out_bytes < best_report.swapped_out_bytes ||
                         (r.swapped_out_bytes == best_report.swapped_out_bytes && r.time_us < best_report.time_us);
      if (fewer) best = std::move(pl), best_report = r;
    }
    if (best) {
      best->reason = best->planner + "'s plan";  // a feasible plan's reason is a caveat
      best->planner = "fewest-swaps";
      return *std::move(best);
    }
    memplan::plan_builder none(p, "fewest-swaps", budget);
    none.infeasible(memplan::failure_kind::out_of_memory,
                    "fewest-swaps: neither capuchin, tsplit-nosplit nor checkpoint fits", p.baseline_peak());
    return std::move(none).finish();
  }
};

}  // namespace

int main(int argc, char** argv) {
  memplan::register_planner<fewest_swaps>("fewest-swaps", "the plan that swaps the fewest bytes");
  const memplan::device_spec& dev = memplan::find_device("titan-rtx");
  memplan::model::options mo;
  mo.batch = argc > 2 ? std::atoi(argv[2]) : 32;
  const memplan::problem p = memplan::compile(memplan::model::build(argc > 1 ? argv[1] : "resnet50", mo, dev));
  const double share = (argc > 3 ? std::atof(argv[3]) : 60) / 100;
  const auto budget = static_cast<memplan::bytes_t>(share * static_cast<double>(p.baseline_peak()));
  const memplan::plan pl = memplan::find_planner("fewest-swaps").run(p, dev, budget, {});
  if (!pl.feasible) {
    std::cerr << pl.reason << "\n";
    return 2;
  }
  const memplan::report r = memplan::simulate(p, pl, dev, budget);
  std::cout << p.name << " at " << budget << " B: " << r.swapped_out_bytes << " B swapped out, "
            << r.recomputed_ops << " recomputes, overhead " << r.overhead * 100 << " %; valid: "
            << (memplan::validate(p, pl, dev, budget).ok ? "yes" : "no") << "\n";
  return memplan::validate(p, pl, dev, budget).ok ? 0 : 1;
}
