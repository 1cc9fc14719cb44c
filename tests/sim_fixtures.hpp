#pragma once
// The tests' shared fixtures: tiny graphs and plans whose costs are worked
// by hand, the device they run on, and the validator check the planner
// tests make on every plan.
//
// Device: both host links at 0.001 GB/s and no latency, so a copy of N bytes
// takes exactly N µs (link_spec::transfer_us = 0 + N / (0.001 * 1e3)).
//
// The chain (steps and tensor indices):
//   step 0 f1: x(10 B)         -> a1(100 B)   100 µs
//   step 1 f2: a1              -> a2(100 B)   300 µs
//   step 2 f3: a2              -> a3(100 B)   300 µs
//   step 3 b3: a3, a2          -> g2(100 B)   300 µs
//   step 4 b2: g2, a1          -> g1(100 B)   100 µs
// Baseline: time 1100 µs; live bytes per step 110, 200, 300, 400, 300, so
// the baseline peak is 400 B (step b3: a1 + a2 + a3 + g2).

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "memplan/compile.hpp"
#include "memplan/cost/device.hpp"
#include "memplan/graph/graph.hpp"
#include "memplan/plan.hpp"
#include "memplan/plan_builder.hpp"
#include "memplan/problem.hpp"
#include "memplan/sim/simulator.hpp"
#include "memplan/sim/validator.hpp"

namespace memplan::test {

inline device_spec byte_per_us_device() {
  device_spec d;
  d.name = "byte-per-us";
  d.d2h = {0.001, 0.0};
  d.h2d = {0.001, 0.0};
  d.launch_overhead_us = 5.0;
  d.alignment = 1;  // every byte counts: hand-calculated budgets of tensors of a few hundred bytes
  d.allocator = byte_exact_allocator();  // the online policies' allocator, scaled to match
  return d;
}
/// The device of the hand-worked tests (1 B/µs links).
inline const device_spec dev = byte_per_us_device();
/// A budget that never binds.
inline constexpr bytes_t unlimited = simulator::unlimited;
/// Both of the simulator's records.
inline constexpr simulate_options record_all{.record_timeline = true, .record_memory = true};

/// Adds tensors and ops to a graph and compiles it in insertion order.
class graph_maker {
 public:
  index_t tensor(std::string name, bytes_t bytes, tensor_kind kind, std::vector<std::int64_t> shape = {}) {
    return g_.add_tensor({.name = std::move(name),
                          .bytes = bytes, .kind = kind, .shape = std::move(shape), .dtype = {}});
  }
  index_t op(std::string name, double time_us, std::vector<index_t> in, std::vector<index_t> out,
             bytes_t workspace = 0, phase ph = phase::forward) {
    return g_.add_op({.name = std::move(name), .type = "op",
                      .phase = ph, .time_us = time_us, .workspace_bytes = workspace, .inputs = std::move(in),
                      .outputs = std::move(out), .recomputable = ph == phase::forward, .split_dims = {0}});
  }
  [[nodiscard]] problem compile() const {
    schedule order(g_.num_ops());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<index_t>(i);
    return memplan::compile(g_, order);
  }

