// How long Capuchin takes to plan (issue 9: resnet152 at batch 256 on a
// 16 GiB P100 in under 50 ms), everything included: the measured iteration
// in passive mode, the policy (Algo 1, 2) and the guided iterations judged
// by the simulator until the in-triggers are stable.
#include <benchmark/benchmark.h>

#include <string>

#include "memplan/compile.hpp"
#include "memplan/cost/devices.hpp"
#include "memplan/model/zoo.hpp"
#include "memplan/planners/capuchin.hpp"

namespace {

using namespace memplan;

void bm_capuchin(benchmark::State& state, const std::string& name, int batch) {
  const device_spec& p100 = find_device("p100");
  model::options o;
  o.batch = batch;
  const problem p = compile(model::build(name, o, p100));
  detail::capuchin::outcome out;
  for (auto _ : state) {
    out = detail::capuchin::plan_capuchin(p, p100, p100.memory_bytes);
    benchmark::DoNotOptimize(out.result.actions.data());
  }
  state.counters["ops"] = static_cast<double>(p.num_steps());
  state.counters["actions"] = static_cast<double>(out.result.actions.size());
  state.counters["feasible"] = out.result.feasible ? 1 : 0;
  state.counters["swaps"] = static_cast<double>(out.swaps);
  state.counters["recomputations"] = static_cast<double>(out.recomputations);
  state.counters["guided_iterations"] = static_cast<double>(out.guided_iterations);
  state.counters["replans"] = static_cast<double>(out.replans);
  state.counters["overhead_pct"] = 100 * out.sim.overhead;
}

BENCHMARK_CAPTURE(bm_capuchin, resnet152_b256, std::string("resnet152"), 256)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_capuchin, resnet50_b500, std::string("resnet50"), 500)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_capuchin, bert_base_b300, std::string("bert-base"), 300)->Unit(benchmark::kMillisecond);

}  // namespace
BENCHMARK_MAIN();
