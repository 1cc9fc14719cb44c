// Tests of runtime::executor on host::device: every registered planner's
// plans, at several budgets, compute bit for bit what the unplanned
// reference computes, inside an arena no larger than the budget; faults
// name the failed action and give every byte back.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "executor_checks.hpp"
#include "float_net.hpp"
#include "memplan/plan_builder.hpp"
#include "memplan/cost/devices.hpp"
#include "memplan/host/device.hpp"
#include "memplan/planners/registry.hpp"
#include "memplan/runtime/executor.hpp"
#include "memplan/sim/simulator.hpp"
#include "memplan/testing/generators.hpp"
#include "memplan/testing/integrity.hpp"
#include "memplan/sim/validator.hpp"
#include "sim_fixtures.hpp"

namespace {

using namespace memplan;
using runtime::executor;
using runtime::op_call;

/// Loads a tensor without a producer from the workload's reference values.
auto loader(const example::float_workload& w) {
  return [&w](index_t t, void* address, host::stream_view) {
    const auto& v = w.values[static_cast<std::size_t>(t)];
    std::memcpy(address, v.data(), v.size() * sizeof(float));
  };
}

/// The host backend of the shared integrity check (executor_checks.hpp).
struct host_backend {
  using device = host::device;
  static std::unique_ptr<device> make(bytes_t arena, bytes_t pinned) {
    return std::make_unique<device>(host::device_options{.arena_bytes = arena, .pinned_bytes = pinned, .before_copy = {}});
  }
  static auto op(const example::float_workload& w, test::integrity& check) {
    return [&w, &check](const op_call& call, host::stream_view) { check.check(w, call); };
  }
  static auto load(const example::float_workload& w) { return loader(w); }
};

runtime::run_stats run_checked(const example::float_workload& w, const plan& pl, bytes_t budget) {
  host_backend backend;
  return test::run_checked(backend, w, pl, budget);
}

auto checked_op(const example::float_workload& w, test::integrity& check) { return host_backend::op(w, check); }

/// The verdict carried by the memplan::error `f` throws, caught as the base
/// class as a caller that switches on it would.
template <class F>
failure_kind thrown_kind(F&& f) {
  try {
    f();
  } catch (const error& e) {
    return e.kind();
  }
  FAIL("nothing was thrown");
  return failure_kind::none;
}

}  // namespace

TEST_CASE("the workload's reference: a hand-checked matmul and the chain's shape") {
  // One layer, batch 8, width 32: 8 ops (matmul, relu, loss, relu_grad,
  // matmul_grad_w, matmul_grad_x, sgd) = 7, tensors x, target, w1, z1, r1,
  // g_out, gz1, gw1, gh0, w1_new = 10.
  const auto w = example::make_float_workload(1, false);
  CHECK(w.p.num_steps() == 7);
  CHECK(w.p.num_tensors() == 10);
  CHECK(w.p.bytes[0] == 8 * 32 * 4);
  CHECK(w.p.bytes[2] == 32 * 32 * 4);
  // z1[0][0] = sum_j x[0][j] * w1[j][0], summed in the same order.
  float z = 0;
  for (int j = 0; j < 32; ++j) z += w.values[0][static_cast<std::size_t>(j)] * w.values[2][static_cast<std::size_t>(j) * 32];
  CHECK(w.values[3][0] == z);
  CHECK(w.values[4][0] == std::max(z, 0.0f));
}

TEST_CASE("executor on a hand plan: swap and recompute give the reference numbers; peak by hand") {
  // Two-layer chain. Every tensor is a multiple of 256 B, so arena
  // footprints equal bytes.
  const auto w = example::make_float_workload(2, false);
  const problem& p = w.p;
  // Steps: 0 matmul1 1 relu1 2 matmul2 3 relu2 4 loss 5 relu_grad2
  // 6 matmul_grad_w2 7 matmul_grad_x2 8 relu_grad1 9 matmul_grad_w1
  // 10 matmul_grad_x1 11 sgd1 12 sgd2.
  REQUIRE(p.num_steps() == 13);
  const index_t z1 = 3, r1 = 4;
  REQUIRE(p.tensor_name[z1] == "z1");
  REQUIRE(p.tensor_name[r1] == "r1");
  plan_builder b(p, "hand", 1 << 20);
  b.compute(0);
  b.compute(1);
  b.compute(2);
  b.swap_out(r1);       // r1 (1 KiB) leaves after matmul2 read it ...
  b.free(z1);           // z1 is dropped and recomputed
  for (index_t s = 3; s <= 5; ++s) b.compute(s);
  b.swap_in(r1);        // ... and comes back for relu_grad1 / matmul_grad_w2
  b.compute(6);
  b.compute(7);
  b.compute(8);
  b.compute(9);
  b.compute(10);
  b.compute(11);
  b.compute(12);
  const plan pl = std::move(b).finish();
  CHECK(validate(p, pl, memplan::test::byte_per_us_device(), 1 << 20).ok);
  const auto stats = run_checked(w, pl, 1 << 20);
  CHECK(stats.swapped_out_bytes == 1024);
  CHECK(stats.swapped_in_bytes == 1024);
  CHECK(stats.ops_run == 13);

  plan_builder r(p, "recompute", 1 << 20);
  r.compute(0);
  r.compute(1);
  r.compute(2);
  r.free(r1);
  for (index_t s = 3; s <= 5; ++s) r.compute(s);
  r.recompute(1);  // relu1 again: z1 is still there, this being its last reader
  for (index_t s = 6; s <= 12; ++s) r.compute(s);
  const plan rp = std::move(r).finish();
  CHECK(validate(p, rp, memplan::test::byte_per_us_device(), 1 << 20).ok);
  const auto rs = run_checked(w, rp, 1 << 20);
  CHECK(rs.ops_run == 14);
  CHECK(rs.swapped_out_bytes == 0);
}

