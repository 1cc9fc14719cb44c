// How fast HOME searches (issue 8): the Policy Evaluator's cost per
// evaluation (HOME Table 3, third column) and a full 500-iteration,
// 500-particle search (Table 3, second column) on HOME's six models with
// CIFAR-10 inputs (§4.1) on an 11 GiB RTX 2080 Ti, on every core.
//
//   build/bench/bench_home --benchmark_filter='evaluate|emit|walk'
//   build/bench/bench_home --benchmark_filter=search
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "memplan/planners/home.hpp"
#include "memplan/testing/home_golden.hpp"
#include "walk_only.hpp"

namespace {

using namespace memplan;

using testing::home_table3;

/// Table 3's workload `state.range(0)` (its label set on `state`), its
/// feature maps and 64 random placements of them (a third of the maps
/// swapped, a third recomputed where they may be).
struct random_placements {
  testing::home_instance in;
  detail::home::feature_maps fm;
  std::vector<std::vector<detail::home::placement>> xs;

  explicit random_placements(benchmark::State& state) : random_placements(state, workload(state)) {}
  random_placements(benchmark::State& state, const testing::home_workload& w)
      : in(testing::load(w)), fm(in.p), xs(64, std::vector<detail::home::placement>(fm.size())) {
    state.SetLabel(std::string(w.model) + " b" + std::to_string(w.batch));
    std::uint64_t rng = 1;
    for (auto& x : xs) {
      for (std::size_t j = 0; j < fm.size(); ++j) {
        x[j] = static_cast<detail::home::placement>(detail::home::splitmix64(rng) % static_cast<std::uint64_t>(fm.choices(j)));
      }
    }
  }
  static const testing::home_workload& workload(const benchmark::State& state) {
    return home_table3[static_cast<std::size_t>(state.range(0))];
  }
};

// One evaluation of a random placement: emit its plan, simulate it.
void bm_evaluate(benchmark::State& state) {
  const random_placements r(state);
  detail::home::evaluator evaluate(r.in.p, r.in.dev, r.fm, r.in.budget);
  std::size_t k = 0;
  for (auto _ : state) benchmark::DoNotOptimize(evaluate(r.xs[k++ % r.xs.size()]));
  state.counters["ops"] = static_cast<double>(r.in.p.num_steps());
  state.counters["feature_maps"] = static_cast<double>(r.fm.size());
}
BENCHMARK(bm_evaluate)->DenseRange(0, 5)->Unit(benchmark::kMicrosecond);

// The parts of an evaluation of the same placements: emitting the plan
// (`home::emit`), and the simulator's plan walk alone (walk_only.hpp).
void bm_emit(benchmark::State& state) {
  const random_placements r(state);
  std::size_t k = 0;
  for (auto _ : state) benchmark::DoNotOptimize(detail::home::emit(r.in.p, r.fm, r.xs[k++ % r.xs.size()], r.in.budget).take());
}
BENCHMARK(bm_emit)->DenseRange(0, 5)->Unit(benchmark::kMicrosecond);

void bm_walk(benchmark::State& state) {
  const random_placements r(state);
  std::vector<plan> plans;
  for (const auto& x : r.xs) plans.push_back(detail::home::emit(r.in.p, r.fm, x, r.in.budget).take());
  plan_walk walk;
  bench::walk_only v;
  for (const plan& pl : plans) {
    if (!walk.run(r.in.p, pl, v)) state.SkipWithError(walk.why().c_str());
  }
  std::size_t k = 0;
  for (auto _ : state) benchmark::DoNotOptimize(walk.run(r.in.p, plans[k++ % plans.size()], v));
}
BENCHMARK(bm_walk)->DenseRange(0, 5)->Unit(benchmark::kMicrosecond);

// The full search, 500 x 500, seed 1, threads = every core; CPU is the
// whole process's (both threads), wall time is what a user waits. The
// result must be the golden one (tests/data/home_golden/, issue 29); with
// MEMPLAN_HOME_GOLDEN=write in the environment it is recorded there instead.
void bm_search(benchmark::State& state) {
  const testing::home_workload& w = home_table3[static_cast<std::size_t>(state.range(0))];
  state.SetLabel(std::string(w.model) + " b" + std::to_string(w.batch));
  const testing::home_instance in = testing::load(w);
  const detail::home::feature_maps fm(in.p);
  detail::home::search_result r;
  for (auto _ : state) r = testing::golden_search(in, 0);
  const nlohmann::json result = testing::to_golden(w, r);
  const std::string path = testing::golden_path(MEMPLAN_SOURCE_DIR, w);
  const char* mode = std::getenv("MEMPLAN_HOME_GOLDEN");
  if (mode != nullptr && std::string_view(mode) == "write") {
    std::ofstream(path) << result.dump(1) << "\n";
  } else if (const std::string diff = testing::golden_difference(testing::read_golden(path), result); !diff.empty()) {
    state.SkipWithError(("not the golden result: " + diff).c_str());
  }
  state.counters["feature_maps"] = static_cast<double>(fm.size());
  state.counters["evaluations"] = static_cast<double>(r.evaluations);
  state.counters["simulations"] = static_cast<double>(r.simulations);
  state.counters["bound_hits"] = static_cast<double>(r.bound_hits);
  state.counters["floor_decisions"] = static_cast<double>(r.floor_decisions);
  state.counters["fixed_point"] = r.fixed_point;
  state.counters["best_ms"] = r.best_fitness.time_us / 1e3;
  state.counters["excess_MiB"] = static_cast<double>(r.best_fitness.excess_bytes) / (1 << 20);
  state.counters["baseline_ms"] = in.p.baseline_time_us() / 1e3;
}
BENCHMARK(bm_search)->DenseRange(0, 5)->Iterations(1)->MeasureProcessCPUTime()->UseRealTime()->Unit(benchmark::kSecond);

}  // namespace

BENCHMARK_MAIN();
