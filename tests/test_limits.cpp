// Limits (issue 5): a graph of a million ops and tensors of 10^15 bytes
// compile, plan and simulate without overflow; byte totals past 2^63 - 1
// are refused with a message; a planner whose time limit has run out still
// returns a valid plan or an infeasible one with a reason.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "memplan/compile.hpp"
#include "memplan/cost/devices.hpp"
#include "memplan/graph/graph.hpp"
#include "memplan/io/size.hpp"
#include "memplan/planners/registry.hpp"
#include "memplan/sim/simulator.hpp"
#include "memplan/testing/generators.hpp"
#include "memplan/testing/properties.hpp"

namespace {

using namespace memplan;

// A chain of n layers and its backward, every tensor `bytes`, every op 1 µs:
//   f_i: a_{i-1} -> a_i (i = 1..n, a_0 = x), loss: a_n -> g_n,
//   b_i: g_i, a_{i-1} -> g_{i-1} (i = n..1): 2n + 1 ops, 2n + 2 tensors.
// At the loss step a_0..a_n and g_n are live: the baseline peak is
// (n + 2) * bytes; later steps hold fewer activations.
graph long_chain(std::int64_t n, bytes_t bytes) {
  graph g("chain");
  const auto tensor = [&](tensor_kind kind) {
    const auto id = static_cast<std::int64_t>(g.num_tensors());
    return g.add_tensor({.id = id, .name = "t" + std::to_string(id), .bytes = bytes, .kind = kind, .shape = {}, .dtype = {}});
  };
  const auto op = [&](phase ph, std::vector<index_t> in, index_t out) {
    const auto id = static_cast<std::int64_t>(g.num_ops());
    g.add_op({.id = id, .name = "op" + std::to_string(id), .type = "layer", .phase = ph, .time_us = 1,
              .workspace_bytes = 0, .inputs = std::move(in), .outputs = {out}, .recomputable = ph == phase::forward,
              .split_dims = {}});
  };
  std::vector<index_t> a{tensor(tensor_kind::input)};
  for (std::int64_t i = 1; i <= n; ++i) {
    a.push_back(tensor(tensor_kind::activation));
    op(phase::forward, {a[static_cast<std::size_t>(i - 1)]}, a.back());
  }
  index_t grad = tensor(tensor_kind::gradient);
  op(phase::backward, {a.back()}, grad);
  for (std::int64_t i = n; i >= 1; --i) {
    const index_t next = tensor(tensor_kind::gradient);
    op(phase::backward, {grad, a[static_cast<std::size_t>(i - 1)]}, next);
    grad = next;
  }
  return g;
}

}  // namespace

TEST_CASE("a million ops of 10^9 bytes each: compiled, planned and simulated exactly") {
  constexpr std::int64_t n = 500'000;
  constexpr bytes_t gb = 1'000'000'000;
  const graph g = long_chain(n, gb);
  REQUIRE(g.num_ops() == 1'000'001);
  const problem p = compile(g);
  CHECK(p.num_steps() == 1'000'001);
  CHECK(p.baseline_peak() == (n + 2) * gb);  // 5.00002 * 10^14 bytes: past 2^32 and 2^48
  CHECK(p.baseline_time_us() == 1'000'001.0);
  const device_spec& dev = find_device("titan-rtx");
  const report keep = simulate(p, find_planner("none").run(p, dev, p.baseline_peak(), {}), dev, p.baseline_peak());
  CHECK(keep.feasible);
  CHECK(keep.peak_bytes == (n + 2) * gb);
  CHECK(keep.time_us == 1'000'001.0);
  // sqrt(n) checkpointing at a tenth of the baseline: a real plan of about
  // 1.5 million actions, judged by the simulator (the quadratic validator
  // is for graphs of thousands of ops).
  const bytes_t budget = p.baseline_peak() / 10;
  const plan pl = find_planner("checkpoint").run(p, dev, budget, {});
  REQUIRE(pl.feasible);
  const report r = simulate(p, pl, dev, budget);
  CHECK(r.feasible);
  CHECK(r.peak_bytes <= budget);
  CHECK(r.peak_bytes >= 3 * gb);  // the loss step's a_n and g_n, and x
  CHECK(r.recomputed_ops > 0);
}

TEST_CASE("tensors of 10^15 bytes: every planner's plan passes the properties") {
  testing::graph_options o;
  o.shape = testing::graph_shape::residual;
  o.forward_ops = 12;
  o.min_bytes = 1'000'000'000'000'000;  // 10^15: a petabyte per tensor
  o.max_bytes = 1'000'000'000'000'000;
  o.zero_bytes_fraction = 0;
  const problem p = compile(testing::random_training_graph(o, 5));
  for (std::size_t t = 0; t < p.num_tensors(); ++t) CHECK(p.bytes[t] == 1'000'000'000'000'000);
  const bytes_t lo = testing::peak_lower_bound(p), hi = p.baseline_peak();
  CHECK(hi % 1'000'000'000'000'000 == 0);
  const device_spec& dev = find_device("titan-rtx");
  for (const planner_entry& e : planners()) {
    CAPTURE(e.name);
    for (const bytes_t budget : {lo, lo + (hi - lo) / 2, hi}) {
      CAPTURE(budget);
      CHECK(testing::check_planner(e, p, dev, budget, {}).failure == "");
    }
  }
  // Sizes of that order parse exactly.
  CHECK(io::parse_size("1000TB").bytes == 1'000'000'000'000'000);
  CHECK(io::parse_size("9223372036854775807").bytes == INT64_MAX);
  CHECK_THROWS_AS((void)io::parse_size("9223372036854775808"), invalid_argument);  // 2^63 does not fit
}

TEST_CASE("byte totals past 2^63 - 1 are refused, naming the tensor") {
  // Ten tensors of 10^18 bytes: 10^19 > 2^63 - 1 = 9.22 * 10^18.
  const graph g = long_chain(4, 1'000'000'000'000'000'000);
  CHECK_THROWS_WITH_AS(compile(g), "tensor 't9': the graph's bytes add up to more than 2^63 - 1", invalid_graph);
}

TEST_CASE("a time limit that has run out: every planner returns its best plan so far") {
  testing::graph_options o;
  o.shape = testing::graph_shape::inception;
  o.forward_ops = 40;
  const problem p = compile(testing::random_training_graph(o, 9));
  const device_spec& dev = find_device("titan-rtx");
  planner_options limited;
  limited.time_limit_s = 1e-9;
  int feasible = 0;
  for (const planner_entry& e : planners()) {
    CAPTURE(e.name);
    for (const double f : {0.5, 1.0}) {
      const bytes_t lo = testing::peak_lower_bound(p);
      const auto budget = lo + static_cast<bytes_t>(f * static_cast<double>(p.baseline_peak() - lo));
      const testing::planner_check c = testing::check_planner(e, p, dev, budget, limited);
      CHECK(c.failure == "");
      feasible += c.feasible ? 1 : 0;
    }
  }
  CHECK(feasible >= 1);  // at least `none` at the baseline peak
}
