// Simulator throughput vs plan size (STYLE.md: one benchmark per question).
// A synthetic chain with a backward pass, of 1,000 / 10,000 / 100,000 ops,
// planned with swaps and recomputes, judged by the simulator; items are
// plan actions. The validator (independent of the simulator, O(n log n)) is
// timed on 1,000 and 100,000 ops, and the plan walk alone (pass 1 without
// the resolver's work) on 1,000.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "memplan/compile.hpp"
#include "memplan/graph/graph.hpp"
#include "memplan/plan.hpp"
#include "memplan/plan_builder.hpp"
#include "memplan/problem.hpp"
#include "memplan/sim/simulator.hpp"
#include "memplan/sim/validator.hpp"
#include "walk_only.hpp"

namespace {

using namespace memplan;

/// layers forward ops f_i: (a_{i-1}, w_i) -> a_i, a loss, and backward ops
/// b_i: (g_i, a_{i-1}, w_i) -> (g_{i-1}, gw_i): 2 * layers + 1 ops.
struct chain_model {
  problem p;
  std::vector<index_t> act;   ///< act[i] = a_i (act[0] = the input)
  std::vector<index_t> fwd;   ///< fwd[i] = step of f_i (1-based)
  std::vector<index_t> bwd;   ///< bwd[i] = step of b_i
  index_t loss = no_index;    ///< step of the loss
};

chain_model make_chain(int layers) {
  graph g("chain");
  chain_model m;
  const auto tensor = [&](std::string name, bytes_t bytes, tensor_kind kind) {
    return g.add_tensor({.name = std::move(name), .bytes = bytes,
                         .kind = kind, .shape = {}, .dtype = {}});
  };
  const auto op = [&](std::string name, double time_us, std::vector<index_t> in, std::vector<index_t> out, phase ph) {
    return g.add_op({.name = std::move(name), .type = "layer",
                     .phase = ph, .time_us = time_us, .workspace_bytes = 1 << 20, .inputs = std::move(in),
                     .outputs = std::move(out), .recomputable = ph == phase::forward, .split_dims = {0}});
  };
  constexpr bytes_t activation = 64 << 20;
  std::vector<index_t> weight(static_cast<std::size_t>(layers) + 1), grad(static_cast<std::size_t>(layers) + 1);
  m.act.push_back(tensor("x", activation, tensor_kind::input));
  for (int i = 1; i <= layers; ++i) {
    const std::string n = std::to_string(i);
    weight[static_cast<std::size_t>(i)] = tensor("w" + n, 4 << 20, tensor_kind::parameter);
    m.act.push_back(tensor("a" + n, activation, tensor_kind::activation));
    grad[static_cast<std::size_t>(i)] = tensor("g" + n, activation, tensor_kind::gradient);
  }
  m.fwd.resize(static_cast<std::size_t>(layers) + 1);
  m.bwd.resize(static_cast<std::size_t>(layers) + 1);
  schedule order;  // ops run in the order they are added: the step is the position
  const auto step = [&] { return static_cast<index_t>(order.size()); };
  for (int i = 1; i <= layers; ++i) {
    const auto u = static_cast<std::size_t>(i);
    m.fwd[u] = step();
    order.push_back(op("f" + std::to_string(i), 2000, {m.act[u - 1], weight[u]}, {m.act[u]}, phase::forward));
  }
  m.loss = step();
  order.push_back(op("loss", 100, {m.act.back()}, {grad.back()}, phase::backward));
  for (int i = layers; i >= 1; --i) {
    const auto u = static_cast<std::size_t>(i);
    std::vector<index_t> out{tensor("gw" + std::to_string(i), 4 << 20, tensor_kind::parameter_gradient)};
    if (i > 1) out.push_back(grad[u - 1]);
    m.bwd[u] = step();
    order.push_back(op("b" + std::to_string(i), 4000, {grad[u], m.act[u - 1], weight[u]}, std::move(out),
                       phase::backward));
  }
  m.p = compile(g, order);
  return m;
}

/// a_i with i % 3 == 1 is swapped out after f_{i+1} and prefetched, on the
/// end of the previous backward op, two ops before it is needed; a_i with
/// i % 3 == 2 is freed after f_{i+1} and recomputed (from the swapped
/// a_{i-1}) just before b_{i+1}.
plan swap_and_recompute(const chain_model& m, bytes_t budget) {
  const auto layers = static_cast<int>(m.fwd.size()) - 1;
  const auto kind = [&](int i) { return i >= 1 && i < layers ? i % 3 : 0; };  // 1 swap, 2 recompute
  plan_builder b(m.p, "swap-recompute", budget);
  std::vector<std::uint8_t> back(m.act.size(), 1);
  for (int i = 1; i <= layers; ++i) {
    b.compute(m.fwd[static_cast<std::size_t>(i)]);
    if (kind(i - 1) == 1) b.swap_out(m.act[static_cast<std::size_t>(i - 1)]);
    if (kind(i - 1) == 2) b.free(m.act[static_cast<std::size_t>(i - 1)]);
    if (kind(i - 1) != 0) back[static_cast<std::size_t>(i - 1)] = 0;
  }
  index_t last = b.compute(m.loss);
  const auto bring = [&](int j, bool prefetch) {
    const auto u = static_cast<std::size_t>(j);
    if (j < 1 || back[u] || (prefetch && kind(j) != 1)) return;
    if (kind(j) == 1) {
      const index_t trigger[] = {last};  // Capuchin-style in-trigger: the previous compute
      b.swap_in(m.act[u], trigger);
    } else {
      b.recompute(m.fwd[u]);
    }
    back[u] = 1;
  };
  for (int k = layers; k >= 1; --k) {
    bring(k - 3, true);
    if (kind(k - 1) == 2) bring(k - 2, false);
    bring(k - 1, false);
    last = b.compute(m.bwd[static_cast<std::size_t>(k)]);
  }
  return std::move(b).finish();
}

device_spec bench_device() {
  device_spec d;
  d.name = "bench";
  d.d2h = {12.0, 10.0};
  d.h2d = {12.0, 10.0};
  return d;
}

/// The graph's ops and the plan's actions, for tools/paper_tables' table.
void count_sizes(benchmark::State& state, const problem& p, const plan& pl) {
  state.counters["ops"] = static_cast<double>(p.num_steps());
  state.counters["actions"] = static_cast<double>(pl.actions.size());
}

void bm_simulate(benchmark::State& state) {
  const chain_model m = make_chain(static_cast<int>(state.range(0)) / 2);
  const bytes_t budget = m.p.baseline_peak();
  const plan pl = swap_and_recompute(m, budget);
  const device_spec dev = bench_device();
  simulator sim;
  const report check = sim.run(m.p, pl, dev, budget);
  if (!check.feasible) state.SkipWithError(check.failure.c_str());
  for (auto _ : state) benchmark::DoNotOptimize(sim.run(m.p, pl, dev, budget));
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(pl.actions.size()));
  count_sizes(state, m.p, pl);
  state.counters["peak/baseline"] = static_cast<double>(check.peak_bytes) / static_cast<double>(budget);
  state.counters["overhead"] = check.overhead;
}
BENCHMARK(bm_simulate)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMicrosecond);