 private:
  graph g_{"test"};
};

namespace chain {
inline constexpr index_t x = 0, a1 = 1, a2 = 2, a3 = 3, g2 = 4, g1 = 5;
inline constexpr index_t f1 = 0, f2 = 1, f3 = 2, b3 = 3, b2 = 4;

/// `batch` > 0: x has shape {batch} (problem::batch), else no shape.
inline problem make(std::int64_t batch = 0) {
  graph_maker m;
  m.tensor("x", 10, tensor_kind::input, batch > 0 ? std::vector<std::int64_t>{batch} : std::vector<std::int64_t>{});
  m.tensor("a1", 100, tensor_kind::activation);
  m.tensor("a2", 100, tensor_kind::activation);
  m.tensor("a3", 100, tensor_kind::activation);
  m.tensor("g2", 100, tensor_kind::gradient);
  m.tensor("g1", 100, tensor_kind::gradient);
  m.op("f1", 100, {x}, {a1});
  m.op("f2", 300, {a1}, {a2});
  m.op("f3", 300, {a2}, {a3});
  m.op("b3", 300, {a3, a2}, {g2}, 0, phase::backward);
  m.op("b2", 100, {g2, a1}, {g1}, 0, phase::backward);
  return m.compile();
}

/// Swaps a1 out after f2 and back in, the swap-in triggered by the end of
/// `trigger` (f3: in time for b2; b3: late). Actions: 0 f1, 1 f2,
/// 2 swap_out a1, 3 f3, 4 b3, 5 swap_in a1, 6 b2.
inline plan swap_a1(const problem& p, index_t trigger, bytes_t budget) {
  plan_builder b(p, "swap-a1", budget);
  b.compute(f1);
  b.compute(f2);
  b.swap_out(a1);
  const index_t after[] = {b.compute(f3), b.compute(b3)};
  b.swap_in(a1, std::span(after + (trigger == f3 ? 0 : 1), 1));
  b.compute(b2);
  return std::move(b).finish();
}

/// Frees a1 after f2 and, if `recompute`, recomputes f1 before b2.
inline plan free_a1(const problem& p, bytes_t budget, bool recompute) {
  plan_builder b(p, recompute ? "recompute-a1" : "read-after-free", budget);
  b.compute(f1);
  b.compute(f2);
  b.free(a1);
  b.compute(f3);
  b.compute(b3);
  if (recompute) b.recompute(f1);
  b.compute(b2);
  return std::move(b).finish();
}

/// Actions: 0 f1, 1 f2, 2 free a1, 3 f3, 4 b3, 5 recompute f1, 6 b2.
inline plan recompute_a1(const problem& p, bytes_t budget) { return free_a1(p, budget, true); }

/// An invalid plan: b2 (action 5) reads a1 after action 2 freed it.
inline plan read_after_free(const problem& p, bytes_t budget) { return free_a1(p, budget, false); }

/// f2 split in `parts`: one action (action 1), or micro-ops 0 .. parts-1 (actions 1 ..).
inline plan split_f2(const problem& p, index_t parts, bool micro_ops) {
  plan_builder b(p, "split-f2", 400);
  b.compute(f1);
  if (!micro_ops) b.compute(f2, parts);
  for (index_t k = 0; micro_ops && k < parts; ++k) b.compute(f2, parts, k);
  for (const index_t s : {f3, b3, b2}) b.compute(s);
  return std::move(b).finish();
}
}  // namespace chain

/// `p` with step s's split dimensions replaced by `dims`.
inline problem with_split_dims(problem p, index_t s, const std::vector<int>& dims) {
  std::vector<int> list;
  std::vector<index_t> begin{0};
  for (index_t k = 0; k < static_cast<index_t>(p.num_steps()); ++k) {
    const auto own = p.split_dims(k);
    if (k == s) list.insert(list.end(), dims.begin(), dims.end());
    else list.insert(list.end(), own.begin(), own.end());
    begin.push_back(static_cast<index_t>(list.size()));
  }
  p.split_dim_list = std::move(list);
  p.split_begin = std::move(begin);
  return p;
}

/// A wait removed from action `a`: the `k`-th of its list.
inline void drop_wait(plan& pl, index_t a, std::size_t k) {
  const auto first = static_cast<std::size_t>(pl.wait_begin[static_cast<std::size_t>(a)]);
  pl.waits.erase(pl.waits.begin() + static_cast<std::ptrdiff_t>(first + k));
  for (std::size_t i = static_cast<std::size_t>(a) + 1; i < pl.wait_begin.size(); ++i) --pl.wait_begin[i];
}

// One training step of one layer with SGD and momentum (steps in order):
//   step 0 f (100 µs):          x(10 input), w(50 parameter) -> y(100)
//   step 1 b (100 µs, backward): y, w -> gw(50 parameter_gradient)
//   step 2 u (20 µs, update):    w, gw, m(50 optimizer_state); writes w and m in place
// Baseline: time 220 µs; live bytes per step 210, 250 (w + m + y + gw), 150: peak 250 B.
namespace sgd {
inline constexpr index_t x = 0, w = 1, m = 2, y = 3, gw = 4;
inline constexpr index_t f = 0, b = 1, u = 2;

inline problem make() {
  graph_maker mk;
  mk.tensor("x", 10, tensor_kind::input);
  mk.tensor("w", 50, tensor_kind::parameter);
  mk.tensor("m", 50, tensor_kind::optimizer_state);
  mk.tensor("y", 100, tensor_kind::activation);
  mk.tensor("gw", 50, tensor_kind::parameter_gradient);
  mk.op("f", 100, {x, w}, {y});
  mk.op("b", 100, {y, w}, {gw}, 0, phase::backward);
  mk.op("u", 20, {w, gw, m}, {}, 0, phase::update);
  return mk.compile();
}
}  // namespace sgd

// A residual block with parameters and workspace (steps in order):
//   step 0 conv1: x(50), w1(20 param)  -> a(100)    100 µs, workspace 30
//   step 1 conv2: a, w2(20 param)      -> b(200)    200 µs, workspace 60
//   step 2 relu:  b                    -> c(100)     50 µs
//   step 3 add:   a, c                 -> d(100)     20 µs
//   step 4 loss:  d                    -> gd(100)    10 µs
//   step 5 bwd:   gd, b, w2            -> gw2(20 parameter_gradient) 200 µs, workspace 40
// Live bytes per step (w1 + w2 = 40 always):
//   0: x 50 + 40 + a 100 + ws 30             = 220
//   1: 40 + a 100 + b 200 + ws 60            = 400
//   2: 40 + a + b + c 100                    = 440
//   3: 40 + a + b + c + d 100                = 540   <- baseline peak
//   4: 40 + b + d + gd 100                   = 440
//   5: 40 + b + gd + gw2 20 + ws 40          = 400
// Baseline time 100 + 200 + 50 + 20 + 10 + 200 = 580 µs.
namespace residual {
inline constexpr index_t x = 0, w1 = 1, w2 = 2, a = 3, b = 4, c = 5, d = 6, gd = 7, gw2 = 8;

inline problem make() {
  graph_maker m;
  m.tensor("x", 50, tensor_kind::input);
  m.tensor("w1", 20, tensor_kind::parameter);
  m.tensor("w2", 20, tensor_kind::parameter);
  m.tensor("a", 100, tensor_kind::activation);
  m.tensor("b", 200, tensor_kind::activation);
  m.tensor("c", 100, tensor_kind::activation);
  m.tensor("d", 100, tensor_kind::activation);
  m.tensor("gd", 100, tensor_kind::gradient);
  m.tensor("gw2", 20, tensor_kind::parameter_gradient);
  m.op("conv1", 100, {x, w1}, {a}, 30);
  m.op("conv2", 200, {a, w2}, {b}, 60);
  m.op("relu", 50, {b}, {c});
  m.op("add", 20, {a, c}, {d});
  m.op("loss", 10, {d}, {gd}, 0, phase::backward);
  m.op("bwd", 200, {gd, b, w2}, {gw2}, 40, phase::backward);
  return m.compile();
}
}  // namespace residual

// Three layers, every op 100 µs, backward in reverse (steps in order):
//   0 f1: x(100 input) -> a1(200)    3 b3: a3     -> g3(100)
//   1 f2: a1 -> a2(200)              4 b2: g3, a2 -> g2(100)
//   2 f3: a2 -> a3(100)              5 b1: g2, a1 -> g1(100)
//                                    6 b0: g1, x  -> g0(100)
// Baseline: 700 µs; live bytes per step 300, 500, 600, 700, 700, 500, 300.
// `b1_reads_a1` false: b1 reads g2 alone (a ReLU's backward reads its
// output), so a1 dies after f2: 300, 500, 400, 500, 500, 300, 300.
inline problem three_layers(bool b1_reads_a1 = true) {
  graph_maker m;
  const index_t x = m.tensor("x", 100, tensor_kind::input);
  const index_t a1 = m.tensor("a1", 200, tensor_kind::activation);
  const index_t a2 = m.tensor("a2", 200, tensor_kind::activation);
  const index_t a3 = m.tensor("a3", 100, tensor_kind::activation);
  const index_t g3 = m.tensor("g3", 100, tensor_kind::gradient);
  const index_t g2 = m.tensor("g2", 100, tensor_kind::gradient);
  const index_t g1 = m.tensor("g1", 100, tensor_kind::gradient);
  const index_t g0 = m.tensor("g0", 100, tensor_kind::gradient);
  m.op("f1", 100, {x}, {a1});
  m.op("f2", 100, {a1}, {a2});
  m.op("f3", 100, {a2}, {a3});
  m.op("b3", 100, {a3}, {g3}, 0, phase::backward);
  m.op("b2", 100, {g3, a2}, {g2}, 0, phase::backward);
  m.op("b1", 100, b1_reads_a1 ? std::vector<index_t>{g2, a1} : std::vector<index_t>{g2}, {g1}, 0, phase::backward);
  m.op("b0", 100, {g1, x}, {g0}, 0, phase::backward);
  return m.compile();
}

/// Plans that break one rule of DESIGN.md §5 each, which timing alone does
/// not show (issue 22): the simulator and the validator both reject them as
/// invalid plans, naming the action, op or tensor (test_sim.cpp,
/// test_validator.cpp). Each is valid but for the rule it breaks.
namespace broken {

/// sgd: w saved before its update, swapped in, updated, freed and brought
/// back from the stale host copy: the update is lost at the free (action 5).
/// Actions: 0 f, 1 b, 2 swap_out w, 3 swap_in w, 4 u, 5 free w, 6 swap_in w.
inline plan update_lost(const problem& p) {
  plan_builder b(p, "update-lost", 1000);
  b.compute(sgd::f);
  b.compute(sgd::b);
  b.swap_out(sgd::w);
  b.swap_in(sgd::w);
  b.compute(sgd::u);
  b.free(sgd::w);
  b.swap_in(sgd::w);
  return std::move(b).finish();
}

/// sgd: w swapped out after its update (and back in), the swap_out not
/// waiting on u, which writes w in place: the saved copy may miss the
/// update. Actions: 0 f, 1 b, 2 u, 3 swap_out w (waits on nothing), 4 swap_in w.
inline plan update_raced(const problem& p) {
  plan_builder b(p, "update-raced", 1000);
  b.compute(sgd::f);
  b.compute(sgd::b);
  b.compute(sgd::u);
  b.swap_out(sgd::w);
  b.swap_in(sgd::w);
  plan pl = std::move(b).finish();
  drop_wait(pl, 3, 0);  // on u
  return pl;
}

/// residual: w1 freed after its only use, with no host copy (action 1).
inline plan parameter_lost(const problem& p) {
  plan_builder b(p, "parameter-lost", 1000);
  b.compute(0);
  b.free(residual::w1);
  for (index_t s = 1; s < 6; ++s) b.compute(s);
  return std::move(b).finish();
}

/// residual: w1 swapped out after its only use and never brought back,
/// though offloaded_state does not list it.
inline plan state_left_off_device(const problem& p) {
  plan_builder b(p, "state-off-device", 1000);
  b.compute(0);
  b.swap_out(residual::w1);
  for (index_t s = 1; s < 6; ++s) b.compute(s);
  return std::move(b).finish();
}

/// chain: b2 (action 6) reads a1 without waiting for its swap-in (action 5,
/// [700, 800]); b2 starts at 1000, so the timing covers the missing wait.
inline plan read_unordered(const problem& p) {
  plan pl = chain::swap_a1(p, chain::f3, 1000);
  drop_wait(pl, 6, 0);
  return pl;
}

/// chain: the swap-in of a1 (action 5) waits on f3 (ending at 700) but not
/// on the swap-out it undoes (action 2, [400, 500]).
inline plan swap_in_unordered(const problem& p) {
  plan pl = chain::swap_a1(p, chain::f3, 1000);
  drop_wait(pl, 5, 1);
  return pl;
}

/// chain: a1 swapped out and in (actions 2, 3, [100, 200] and [200, 300]),
/// then split in place by the swap-out of its micro-tensor 0 (action 6, at
/// 1000), which waits on b3 but not on the swap-in holding the whole a1.
/// Actions: 0 f1, 1 f2, 2 swap_out a1, 3 swap_in a1, 4 f3, 5 b3,
/// 6 swap_out a1 0/2, 7 swap_in a1 0/2, 8 b2.
inline plan split_unordered(const problem& p) {
  plan_builder b(p, "split-unordered", 1000);
  b.compute(chain::f1);
  b.compute(chain::f2);
  b.swap_out(chain::a1);
  b.swap_in(chain::a1);
  b.compute(chain::f3);
  b.compute(chain::b3);
  b.swap_out(chain::a1, 2, 0);
  b.swap_in(chain::a1, 2, 0);
  b.compute(chain::b2);
  plan pl = std::move(b).finish();
  REQUIRE(pl.waits_of(6).size() == 2);
  REQUIRE(pl.waits_of(6)[0] == 3);
  drop_wait(pl, 6, 0);
  return pl;
}

/// sgd with u marked recomputable: u run again (action 3) applies the update twice.
inline plan update_recomputed(const problem& p) {
  plan_builder b(p, "update-recomputed", 1000);
  for (const index_t s : {sgd::f, sgd::b, sgd::u}) b.compute(s);
  b.recompute(sgd::u);
  return std::move(b).finish();
}

}  // namespace broken

/// The validator accepts `pl` on `d` under `budget`; a failure names the
/// problem, the budget and the validator's first error.
inline void check_valid(const problem& p, const plan& pl, const device_spec& d, bytes_t budget) {
  const validation v = validate(p, pl, d, budget);
  INFO(p.name, " at ", budget, ": ", v.errors.empty() ? std::string() : v.errors.front());
  CHECK(v.ok);
}

/// The validator accepts `pl` under its budget, or, when infeasible, under
/// the smallest peak it reports; the simulator agrees on feasibility, and,
/// where it fits, on the peak and the time.
inline void check_valid(const problem& p, const plan& pl, const device_spec& d) {
  const validation v = validate(p, pl, d, pl.feasible ? pl.budget : pl.best_peak);
  for (const auto& e : v.errors) MESSAGE(e);
  CHECK(v.ok);
  const report r = simulate(p, pl, d, pl.budget);
  CHECK(r.feasible == pl.feasible);
  if (pl.feasible) {
    CHECK(v.peak_bytes == r.peak_bytes);
    CHECK(v.time_us == doctest::Approx(r.time_us));
    CHECK(r.peak_bytes <= pl.budget);
  }
}

}  // namespace memplan::test
