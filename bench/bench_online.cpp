// The online policies' own cost per decision (issue 4: "a decision among
// 10,000 resident tensors in under 10 µs"). A forward chain of n ops, each
// making a tensor the backward op reads, leaves n activations resident,
// each touched at a different time; one decision is one `choose` over all
// n candidates (Filter + Director for DELTA). Items are decisions.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "memplan/compile.hpp"
#include "memplan/cost/devices.hpp"
#include "memplan/graph/graph.hpp"
#include "memplan/planners/dtr.hpp"
#include "memplan/problem.hpp"

namespace {

using namespace memplan;

/// x -> a_1 -> ... -> a_n (forward, sizes and times varying), one backward
/// op reading every a_i.
std::string numbered(char prefix, int i) {
  std::string name(1, prefix);
  name += std::to_string(i);
  return name;
}

problem make_fan(int n) {
  graph g("fan");
  const auto tensor = [&](std::string name, bytes_t bytes, tensor_kind kind) {
    return g.add_tensor({.id = static_cast<std::int64_t>(g.num_tensors()), .name = std::move(name), .bytes = bytes,
                         .kind = kind, .shape = {}, .dtype = {}});
  };
  std::vector<index_t> a{tensor("x", 1 << 20, tensor_kind::input)};
  for (int i = 1; i <= n; ++i) a.push_back(tensor(numbered('a', i), (1 + i % 7) << 20, tensor_kind::activation));
  const index_t grad = tensor("g", 1 << 20, tensor_kind::gradient);
  for (int i = 1; i <= n; ++i) {
    g.add_op({.id = i - 1, .name = numbered('f', i), .type = "layer", .phase = phase::forward,
              .time_us = 10.0 + i % 13, .workspace_bytes = 0, .inputs = {a[static_cast<std::size_t>(i) - 1]},
              .outputs = {a[static_cast<std::size_t>(i)]}, .recomputable = true, .split_dims = {}});
  }
  g.add_op({.id = n, .name = "b", .type = "layer", .phase = phase::backward, .time_us = 10, .workspace_bytes = 0,
            .inputs = std::vector<index_t>(a.begin() + 1, a.end()), .outputs = {grad}, .recomputable = false,
            .split_dims = {}});
  return compile(g);
}

/// The state after the forward pass: every a_i resident, made at step i.
online::online_state after_forward(const problem& p, bool offloads) {
  online::online_state s(p, std::numeric_limits<bytes_t>::max() / 2, offloads);
  for (index_t step = 0; step + 1 < static_cast<index_t>(p.num_steps()); ++step) {
    s.set_step(step);
    s.advance(p.time_us[static_cast<std::size_t>(step)]);
    for (const index_t t : p.outputs(step)) s.make_resident(t);
  }
  return s;
}

void bm_dtr_decision(benchmark::State& st) {
  const problem p = make_fan(static_cast<int>(st.range(0)));
  const online::online_state s = after_forward(p, false);
  const dtr_policy policy;
  for (auto _ : st) benchmark::DoNotOptimize(policy.choose(s));
  st.SetItemsProcessed(st.iterations());
  st.counters["candidates"] = static_cast<double>(s.candidates().size());
}
BENCHMARK(bm_dtr_decision)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMicrosecond);

void bm_delta_decision(benchmark::State& st) {
  const problem p = make_fan(static_cast<int>(st.range(0)));
  const online::online_state s = after_forward(p, true);
  const device_spec dev = find_device("a100");
  const delta_policy policy(dev, {});
  for (auto _ : st) benchmark::DoNotOptimize(policy.choose(s));
  st.SetItemsProcessed(st.iterations());
  st.counters["candidates"] = static_cast<double>(s.candidates().size());
}
BENCHMARK(bm_delta_decision)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