TEST_CASE("executor: offloaded state is loaded into pinned memory, swapped in, and kept there after the run") {
  // The two-layer chain with w1 and w2 (32 x 32 floats, 4 KiB each) in host
  // memory between iterations: each is swapped in before its matmul and
  // out after its sgd (which reads it), so the run moves 8 KiB each way
  // and never holds both weights on the device before matmul2; after the
  // run both are read back from their host copies, unchanged.
  const auto w = example::make_float_workload(2, false);
  const problem& p = w.p;
  const index_t w1 = 2, w2 = 5;
  REQUIRE(p.tensor_name[w1] == "w1");
  REQUIRE(p.tensor_name[w2] == "w2");
  plan_builder b(p, "hand", 1 << 20);
  b.offload(w1);
  b.offload(w2);
  b.swap_in(w1);
  b.compute(0);
  b.compute(1);
  b.swap_in(w2);
  for (index_t s = 2; s <= 11; ++s) b.compute(s);
  b.swap_out(w1);  // after sgd1 (step 11)
  b.compute(12);
  b.swap_out(w2);
  const plan pl = std::move(b).finish();
  const validation v = validate(p, pl, memplan::test::byte_per_us_device(), 1 << 20);
  CHECK_MESSAGE(v.ok, (v.errors.empty() ? std::string() : v.errors.front()));
  const bytes_t pinned = runtime::pinned_bytes(p, pl);
  CHECK(pinned == 2 * 4096);  // the loaded copies, then the saved ones
  const auto dev = host_backend::make(1 << 20, pinned);
  runtime::executor<host::device> ex(*dev, p, pl);
  test::integrity check(pl.actions.size());
  const runtime::run_stats stats = ex.run(host_backend::op(w, check), host_backend::load(w));
  CHECK(check.total() == 0);
  CHECK(stats.ops_run == 13);
  CHECK(stats.swapped_in_bytes == 8192);
  CHECK(stats.swapped_out_bytes == 8192);
  for (const index_t t : {w1, w2}) {
    std::vector<float> out(w.values[static_cast<std::size_t>(t)].size());
    ex.read(t, std::as_writable_bytes(std::span(out)));
    CHECK(out == w.values[static_cast<std::size_t>(t)]);
  }
  ex.release();
  CHECK(dev->pinned().in_use() == 0);
  plan unordered = pl;
  unordered.offloaded_state = {w2, w1};
  CHECK_THROWS_WITH_AS(static_cast<void>(runtime::layout_of(p, unordered)),
                       doctest::Contains("offloaded_state must list tensors in increasing order"), invalid_argument);
  plan made = pl;
  made.offloaded_state = {w1, w2, 4};  // r1, an activation
  CHECK_THROWS_AS(static_cast<void>(runtime::layout_of(p, made)), invalid_argument);
}

