// How long TSPLIT takes to plan (issue 7's goals: resnet152 at batch 256
// under 50 ms, a ~100,000-op gpt2 graph under 2 s). The model is built and
// compiled once; each iteration is one call of the planner, feedback rounds
// and their simulations included. The budget is the device's memory for
// resnet152 (titan-rtx, 24 GiB) and 80 % of the baseline peak for gpt2,
// whose 2,000 layers hold 53 GiB of parameters. The planners' walks run on
// every core (planner_options::threads), so the time is wall time.
#include <benchmark/benchmark.h>

#include <string>

#include "memplan/compile.hpp"
#include "memplan/cost/devices.hpp"
#include "memplan/model/zoo.hpp"
#include "memplan/planners/registry.hpp"

namespace {

using namespace memplan;

void plan_model(benchmark::State& state, const std::string& planner, const std::string& model, int batch,
                int layers, double share_of_peak) {
  const device_spec& dev = find_device("titan-rtx");
  model::options o;
  o.batch = batch;
  o.layers = layers;
  const problem p = compile(model::build(model, o, dev));
  const bytes_t budget = share_of_peak > 0
                             ? static_cast<bytes_t>(share_of_peak * static_cast<double>(p.baseline_peak()))
                             : dev.memory_bytes;
  const planner_entry& entry = find_planner(planner);
  bool feasible = false;
  for (auto _ : state) {
    const plan pl = entry.run(p, dev, budget, planner_options{});
    feasible = pl.feasible;
    benchmark::DoNotOptimize(pl.actions.data());
  }
  state.counters["ops"] = static_cast<double>(p.num_steps());
  state.counters["feasible"] = feasible ? 1 : 0;
}

void bm_resnet152_b256(benchmark::State& state, const std::string& planner) {
  plan_model(state, planner, "resnet152", 256, 0, 0);
}
void bm_gpt2_100k_ops(benchmark::State& state, const std::string& planner) {
  plan_model(state, planner, "gpt2", 1, 2000, 0.8);
}

}  // namespace

BENCHMARK_CAPTURE(bm_resnet152_b256, tsplit_nosplit, std::string("tsplit-nosplit"))
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(bm_resnet152_b256, tsplit, std::string("tsplit"))->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(bm_gpt2_100k_ops, tsplit_nosplit, std::string("tsplit-nosplit"))
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->UseRealTime();
BENCHMARK_CAPTURE(bm_gpt2_100k_ops, tsplit, std::string("tsplit"))
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->UseRealTime();

BENCHMARK_MAIN();
