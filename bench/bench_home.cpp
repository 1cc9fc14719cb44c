// How fast HOME searches (issue 8): the Policy Evaluator's cost per
// evaluation (HOME Table 3, third column) and a full 500-iteration,
// 500-particle search (Table 3, second column) on HOME's six models with
// CIFAR-10 inputs (§4.1) on an 11 GiB RTX 2080 Ti, on every core.
//
//   build/bench/bench_home --benchmark_filter=evaluate
//   build/bench/bench_home --benchmark_filter=search
#include <benchmark/benchmark.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "memplan/cost/devices.hpp"
#include "memplan/model/zoo.hpp"
#include "memplan/planners/home.hpp"
#include "memplan/problem.hpp"

namespace {

using namespace memplan;

/// HOME's models at the largest batch `capuchin` plans within 11 GiB
/// (`memplan maxbatch --model M --cifar --device rtx-2080ti --planners
/// capuchin`), HOME Table 2's setting. HOME does not give ResNet's depth;
/// we use ResNet-50.
struct workload {
  const char* model;
  int batch;
};
constexpr std::array<workload, 6> workloads{{{"mobilenet", 14755},
                                             {"plain20", 56530},
                                             {"squeezenet", 15011},
                                             {"vgg16", 14868},
                                             {"resnet50", 2687},
                                             {"inception_v3", 699}}};

struct instance {
  problem p;
  device_spec dev = find_device("rtx-2080ti");
  bytes_t budget = dev.memory_bytes;
};

instance load(const workload& w) {
  instance in;
  model::options o;
  o.batch = w.batch;
  o.cifar = true;
  in.p = compile(model::build(w.model, o, in.dev));
  return in;
}

// One evaluation of a random placement: emit its plan, simulate it.
void bm_evaluate(benchmark::State& state) {
  const workload& w = workloads[static_cast<std::size_t>(state.range(0))];
  state.SetLabel(std::string(w.model) + " b" + std::to_string(w.batch));
  const instance in = load(w);
  const detail::home::feature_maps fm(in.p);
  detail::home::evaluator evaluate(in.p, in.dev, fm, in.budget, 0);
  std::vector<std::vector<detail::home::placement>> xs(64, std::vector<detail::home::placement>(fm.size()));
  std::uint64_t rng = 1;
  for (auto& x : xs) {
    for (std::size_t j = 0; j < fm.size(); ++j) {
      x[j] = static_cast<detail::home::placement>(detail::home::splitmix64(rng) % static_cast<std::uint64_t>(fm.choices(j)));
    }
  }
  std::size_t k = 0;
  for (auto _ : state) benchmark::DoNotOptimize(evaluate(xs[k++ % xs.size()]));
  state.counters["ops"] = static_cast<double>(in.p.num_steps());
  state.counters["feature_maps"] = static_cast<double>(fm.size());
}
BENCHMARK(bm_evaluate)->DenseRange(0, 5)->Unit(benchmark::kMicrosecond);

// The full search, 500 x 500, threads = every core; CPU is the whole
// process's (both threads), wall time is what a user waits.
void bm_search(benchmark::State& state) {
  const workload& w = workloads[static_cast<std::size_t>(state.range(0))];
  state.SetLabel(std::string(w.model) + " b" + std::to_string(w.batch));
  const instance in = load(w);
  const detail::home::feature_maps fm(in.p);
  detail::home::search_result r;
  for (auto _ : state) r = detail::home::search(in.p, in.dev, in.budget, fm, {}, planner_options{}, {});
  state.counters["feature_maps"] = static_cast<double>(fm.size());
  state.counters["evaluations"] = static_cast<double>(r.evaluations);
  state.counters["simulations"] = static_cast<double>(r.simulations);
  state.counters["best_ms"] = r.best_fitness.time_us / 1e3;
  state.counters["excess_MiB"] = static_cast<double>(r.best_fitness.excess_bytes) / (1 << 20);
  state.counters["baseline_ms"] = in.p.baseline_time_us() / 1e3;
}
BENCHMARK(bm_search)->DenseRange(0, 5)->Iterations(1)->MeasureProcessCPUTime()->UseRealTime()->Unit(benchmark::kSecond);

}  // namespace

BENCHMARK_MAIN();