TEST_CASE("executor: split ops get parts and one part's workspace; a recompute leaves resident outputs alone") {
  const auto w = example::make_float_workload(2, false);
  const problem& p = w.p;
  plan_builder b(p, "parts", 1 << 20);
  b.compute(0, 4);    // matmul1 in 4 row blocks: 512 B workspace -> 128 B per part
  b.recompute(0);     // z1 is still on the device: nothing to write
  b.compute(1, 3);    // relu1 in 3 row blocks (8 rows: 2, 3, 3), no workspace
  for (index_t s = 2; s < static_cast<index_t>(p.num_steps()); ++s) b.compute(s, s % 2 == 0 ? 2 : 1);
  const plan pl = std::move(b).finish();
  REQUIRE(validate(p, pl, test::byte_per_us_device(), 1 << 20).ok);
  host::device dev({.arena_bytes = 1 << 20, .pinned_bytes = 0, .before_copy = {}});
  executor<host::device> ex(dev, p, pl);
  test::integrity check(pl.actions.size());
  std::vector<op_call> seen(pl.actions.size());
  (void)ex.run(
      [&](const op_call& call, host::stream_view) {
        seen[static_cast<std::size_t>(call.action)] = call;
        check.check(w, call);
      },
      loader(w));
  CHECK(check.total() == 0);
  CHECK(seen[0].parts == 4);
  CHECK(seen[0].workspace_bytes == 128);
  CHECK(seen[0].outputs[0] != nullptr);
  CHECK(seen[1].recompute);
  CHECK(seen[1].outputs[0] == nullptr);
  CHECK(seen[2].parts == 3);
  CHECK(seen[2].workspace == nullptr);
  CHECK(seen[3].workspace_bytes == 256);  // matmul2, 2 parts
}

namespace {

/// A hand plan of micro-ops on the two-layer chain (batch 8, width 32: each
/// sample tensor is 8 rows of 128 B) that takes every path of plan.hpp's
/// micro-tensor contract: micro-ops reading views of whole tensors and
/// making micro-tensors, micro frees and swaps, a whole op reading a tensor
/// held as micro-tensors (merge), an in-place split, micro swap-ins from a
/// whole host copy, micro-ops of 2 reading micro-tensors of 4, and a weight
/// gradient summed by micro-ops.
plan micro_plan(const problem& p, bytes_t budget) {
  const auto tensor = [&](std::string_view name) {
    return static_cast<index_t>(std::ranges::find(p.tensor_name, name) - p.tensor_name.begin());
  };
  const index_t x = tensor("x"), z1 = tensor("z1"), r1 = tensor("r1"), r2 = tensor("r2");
  plan_builder b(p, "micro", budget);
  b.compute(0, 2, 0);  // matmul1: x whole, read as views of rows 0-3 and 4-7; z1 as 2 micro-tensors
  b.compute(0, 2, 1);
  b.compute(1, 2, 0);  // relu1 on z1's micro-tensor 0, which then goes
  b.free(z1, 2, 0);
  b.compute(1, 2, 1);
  b.free(z1, 2, 1);
  b.compute(2);                  // matmul2 reads r1 whole from its 2 micro-tensors: a merge
  b.swap_out(r1, 2, 0);          // r1 leaves micro-tensor by micro-tensor
  b.swap_out(r1, 2, 1);
  b.swap_out(x, 2, 1);           // x (whole) is split in place; its second half leaves
  b.compute(3);                  // relu2
  b.compute(4);                  // loss reads r2 whole
  b.swap_out(r2);                // r2 leaves whole ...
  for (index_t k = 0; k < 4; ++k) {
    b.swap_in(r2, 4, k);         // ... and comes back as 4 micro-tensors from the whole host copy
    b.compute(5, 4, k);          // relu_grad2: g_out (whole) viewed, gz2 made as 4 micro-tensors
  }
  b.swap_in(r1, 2, 0);
  b.swap_in(r1, 2, 1);
  b.compute(6, 2, 0);  // matmul_grad_w2 in 2 micro-ops: gz2's micro-tensors 0-1, then 2-3; gw2 summed
  b.compute(6, 2, 1);
  b.compute(7);        // matmul_grad_x2 reads gz2 whole: 4 pieces
  b.compute(8);        // relu_grad1 reads r1 whole: 2 pieces
  b.swap_in(x, 2, 1);
  b.compute(9, 2, 0);  // matmul_grad_w1 on x's micro-tensors: the half split in place, the half swapped back
  b.compute(9, 2, 1);
  for (index_t s = 10; s < static_cast<index_t>(p.num_steps()); ++s) b.compute(s);
  return std::move(b).finish();
}

index_t micro_actions(const plan& pl) {
  return static_cast<index_t>(std::ranges::count_if(pl.actions, [](const action& a) { return a.part != no_index; }));
}

}  // namespace