// The same graph with the keep-everything plan: one action per op.
void bm_simulate_keep_all(benchmark::State& state) {
  const chain_model m = make_chain(static_cast<int>(state.range(0)) / 2);
  const bytes_t budget = m.p.baseline_peak();
  const plan pl = keep_all_plan(m.p, budget);
  const device_spec dev = bench_device();
  simulator sim;
  for (auto _ : state) benchmark::DoNotOptimize(sim.run(m.p, pl, dev, budget));
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(pl.actions.size()));
  count_sizes(state, m.p, pl);
}
BENCHMARK(bm_simulate_keep_all)->Arg(1000)->Arg(100000)->Unit(benchmark::kMicrosecond);

void bm_simulate_recorded(benchmark::State& state) {
  const chain_model m = make_chain(static_cast<int>(state.range(0)) / 2);
  const bytes_t budget = m.p.baseline_peak();
  const plan pl = swap_and_recompute(m, budget);
  const device_spec dev = bench_device();
  simulator sim;
  for (auto _ : state) {
    benchmark::DoNotOptimize(sim.run(m.p, pl, dev, budget, {.record_timeline = true, .record_memory = true}));
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(pl.actions.size()));
  count_sizes(state, m.p, pl);
}
BENCHMARK(bm_simulate_recorded)->Arg(1000)->Arg(100000)->Unit(benchmark::kMicrosecond);

// The same plan read by the plan walk alone: bm_simulate's pass 1 without
// the resolver's work (copies' holders, times), and no unbounded pass.
void bm_walk(benchmark::State& state) {
  const chain_model m = make_chain(static_cast<int>(state.range(0)) / 2);
  const plan pl = swap_and_recompute(m, m.p.baseline_peak());
  plan_walk walk;
  bench::walk_only v;
  if (!walk.run(m.p, pl, v)) state.SkipWithError(walk.why().c_str());
  for (auto _ : state) benchmark::DoNotOptimize(walk.run(m.p, pl, v));
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(pl.actions.size()));
  count_sizes(state, m.p, pl);
}
BENCHMARK(bm_walk)->Arg(1000)->Unit(benchmark::kMicrosecond);

void bm_validate(benchmark::State& state) {
  const chain_model m = make_chain(static_cast<int>(state.range(0)) / 2);
  const bytes_t budget = m.p.baseline_peak();
  const plan pl = swap_and_recompute(m, budget);
  const device_spec dev = bench_device();
  const validation check = validate(m.p, pl, dev, budget);
  if (!check.ok) state.SkipWithError(check.errors.front().c_str());
  for (auto _ : state) benchmark::DoNotOptimize(validate(m.p, pl, dev, budget));
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(pl.actions.size()));
  count_sizes(state, m.p, pl);
}
BENCHMARK(bm_validate)->Arg(1000)->Arg(100000)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