TEST_CASE("executor: micro-ops, micro-tensors, in-place split and merge give the reference numbers within budget") {
  const auto w = example::make_float_workload(2, false);
  const problem& p = w.p;
  REQUIRE(p.num_steps() == 13);
  REQUIRE(p.bytes[0] == 1024);
  const plan loose = micro_plan(p, 1 << 20);
  const validation v = validate(p, loose, test::byte_per_us_device(), 1 << 20);
  REQUIRE_MESSAGE(v.ok, (v.errors.empty() ? std::string() : v.errors.front()));
  const report r = simulator().run(p, loose, test::byte_per_us_device(), 1 << 20);
  REQUIRE(r.feasible);
  // The budget is the simulated peak itself: the arena must hold the plan in
  // exactly the bytes the simulator counts (every block here is a multiple
  // of 64 B, so micro-tensors' rounding adds nothing).
  const bytes_t budget = r.peak_bytes;
  const plan pl = micro_plan(p, budget);
  REQUIRE(validate(p, pl, test::byte_per_us_device(), budget).ok);
  // 2 + 2 + 4 + 2 + 2 micro-ops, 2 micro frees, 3 micro swap-outs, 7 micro swap-ins.
  CHECK(micro_actions(pl) == 24);
  const auto stats = run_checked(w, pl, budget);
  MESSAGE("micro plan: ", stats.micro_actions, " micro actions, ", stats.splits_in_place, " in-place split, ",
          stats.compactions, " compactions; arena peak ", stats.arena_peak_bytes, " B, plan-counted peak ",
          stats.peak_bytes, " B, budget (simulated peak) ", budget, " B, unplanned peak ", p.baseline_peak(), " B");
  CHECK(stats.micro_actions == 24);
  CHECK(stats.splits_in_place == 1);
  CHECK(stats.ops_run == 20);  // 13 steps, 5 of them as 12 micro-ops
  // Swapped: r1 as 2 x 512 B, x's second half 512 B, r2 whole 1024 B; back:
  // r2 as 4 x 256 B, r1 as 2 x 512 B, x's half 512 B.
  CHECK(stats.swapped_out_bytes == 2560);
  CHECK(stats.swapped_in_bytes == 2560);
  CHECK(budget == 20480);  // the parameters' update at the end: w1, w2, gw1, gw2, w1_new (4 KiB each)
  CHECK(stats.arena_peak_bytes <= budget);
  CHECK(stats.peak_bytes <= budget);
}

TEST_CASE("executor: every registered planner, several budgets, chain and residual: bit-identical, within budget") {
  host_backend backend;
  test::check_every_planner(backend);
}

TEST_CASE("executor: tsplit's micro-op plans on generated graphs read what the unplanned run reads") {
  // Tensor sizes from 1 B to 100 kB or 256 B to 1 MiB: micro-tensors of any
  // byte count, splits in place at unaligned offsets. The digest check
  // (testing/integrity.hpp) runs every plan on host::device.
  const device_spec dev = find_device("titan-rtx");
  int micro_plans = 0, failed = 0;
  index_t micro = 0;
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    testing::graph_options o;
    o.shape = static_cast<testing::graph_shape>(seed % testing::graph_shape_names.size());
    o.forward_ops = static_cast<int>(4 + seed % 40);
    o.min_bytes = seed % 2 != 0 ? 1 : 256;
    o.max_bytes = seed % 2 != 0 ? 100'000 : bytes_t{1} << 20;
    const problem p = compile(testing::random_training_graph(o, seed));
    for (const double fraction : {0.9, 0.75, 0.6, 0.5}) {
      const auto budget = static_cast<bytes_t>(static_cast<double>(p.baseline_peak()) * fraction);
      const plan pl = find_planner("tsplit").run(p, dev, budget, planner_options{});
      const auto m = micro_actions(pl);
      if (!pl.feasible || m == 0) continue;
      CAPTURE(seed);
      CAPTURE(budget);
      REQUIRE(validate(p, pl, dev, budget).ok);
      const testing::integrity_check run = testing::check_integrity(p, pl, budget, &dev);
      CHECK(run.ran);
      CHECK_MESSAGE(run.failure.empty(), run.failure);
      ++micro_plans;
      micro += m;
      failed += run.failure.empty() ? 0 : 1;
    }
  }
  MESSAGE(micro_plans, " tsplit plans with ", micro, " micro-op and micro-tensor actions ran; ", failed, " failed");
  CHECK(micro_plans >= 10);
}

TEST_CASE("executor: an allocation waiting for a later action's release on another stream issues it ahead") {
  // s (1 KiB) goes out over a 1 B/us link while a and b make w and v; s
  // comes back after b, when u — listed after the swap-in — has read w, its
  // last reader, and freed it. Budget 2 KiB: w, v and s never at once. In
  // list order the swap-in is issued before u, with 2 KiB in use and
  // nothing pending: the executor issues u (compute stream, nothing to
  // allocate) ahead, waits for w's release, and goes on.
  test::graph_maker m;
  const index_t s_ = m.tensor("s", 1024, tensor_kind::activation);
  const index_t w_ = m.tensor("w", 1024, tensor_kind::activation);
  const index_t v_ = m.tensor("v", 1024, tensor_kind::activation);
  const index_t z_ = m.tensor("z", 0, tensor_kind::activation);
  m.op("p", 1, {}, {s_});
  m.op("a", 1, {}, {w_});
  m.op("b", 1, {}, {v_});
  m.op("u", 1, {w_}, {});
  m.op("g", 1, {s_, v_}, {z_});
  const problem p = m.compile();
  const device_spec spec = test::byte_per_us_device();
  plan_builder b(p, "ahead", 2048);
  b.compute(0);
  b.swap_out(s_);
  b.compute(1);
  const index_t made_v = b.compute(2);
  const index_t after_b[] = {made_v};
  b.swap_in(s_, after_b);
  b.compute(3);
  b.compute(4);
  const plan pl = std::move(b).finish();
  REQUIRE(validate(p, pl, spec, 2048).ok);
  REQUIRE(simulator().run(p, pl, spec, 2048).feasible);
  host::device dev({.arena_bytes = 2048, .pinned_bytes = runtime::layout_of(p, pl).pinned_peak, .before_copy = {}});
  executor<host::device> ex(dev, p, pl);  // list order
  const auto stats = ex.run([](const op_call&, host::stream_view) {}, [](index_t, void*, host::stream_view) {});
  CHECK(stats.issued_ahead == 1);
  CHECK(stats.peak_bytes == 2048);
  CHECK(stats.arena_peak_bytes == 2048);
  ex.release();
  CHECK(dev.arena().in_use() == 0);
  // Issued in the simulator's start order, u comes before the swap-in anyway.
  executor<host::device> in_start_order(dev, p, pl, spec);
  CHECK(in_start_order.run([](const op_call&, host::stream_view) {}, [](index_t, void*, host::stream_view) {})
            .issued_ahead == 0);
}

TEST_CASE("executor: allocations in the simulator's start order, not the list's: a queued swap-in allocates late") {
  // s1 and s2 (1 KiB each) are swapped out and back; their swap-ins wait
  // for x, and s2's also for the h2d stream: s1 takes 1024 us on a link of
  // 1 B/us. y (1 KiB) is made by a 1 us op that starts with s1's swap-in and
  // frees t (its input) long before s2's swap-in starts. Budget 3 KiB: t,
  // s1, y at once, then s1, y, s2 — but never t, s1, s2 and y. Allocating
  // s2 when it is issued (before y) would need 4 KiB.
  test::graph_maker m;
  const index_t s1 = m.tensor("s1", 1024, tensor_kind::activation);
  const index_t s2 = m.tensor("s2", 1024, tensor_kind::activation);
  const index_t t = m.tensor("t", 1024, tensor_kind::activation);
  const index_t y = m.tensor("y", 1024, tensor_kind::activation);
  const index_t z = m.tensor("z", 0, tensor_kind::activation);
  m.op("p", 1, {}, {s1, s2});
  m.op("x", 1, {}, {t});
  m.op("f", 1, {t}, {y});
  m.op("g", 1, {s1, s2, y}, {z});
  const problem p = m.compile();
  device_spec spec = test::byte_per_us_device();
  spec.d2h = {1.0, 0.0};  // 1 GB/s out, 1 B/us back in
  spec.launch_overhead_us = 0;
  plan_builder b(p, "queued", 3072);
  b.compute(0);
  b.swap_out(s1);
  b.swap_out(s2);
  const index_t x = b.compute(1);
  const index_t after_x[] = {x};
  b.swap_in(s1, after_x);
  b.swap_in(s2, after_x);
  b.compute(2);
  b.compute(3);
  const plan pl = std::move(b).finish();
  REQUIRE(validate(p, pl, spec, 3072).ok);
  const report r = simulator().run(p, pl, spec, 3072);
  REQUIRE(r.feasible);
  CHECK(r.peak_bytes == 3072);
  const bytes_t pinned = runtime::layout_of(p, pl).pinned_peak;
  const auto run_op = [](const op_call& call, host::stream_view) {
    for (void* out : call.outputs) {
      if (out != nullptr) std::memset(out, static_cast<int>(call.step) + 1, 1024);
    }
  };
  const auto no_load = [](index_t, void*, host::stream_view) {};
  {
    // In list order the executor cannot know that y comes first.
    host::device dev({.arena_bytes = 3072, .pinned_bytes = pinned, .before_copy = {}});
    executor<host::device> ex(dev, p, pl);
    CHECK_THROWS_WITH_AS((void)ex.run(run_op, no_load),
                         doctest::Contains("out of device memory at action 6 (compute 'f')"), infeasible_budget);
    CHECK(thrown_kind([&] { (void)ex.run(run_op, no_load); }) == failure_kind::out_of_memory);
    CHECK(dev.arena().in_use() == 0);
  }
  host::device dev({.arena_bytes = 3072, .pinned_bytes = pinned, .before_copy = {}});
  executor<host::device> ex(dev, p, pl, spec);  // issues as the simulator starts: x, s1's swap-in, f, s2's
  const auto stats = ex.run(run_op, no_load);
  CHECK(stats.peak_bytes == 3072);
  CHECK(stats.arena_peak_bytes == 3072);
  CHECK(stats.swapped_in_bytes == 2048);
  ex.release();
  CHECK(dev.arena().in_use() == 0);
  (void)z;
}

TEST_CASE("executor: holes that only moving blocks can close are compacted, and the numbers survive") {
  // a, b, c, d (256 B each) fill a 1 KiB arena in that order; f5 reads a and
  // c, which then go, leaving holes at 0 and 512; e (512 B, read of b and d)
  // fits only once b and d move down to 0 and 256.
  test::graph_maker m;
  const index_t a = m.tensor("a", 256, tensor_kind::activation);
  const index_t b = m.tensor("b", 256, tensor_kind::activation);
  const index_t c = m.tensor("c", 256, tensor_kind::activation);
  const index_t d = m.tensor("d", 256, tensor_kind::activation);
  const index_t g = m.tensor("g", 0, tensor_kind::activation);
  const index_t e = m.tensor("e", 512, tensor_kind::activation);
  m.op("fa", 1, {}, {a});
  m.op("fb", 1, {}, {b});
  m.op("fc", 1, {}, {c});
  m.op("fd", 1, {}, {d});
  m.op("f5", 1, {a, c}, {g});
  m.op("f6", 1, {b, d}, {e});
  const problem p = m.compile();
  const plan pl = keep_all_plan(p, 1024);
  CHECK(validate(p, pl, test::byte_per_us_device(), 1024).ok);
  host::device dev({.arena_bytes = 1024, .pinned_bytes = 0, .before_copy = {}});
  executor<host::device> ex(dev, p, pl);
  std::vector<unsigned char> e_value(512);
  const auto stats = ex.run(
      [&](const op_call& call, host::stream_view) {
        if (call.step < 4) {  // a..d: filled with 1, 2, 3, 4
          std::memset(call.outputs[0], call.step + 1, 256);
        } else if (call.step == 5) {  // e = b's bytes then d's bytes
          std::memcpy(call.outputs[0], call.inputs[0], 256);
          std::memcpy(static_cast<char*>(call.outputs[0]) + 256, call.inputs[1], 256);
          std::memcpy(e_value.data(), call.outputs[0], 512);
        }
      },
      [](index_t, void*, host::stream_view) {});
  CHECK(stats.compactions == 1);
  CHECK(stats.peak_bytes == 1024);
  CHECK(e_value[0] == 2);
  CHECK(e_value[255] == 2);
  CHECK(e_value[256] == 4);
  CHECK(e_value[511] == 4);
  (void)e;
  (void)g;
  ex.release();
  CHECK(dev.arena().in_use() == 0);
}

TEST_CASE("executor faults: a throwing op or copy names the action, and every byte comes back") {
  const auto w = example::make_float_workload(4, true);
  const device_spec spec = find_device("titan-rtx");
  // The tightest budget (in 5% steps) at which vdnn-all fits.
  bytes_t budget = 0;
  plan pl;
  for (int percent = 100; percent >= 50; percent -= 5) {
    const bytes_t b = w.p.baseline_peak() * percent / 100 / 256 * 256;
    plan attempt = find_planner("vdnn-all").run(w.p, spec, b, planner_options{});
    if (!attempt.feasible) break;
    budget = b;
    pl = std::move(attempt);
  }
  REQUIRE(budget > 0);
  REQUIRE(test::count(pl, action_kind::swap_out) >= 2);
  const bytes_t pinned = runtime::layout_of(w.p, pl).pinned_peak;

  SUBCASE("an op throws") {
    host::device dev({.arena_bytes = budget, .pinned_bytes = pinned, .before_copy = {}});
    executor<host::device> ex(dev, w.p, pl);
    // The compute of step 5 fails.
    index_t failing = no_index;
    for (std::size_t a = 0; a < pl.actions.size(); ++a) {
      if (pl.actions[a].kind == action_kind::compute && pl.actions[a].step == 5) failing = static_cast<index_t>(a);
    }
    REQUIRE(failing != no_index);
    auto op = [&](const op_call& call, host::stream_view) {
      if (call.step == 5) throw std::runtime_error("kernel exploded");
      example::run_float_op(w, call);
    };
    try {
      (void)ex.run(op, loader(w));
      FAIL("run did not throw");
    } catch (const runtime::action_failed& e) {
      CHECK(e.action == failing);
      CHECK(e.kind() == failure_kind::none);  // the framework's op failed, not the plan
      CHECK(std::string(e.what()) == "executor: action " + std::to_string(failing) + " (compute '" +
                                         w.p.op_name[5] + "') failed: kernel exploded");
    }
    CHECK(dev.arena().in_use() == 0);
    CHECK(dev.pinned().in_use() == 0);
    // The executor is reusable: a clean run afterwards is right.
    test::integrity check(pl.actions.size());
    (void)ex.run(checked_op(w, check), loader(w));
    CHECK(check.total() == 0);
  }
  SUBCASE("the second swap-out's copy throws") {
    std::atomic<int> d2h{0};
    host::device dev({.arena_bytes = budget,
                      .pinned_bytes = pinned,
                      .before_copy = [&](copy_kind k, std::size_t) {
                        if (k == copy_kind::device_to_host && ++d2h == 2) throw std::runtime_error("DMA error");
                      }});
    executor<host::device> ex(dev, w.p, pl);
    index_t second = no_index;
    for (std::size_t a = 0, seen = 0; a < pl.actions.size(); ++a) {
      if (pl.actions[a].kind == action_kind::swap_out && ++seen == 2) second = static_cast<index_t>(a);
    }
    test::integrity check(pl.actions.size());
    try {
      (void)ex.run(checked_op(w, check), loader(w));
      FAIL("run did not throw");
    } catch (const runtime::action_failed& e) {
      CHECK(e.action == second);
      CHECK(std::string(e.what()).find("(swap_out '" + w.p.tensor_name[static_cast<std::size_t>(
                                           pl.actions[static_cast<std::size_t>(second)].tensor)] +
                                       "') failed: DMA error") != std::string::npos);
    }
    CHECK(dev.arena().in_use() == 0);
    CHECK(dev.pinned().in_use() == 0);
  }
  SUBCASE("a budget below the plan's needs is out of memory, named") {
    const bytes_t small = budget / 2 / 256 * 256;
    host::device dev({.arena_bytes = small, .pinned_bytes = pinned, .before_copy = {}});
    plan tight = pl;
    tight.budget = small;
    executor<host::device> ex(dev, w.p, tight);
    const auto op = [&](const op_call& call, host::stream_view) { example::run_float_op(w, call); };
    CHECK_THROWS_WITH_AS((void)ex.run(op, loader(w)), doctest::Contains("executor: out of device memory at action"),
                         infeasible_budget);
    CHECK(thrown_kind([&] { (void)ex.run(op, loader(w)); }) == failure_kind::out_of_memory);
    CHECK(simulate(w.p, tight, test::byte_per_us_device(), small).kind == failure_kind::out_of_memory);
    CHECK(dev.arena().in_use() == 0);
    CHECK(dev.pinned().in_use() == 0);
  }
  SUBCASE("a malformed action list is refused before anything runs") {
    plan bad = pl;
    bad.actions.front().step = 999;
    host::device dev({.arena_bytes = budget, .pinned_bytes = pinned, .before_copy = {}});
    CHECK_THROWS_WITH_AS(executor<host::device>(dev, w.p, bad),
                         "invalid plan: action 0 (compute) names step 999, but the problem has 33 steps", invalid_plan);
    CHECK(thrown_kind([&] { executor<host::device>(dev, w.p, bad); }) == failure_kind::invalid_plan);
    plan unread = keep_all_plan(w.p, budget);
    std::swap(unread.actions[0], unread.actions[1]);  // relu1 before matmul1 made z1
    CHECK_THROWS_WITH_AS(executor<host::device>(dev, w.p, unread),
                         "invalid plan: action 0 (compute 'relu1'): tensor 'z1' is not on the device; nothing has made it yet",
                         invalid_argument);  // an invalid_plan is an invalid_argument too
    CHECK(thrown_kind([&] { executor<host::device>(dev, w.p, unread); }) == failure_kind::invalid_plan);
    CHECK(simulate(w.p, unread, test::byte_per_us_device(), budget).kind == failure_kind::invalid_plan);
  }
}

TEST_CASE("executor faults: a throwing micro-op names the action and its part; every micro-tensor comes back") {
  const auto w = example::make_float_workload(2, false);
  const plan pl = micro_plan(w.p, 20480);
  REQUIRE(validate(w.p, pl, test::byte_per_us_device(), 20480).ok);
  const bytes_t pinned = runtime::layout_of(w.p, pl).pinned_peak;
  // Micro-op 1 of matmul_grad_w2 (step 6) fails: by then x is split in
  // place, r1 and r2 are micro-tensors back from the host, gz2 is 4
  // micro-tensors and the host holds micro copies.
  index_t failing = no_index;
  for (std::size_t a = 0; a < pl.actions.size(); ++a) {
    if (pl.actions[a].kind == action_kind::compute && pl.actions[a].step == 6 && pl.actions[a].part == 1) {
      failing = static_cast<index_t>(a);
    }
  }
  REQUIRE(failing != no_index);
  host::device dev({.arena_bytes = 20480, .pinned_bytes = pinned, .before_copy = {}});
  executor<host::device> ex(dev, w.p, pl);
  std::atomic<int> ran{0};
  auto op = [&](const op_call& call, host::stream_view) {
    if (call.step == 6 && call.part == 1) throw std::runtime_error("kernel exploded");
    example::run_float_op(w, call);
    ++ran;
  };
  try {
    (void)ex.run(op, loader(w));
    FAIL("run did not throw");
  } catch (const runtime::action_failed& e) {
    CHECK(e.action == failing);
    CHECK(std::string(e.what()) == "executor: action " + std::to_string(failing) +
                                       " (compute 'matmul_grad_w2', part 1 of 2) failed: kernel exploded");
  }
  CHECK(ran.load() == 12);  // the ops before it: matmul1 2, relu1 2, matmul2, relu2, loss, relu_grad2 4, micro-op 0
  CHECK(dev.arena().in_use() == 0);
  CHECK(dev.pinned().in_use() == 0);
  // The executor is reusable: a clean run afterwards is right.
  test::integrity check(pl.actions.size());
  const auto stats = ex.run(checked_op(w, check), loader(w));
  CHECK(check.total() == 0);
  CHECK(stats.micro_actions == 24);
  ex.release();
  CHECK(dev.arena().in_use() == 0);
}

TEST_CASE("arena: a block's sub-ranges go back one by one; finer blocks keep their alignment") {
  runtime::arena a(1024);
  const auto whole = a.allocate(1000);  // a 1024 B footprint
  REQUIRE(whole);
  CHECK(*whole == 0);
  // Split in place into 4 micro-tensors of 250 B: [0, 250) ... [750, 1024) with the padding.
  a.deallocate_extent(250, 250);  // micro-tensor 1 goes
  CHECK(a.in_use() == 774);
  CHECK(a.largest_hole() == 250);
  CHECK_FALSE(a.allocate(256));  // no 256-aligned 256 B run: [256, 500) is too short
  const auto piece = a.allocate_extent(192, runtime::micro_alignment);  // 64-aligned: [256, 448)
  REQUIRE(piece);
  CHECK(*piece == 256);
  CHECK(a.in_use() == 966);
  a.deallocate_extent(0, 250);
  a.deallocate_extent(*piece, 192);
  a.deallocate_extent(500, 250);
  a.deallocate_extent(750, 274);
  CHECK(a.in_use() == 0);
  CHECK(a.largest_hole() == 1024);  // every hole merged again
  CHECK(a.peak() == 1024);
}

TEST_CASE("ordered_pool: a block comes back only after its events; compaction packs live blocks") {
  host::device dev({.arena_bytes = 1024, .pinned_bytes = 0, .before_copy = {}});
  runtime::ordered_pool<host::device> pool(dev, dev.arena(), 1000);
  auto s = dev.make_stream();
  auto e = dev.make_event();
  const auto x = pool.try_allocate(300);  // 512 B footprint
  REQUIRE(x);
  CHECK(*x == 0);
  CHECK(pool.in_use() == 300);
  CHECK(dev.arena().in_use() == 512);
  CHECK_FALSE(pool.try_allocate(701));  // over the 1000 B limit
  std::atomic<bool> go{false};
  dev.launch(s, [&](host::stream_view) {
    while (!go.load()) {
    }
  });
  dev.record(e, s);
  const host::device::event* after[] = {&e};
  pool.deallocate(*x, 300, after);
  CHECK_FALSE(pool.try_allocate(600));  // x still pending: no 768 B hole
  CHECK(pool.has_pending());
  go = true;
  CHECK(pool.wait_one());
  CHECK_FALSE(pool.has_pending());
  CHECK(pool.in_use() == 0);
  const auto y = pool.try_allocate(600);
  REQUIRE(y);
  CHECK(*y == 0);
  CHECK(pool.peak() == 600);
  CHECK(dev.arena().peak() == 768);
  // Compaction: y at 0, z at 768; after freeing y, z moves to 0.
  auto z = pool.try_allocate(200);
  REQUIRE(z);
  CHECK(*z == 768);
  pool.deallocate(*y, 600);
  bytes_t where = *z;
  std::vector<std::array<bytes_t, 3>> moves;
  pool.compact({{&where, 200}}, [&](bytes_t from, bytes_t to, bytes_t n) { moves.push_back({from, to, n}); });
  CHECK(where == 0);
  REQUIRE(moves.size() == 1);
  CHECK(moves[0] == std::array<bytes_t, 3>{768, 0, 200});
  CHECK(dev.arena().in_use() == 256);
  CHECK(dev.arena().largest_hole() == 768);
}
