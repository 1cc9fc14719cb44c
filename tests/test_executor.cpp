// Tests of runtime::executor on host::device: every registered planner's
// plans, at several budgets, compute bit for bit what the unplanned
// reference computes, every device buffer at its memory layout's offset in
// an arena of exactly the budget; hand layouts show the reuse of freed
// bytes, a layout that does not fit the issue order and an arena too small;
// faults name the failed action and give every byte back.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "executor_checks.hpp"
#include "float_net.hpp"
#include "memplan/compile.hpp"
#include "memplan/plan_builder.hpp"
#include "memplan/cost/devices.hpp"
#include "memplan/host/device.hpp"
#include "memplan/planners/registry.hpp"
#include "memplan/runtime/executor.hpp"
#include "memplan/sim/assign_layout.hpp"
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
          stats.compactions, " compactions; arena ", stats.arena_bytes, " B, high water ", stats.arena_high_water_bytes,
          " B, live peak ", stats.peak_live_bytes, " B, budget (simulated peak) ", budget, " B, unplanned peak ", p.baseline_peak(), " B");
  CHECK(stats.micro_actions == 24);
  CHECK(stats.splits_in_place == 1);
  CHECK(stats.ops_run == 20);  // 13 steps, 5 of them as 12 micro-ops
  // Swapped: r1 as 2 x 512 B, x's second half 512 B, r2 whole 1024 B; back:
  // r2 as 4 x 256 B, r1 as 2 x 512 B, x's half 512 B.
  CHECK(stats.swapped_out_bytes == 2560);
  CHECK(stats.swapped_in_bytes == 2560);
  CHECK(budget == 20480);  // the parameters' update at the end: w1, w2, gw1, gw2, w1_new (4 KiB each)
  CHECK(stats.arena_high_water_bytes <= budget);
  CHECK(stats.peak_live_bytes <= budget);
}

TEST_CASE("executor: every registered planner, several budgets, chain and residual: bit-identical, within budget") {
  host_backend backend;
  test::check_every_planner(backend);
}

TEST_CASE("executor: delta and dtr --allocator caching run at their allocator's offsets in an arena of exactly the budget") {
  // The chain's and the residual net's tensors are a few KiB, far below a
  // 2 MiB segment, so the allocator is scaled to them: byte-exact segments,
  // blocks rounded to the device's 256 B alignment (allocator_spec.hpp).
  device_spec dev = find_device("titan-rtx");
  dev.allocator = byte_exact_allocator();
  host_backend backend;
  index_t runs = 0, recomputes = 0, swaps = 0;
  for (const bool residual : {false, true}) {
    const auto w = example::make_float_workload(residual ? 4 : 6, residual, 32, 16);
    for (const double fraction : {0.9, 0.75, 0.6}) {
      const auto budget = static_cast<bytes_t>(static_cast<double>(w.p.baseline_peak()) * fraction) / 256 * 256;
      for (const char* name : {"dtr", "delta"}) {
        CAPTURE(name);
        CAPTURE(residual);
        CAPTURE(budget);
        planner_options caching;
        caching.extra["allocator"] = "caching";  // dtr's own accounting is laid out afterwards
        const plan pl = find_planner(name).run(w.p, dev, budget, caching);
        if (!pl.feasible) continue;
        REQUIRE_FALSE(pl.offsets.empty());  // the allocator's layout, not one placed afterwards
        CHECK(pl.arena_bytes <= budget);
        CHECK(pl.allocator_us > 0);
        test::check_valid(w.p, pl, dev, budget);
        const runtime::run_stats stats = test::run_checked(backend, w, pl, budget, &dev);
        CHECK(stats.arena_bytes == pl.arena_bytes);
        ++runs;
        recomputes += test::count(pl, action_kind::recompute);
        swaps += test::count(pl, action_kind::swap_in);
      }
    }
  }
  MESSAGE(runs, " dtr/delta plans ran at their allocator's offsets: ", recomputes, " recomputes, ", swaps,
          " swap-ins");
  CHECK(runs >= 6);
  CHECK(recomputes > 0);
}

namespace {

/// Generated graph `seed`: its shape by the seed, 4 + seed % `spread`
/// forward ops, tensors of 1 B to 100 kB (odd seeds) or 256 B to 1 MiB.
problem generated(std::uint64_t seed, std::uint64_t spread) {
  testing::graph_options o;
  o.shape = static_cast<testing::graph_shape>(seed % testing::graph_shape_names.size());
  o.forward_ops = static_cast<int>(4 + seed % spread);
  o.min_bytes = seed % 2 != 0 ? 1 : 256;
  o.max_bytes = seed % 2 != 0 ? 100'000 : bytes_t{1} << 20;
  return compile(testing::random_training_graph(o, seed));
}

}  // namespace

TEST_CASE("executor: tsplit's micro-op plans on generated graphs read what the unplanned run reads") {
  // Tensor sizes from 1 B to 100 kB or 256 B to 1 MiB: micro-tensors of any
  // byte count, splits in place at unaligned offsets. The digest check
  // (testing/integrity.hpp) runs every plan on host::device.
  const device_spec dev = find_device("titan-rtx");
  int micro_plans = 0, failed = 0;
  index_t micro = 0;
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    const problem p = generated(seed, 40);
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

TEST_CASE("executor: every planner's plans on generated graphs run in an arena of exactly the budget") {
  // The digest check (testing/integrity.hpp) on every planner but the
  // searches, 12 generated graphs x 3 budgets, issued in the simulator's
  // start order: each plan at its own memory layout, nothing compacted.
  const device_spec dev = find_device("titan-rtx");
  int runs = 0, failed = 0;
  index_t compactions = 0;
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    const problem p = generated(seed, 20);
    for (const double fraction : {1.2, 0.9, 0.7}) {
      const auto budget = static_cast<bytes_t>(static_cast<double>(p.baseline_peak()) * fraction);
      for (const planner_entry& e : planners()) {
        if (e.searches) continue;
        const plan pl = e.run(p, dev, budget, planner_options{});
        if (!pl.feasible) continue;
        CAPTURE(e.name);
        CAPTURE(seed);
        CAPTURE(budget);
        const testing::integrity_check run = testing::check_integrity(p, pl, budget, &dev);
        CHECK(run.ran);
        CHECK_MESSAGE(run.failure.empty(), run.failure);
        CHECK(run.stats.arena_bytes == pl.arena_bytes);
        CHECK(run.stats.arena_high_water_bytes <= budget);
        ++runs;
        failed += run.failure.empty() ? 0 : 1;
        compactions += run.stats.compactions;
      }
    }
  }
  MESSAGE(runs, " planner plans on generated graphs ran in an arena of their budget; ", failed, " failed, ",
          compactions, " compactions");
  CHECK(runs >= 150);
  CHECK(compactions == 0);
}

namespace {

/// a, b, c, d (256 B each) made one after another; f5 reads a and c, their
/// last reader; h reads b; f6 reads b and d and makes e (512 B).
struct holes_graph {
  problem p;
  index_t a, b, c, d, g, k, e;
};
holes_graph make_holes_graph() {
  test::graph_maker m;
  holes_graph h{};
  h.a = m.tensor("a", 256, tensor_kind::activation);
  h.b = m.tensor("b", 256, tensor_kind::activation);
  h.c = m.tensor("c", 256, tensor_kind::activation);
  h.d = m.tensor("d", 256, tensor_kind::activation);
  h.g = m.tensor("g", 0, tensor_kind::activation);
  h.k = m.tensor("k", 0, tensor_kind::activation);
  h.e = m.tensor("e", 512, tensor_kind::activation);
  m.op("fa", 1, {}, {h.a});
  m.op("fb", 1, {}, {h.b});
  m.op("fc", 1, {}, {h.c});
  m.op("fd", 1, {}, {h.d});
  m.op("f5", 1, {h.a, h.c}, {h.g});
  m.op("h", 1, {h.b}, {h.k});
  m.op("f6", 1, {h.b, h.d}, {h.e});
  h.p = m.compile();
  return h;
}

/// The device buffer of `pl` that holds tensor `t` (its first copy).
index_t buffer_of(const problem& p, const plan& pl, index_t t) {
  const runtime::layout l = runtime::layout_of(p, pl);
  for (std::size_t b = 0; b < l.device.size(); ++b) {
    if (l.device[b].tensor == t) return static_cast<index_t>(b);
  }
  return no_index;
}

}  // namespace

TEST_CASE("executor: buffers sit at the plan's offsets; bytes freed before are reused without moving anything") {
  // Hand layout of the keep-all plan (allocation order: the outputs of fa,
  // fb, fc, fd, f5, h, f6): a at 0, c at 256, b at 512, d at 768, g and k
  // (0 B) at 0, and e (512 B) at 0 — over a and c, which f5, their last
  // reader, frees before h runs, so before f6 makes e (strictly before, as
  // plan_layout.hpp asks). Arena 1024 B: what is live at once (a, b, c, d;
  // then b, d, e). First fit would have put a, b, c, d in order and left e
  // two 256 B holes: the old executor compacted here.
  const holes_graph h = make_holes_graph();
  const problem& p = h.p;
  plan pl = keep_all_plan(p, 1024);
  pl.offsets = {0, 512, 256, 768, 0, 0, 0};
  pl.arena_bytes = 1024;
  const validation v = validate(p, pl, test::byte_per_us_device(), 1024);
  REQUIRE_MESSAGE(v.ok, (v.errors.empty() ? std::string() : v.errors.front()));
  const report r = simulate(p, pl, test::byte_per_us_device(), 1024);
  REQUIRE_MESSAGE(r.feasible, r.failure);
  CHECK(r.arena_bytes == 1024);
  host::device dev({.arena_bytes = 1024, .pinned_bytes = 0, .before_copy = {}});
  executor<host::device> ex(dev, p, pl);
  CHECK(ex.arena_bytes() == 1024);
  CHECK(ex.offset_of(buffer_of(p, pl, h.c)) == 256);
  CHECK(ex.offset_of(buffer_of(p, pl, h.e)) == 0);
  std::vector<unsigned char> e_value(512);
  void* e_address = nullptr;
  const auto stats = ex.run(
      [&](const op_call& call, host::stream_view) {
        if (call.step < 4) {  // a..d: filled with 1, 2, 3, 4
          std::memset(call.outputs[0], call.step + 1, 256);
        } else if (call.step == 6) {  // e = b's bytes then d's bytes
          e_address = call.outputs[0];
          std::memcpy(call.outputs[0], call.inputs[0], 256);
          std::memcpy(static_cast<char*>(call.outputs[0]) + 256, call.inputs[1], 256);
          std::memcpy(e_value.data(), call.outputs[0], 512);
        }
      },
      [](index_t, void*, host::stream_view) {});
  CHECK(e_address == dev.device_memory());  // e at offset 0
  CHECK(stats.arena_bytes == 1024);
  CHECK(stats.arena_high_water_bytes == 1024);
  CHECK(stats.peak_live_bytes == 1024);
  CHECK(stats.compactions == 0);
  CHECK(stats.compacted_bytes == 0);
  CHECK(stats.ops_run == 7);
  CHECK(e_value[0] == 2);
  CHECK(e_value[255] == 2);
  CHECK(e_value[256] == 4);
  CHECK(e_value[511] == 4);
  CHECK(dev.arena().peak() == 1024);
  ex.release();
  CHECK(dev.arena().in_use() == 0);

  SUBCASE("an arena smaller than the layout is refused before anything runs") {
    host::device small({.arena_bytes = 768, .pinned_bytes = 0, .before_copy = {}});
    CHECK_THROWS_WITH_AS(executor<host::device>(small, p, pl),
                         "executor: the plan's memory layout needs an arena of 1024 bytes (1.00 KiB); the device arena "
                         "has 768 bytes (768 B)",
                         infeasible_budget);
    CHECK(thrown_kind([&] { executor<host::device>(small, p, pl); }) == failure_kind::out_of_memory);
    CHECK(small.arena().in_use() == 0);
  }
  SUBCASE("two buffers live at once on the same bytes are refused") {
    plan bad = pl;
    bad.offsets = {0, 512, 256, 768, 0, 0, 512};  // e over b and d, which f6 reads
    CHECK_THROWS_WITH_AS(executor<host::device>(dev, p, bad),
                         doctest::Contains("tensor 'e' (made by action 6 (compute 'f6')) at offset 512, 512 bytes "
                                           "overlaps tensor 'b' (made by action 1 (compute 'fb')) at offset 512"),
                         invalid_plan);
  }
}

namespace {

/// A framework's own allocator (memplan::allocator): memplan's arena, plus
/// the log of every block taken at a layout's offset and the blocks held
/// now, as a framework's memory statistics would keep them.
class logged_arena {
 public:
  explicit logged_arena(bytes_t capacity) : arena_(capacity) {}
  static bytes_t footprint(bytes_t n) { return runtime::arena::footprint(n); }
  std::optional<bytes_t> allocate(bytes_t n) { return arena_.allocate(n); }
  bool allocate_at(bytes_t offset, bytes_t extent) {
    const bool taken = arena_.allocate_at(offset, extent);
    if (taken && extent > 0) taken_at.emplace_back(offset, extent), ++held;
    return taken;
  }
  void deallocate(bytes_t offset, bytes_t n) { arena_.deallocate(offset, n); }
  void deallocate_extent(bytes_t offset, bytes_t extent) {
    if (extent > 0) --held;
    arena_.deallocate_extent(offset, extent);
  }
  void clear() { arena_.clear(); }
  [[nodiscard]] bytes_t capacity() const { return arena_.capacity(); }
  [[nodiscard]] bytes_t in_use() const { return arena_.in_use(); }
  [[nodiscard]] bytes_t peak() const { return arena_.peak(); }

  std::vector<std::pair<bytes_t, bytes_t>> taken_at;  ///< (offset, extent), in the order taken
  index_t held = 0;                                   ///< blocks taken and not given back

 private:
  runtime::arena arena_;
};
static_assert(memplan::allocator<logged_arena>);
static_assert(!memplan::allocator<std::vector<bytes_t>>);

}  // namespace

TEST_CASE("executor: a device over the framework's own allocator sees every block of the layout") {
  // The hand layout of the test above (a 0, b 512, c 256, d 768, e 512 B
  // at 0), run on host::basic_device<logged_arena>: the allocator is asked
  // for exactly those blocks, in issue order, and holds none after release.
  const holes_graph h = make_holes_graph();
  plan pl = keep_all_plan(h.p, 1024);
  pl.offsets = {0, 512, 256, 768, 0, 0, 0};
  pl.arena_bytes = 1024;
  host::basic_device<logged_arena> dev({.arena_bytes = 1024, .pinned_bytes = 0, .before_copy = {}});
  static_assert(memplan::device<host::basic_device<logged_arena>>);
  executor<host::basic_device<logged_arena>> ex(dev, h.p, pl);
  const auto stats = ex.run([](const op_call&, host::stream_view) {}, [](index_t, void*, host::stream_view) {});
  CHECK(stats.ops_run == 7);
  const std::vector<std::pair<bytes_t, bytes_t>> expected{{0, 256}, {512, 256}, {256, 256}, {768, 256}, {0, 512}};
  CHECK(dev.arena().taken_at == expected);
  CHECK(dev.arena().peak() == 1024);
  ex.release();
  CHECK(dev.arena().held == 0);
  CHECK(dev.arena().in_use() == 0);
  // executor::run takes only callbacks of the documented shapes.
  const auto no_stream = [](const op_call&) {};
  static_assert(!runtime::op_runner<decltype(no_stream), host::stream_view>);
  static_assert(runtime::tensor_loader<decltype(loader(std::declval<const example::float_workload&>())), host::stream_view>);
}

TEST_CASE("executor: a layout from the simulator's timeline fits its start order, not the list's") {
  // x makes t (1 KiB), f reads it (its last reader) and makes y; s (1 KiB)
  // goes out over a 1 B/us link and comes back, listed before f. In the
  // simulator f runs and frees t long before the swap-out ends, so s's copy
  // may take t's bytes: s at 0, t at 1024, s's copy at 1024, y at 2048, z
  // (0 B) at 0 — arena 3072 B, what is live at f (s, t, y). Issued in the
  // simulator's start order, the swap-in's stream waits on f's event and
  // finds t's bytes free; in list order it would be issued before f.
  test::graph_maker m;
  const index_t s = m.tensor("s", 1024, tensor_kind::activation);
  const index_t t = m.tensor("t", 1024, tensor_kind::activation);
  const index_t y = m.tensor("y", 1024, tensor_kind::activation);
  const index_t z = m.tensor("z", 0, tensor_kind::activation);
  m.op("p", 1, {}, {s});
  m.op("x", 1, {}, {t});
  m.op("f", 1, {t}, {y});
  m.op("g", 1, {s, y}, {z});
  const problem p = m.compile();
  device_spec spec = test::byte_per_us_device();
  spec.launch_overhead_us = 0;
  plan_builder b(p, "reuse", 3072);
  b.compute(0);
  b.swap_out(s);
  b.compute(1);
  b.swap_in(s);
  b.compute(2);
  b.compute(3);
  plan pl = std::move(b).finish();
  pl.offsets = {0, 1024, 1024, 2048, 0};  // allocation order: s (p), t (x), s's copy (swap_in), y (f), z (g)
  pl.arena_bytes = 3072;
  const validation v = validate(p, pl, spec, 3072);
  REQUIRE_MESSAGE(v.ok, (v.errors.empty() ? std::string() : v.errors.front()));
  const report r = simulate(p, pl, spec, 3072);
  REQUIRE(r.feasible);
  CHECK(r.arena_bytes == 3072);
  CHECK(r.peak_live_bytes == 3072);
  const bytes_t pinned = runtime::pinned_bytes(p, pl, &spec);
  CHECK(pinned == 1024);
  host::device dev({.arena_bytes = 3072, .pinned_bytes = pinned, .before_copy = {}});
  // In list order the swap-in (action 3) is issued before f (action 4) releases t.
  CHECK_THROWS_WITH_AS(executor<host::device>(dev, p, pl),
                       "invalid plan: the memory layout does not fit the executor's issue order: tensor 's' (made by "
                       "action 3 (swap_in 's')) at offset 1024, 1024 bytes overlaps tensor 't' (made by action 2 "
                       "(compute 'x')) at offset 1024, 1024 bytes, which is still live when action 3 (swap_in 's') is "
                       "issued (its release is issued after action 4 (compute 'f') and its holders); a layout made "
                       "from the simulator's timeline fits the executor made with that device (executor(dev, p, pl, spec))",
                       invalid_plan);
  CHECK(thrown_kind([&] { executor<host::device>(dev, p, pl); }) == failure_kind::invalid_plan);
  executor<host::device> ex(dev, p, pl, spec);
  CHECK(std::vector<index_t>(ex.order().begin(), ex.order().end()) == std::vector<index_t>{0, 1, 2, 4, 3, 5});
  std::atomic<int> s_seen{0};
  const auto stats = ex.run(
      [&](const op_call& call, host::stream_view) {
        for (std::size_t i = 0; i < call.outputs.size(); ++i) {
          if (call.outputs[i] != nullptr) {
            std::memset(call.outputs[i], static_cast<int>(call.step) + 1,
                        static_cast<std::size_t>(call.output_regions[i].bytes));
          }
        }
        if (call.step == 3) {  // g reads s back: p's bytes, not f's or x's
          const auto* in = static_cast<const unsigned char*>(call.inputs[0]);
          s_seen = std::all_of(in, in + 1024, [](unsigned char c) { return c == 1; }) ? 1 : -1;
        }
      },
      [](index_t, void*, host::stream_view) {});
  CHECK(s_seen.load() == 1);
  CHECK(stats.arena_bytes == 3072);
  CHECK(stats.arena_high_water_bytes == 3072);
  // The executor counts a buffer live until its release is issued: s goes
  // when its swap-out is issued, t when f is (after y is placed): t and y,
  // then y and s's copy.
  CHECK(stats.peak_live_bytes == 2048);
  CHECK(stats.swapped_in_bytes == 1024);
  CHECK(stats.compactions == 0);
  ex.release();
  CHECK(dev.arena().in_use() == 0);
  (void)z;
  (void)y;
}

TEST_CASE("executor: a plan without a layout gets the one of the order it is issued in") {
  // s1 and s2 (1 KiB each) are swapped out and back; their swap-ins wait
  // for x, and s2's also for the h2d stream: s1 takes 1024 us on a link of
  // 1 B/us. y (1 KiB) is made by a 1 us op that starts with s1's swap-in and
  // frees t (its input) long before s2's swap-in starts. Issued in list
  // order, s2's swap-in comes before f: t, s1, s2 and y are live at once
  // (4 KiB) when f is issued. Issued in the simulator's start order (p, s1's
  // swap-out, x, s2's swap-out, s1's swap-in, f, s2's swap-in, g), at most
  // 3 KiB are: t, s1 and y when f is issued, then s1, y and s2. The layout
  // of each order (`place` on its lifetimes) holds at least that.
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
  REQUIRE(pl.offsets.empty());
  const runtime::layout l = runtime::layout_of(p, pl);
  const runtime::placement in_list = runtime::placement_of(p, pl, l, nullptr);
  const runtime::placement in_start = runtime::placement_of(p, pl, l, &spec);
  CHECK(in_list.derived);
  CHECK(in_list.order == std::vector<index_t>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(in_start.order == std::vector<index_t>{0, 1, 3, 2, 4, 6, 5, 7});
  CHECK(in_list.arena_bytes >= 4096);
  CHECK(in_start.arena_bytes >= 3072);
  plan laid = pl;  // the layout the simulator's timeline gives the plan
  REQUIRE(assign_layout(p, laid, spec).feasible);
  CHECK(in_start.arena_bytes == laid.arena_bytes);
  CHECK(in_start.offsets == offsets_by_buffer(l, laid.offsets));
  MESSAGE("derived layouts: list order ", in_list.arena_bytes, " B, start order ", in_start.arena_bytes, " B");
  const auto run_op = [](const op_call& call, host::stream_view) {
    for (void* out : call.outputs) {
      if (out != nullptr) std::memset(out, static_cast<int>(call.step) + 1, 1024);
    }
  };
  const auto no_load = [](index_t, void*, host::stream_view) {};
  for (const runtime::placement* at : {&in_list, &in_start}) {
    const bool start_order = at == &in_start;
    CAPTURE(start_order);
    const bytes_t pinned = runtime::pinned_bytes(p, pl, start_order ? &spec : nullptr);
    {  // one alignment unit short
      host::device dev({.arena_bytes = at->arena_bytes - 256, .pinned_bytes = pinned, .before_copy = {}});
      const std::string why = "executor: the memory layout the executor derived for the plan needs an arena of " +
                              std::to_string(at->arena_bytes) + " bytes";
      CHECK_THROWS_WITH_AS(start_order ? executor<host::device>(dev, p, pl, spec) : executor<host::device>(dev, p, pl),
                           doctest::Contains(why.c_str()), infeasible_budget);
    }
    host::device dev({.arena_bytes = at->arena_bytes, .pinned_bytes = pinned, .before_copy = {}});
    auto ex = start_order ? std::make_unique<executor<host::device>>(dev, p, pl, spec)
                          : std::make_unique<executor<host::device>>(dev, p, pl);
    const auto stats = ex->run(run_op, no_load);
    CHECK(stats.arena_bytes == at->arena_bytes);
    CHECK(stats.arena_high_water_bytes <= at->arena_bytes);
    CHECK(stats.peak_live_bytes == (start_order ? 3072 : 4096));
    CHECK(stats.swapped_in_bytes == 2048);
    CHECK(stats.compactions == 0);
    ex->release();
    CHECK(dev.arena().in_use() == 0);
  }
  (void)z;
  (void)y;
}

TEST_CASE("executor faults: a throwing op or copy names the action, and every byte comes back") {
  const auto w = example::make_float_workload(4, true);
  const device_spec spec = find_device("titan-rtx");
  // The tightest budget (in 5% steps) at which vdnn-all fits: its memory
  // layout takes a little more than the baseline peak.
  bytes_t budget = 0;
  plan pl;
  for (int percent = 150; percent >= 50; percent -= 5) {
    const bytes_t b = w.p.baseline_peak() * percent / 100 / 256 * 256;
    plan attempt = find_planner("vdnn-all").run(w.p, spec, b, planner_options{});
    if (!attempt.feasible && budget > 0) break;
    if (!attempt.feasible) continue;
    budget = b;
    pl = std::move(attempt);
  }
  REQUIRE(budget > 0);
  REQUIRE(test::count(pl, action_kind::swap_out) >= 2);
  // Issued as the simulator starts the actions on spec: the order the plan's layout fits.
  const bytes_t pinned = runtime::pinned_bytes(w.p, pl, &spec);

  SUBCASE("an op throws") {
    host::device dev({.arena_bytes = budget, .pinned_bytes = pinned, .before_copy = {}});
    executor<host::device> ex(dev, w.p, pl, spec);
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
    executor<host::device> ex(dev, w.p, pl, spec);
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
  SUBCASE("an arena smaller than the plan's layout is refused before anything runs, named") {
    const bytes_t small = pl.arena_bytes / 2 / 256 * 256;
    host::device dev({.arena_bytes = small, .pinned_bytes = pinned, .before_copy = {}});
    const std::string why = "executor: the plan's memory layout needs an arena of " + std::to_string(pl.arena_bytes) +
                            " bytes";
    CHECK_THROWS_WITH_AS(executor<host::device>(dev, w.p, pl), doctest::Contains(why.c_str()), infeasible_budget);
    CHECK(thrown_kind([&] { executor<host::device>(dev, w.p, pl); }) == failure_kind::out_of_memory);
    plan tight = pl;
    tight.budget = small;
    CHECK(simulate(w.p, tight, test::byte_per_us_device(), small).kind == failure_kind::out_of_memory);
    tight.offsets.clear();  // without a layout, the executor's own does not fit either
    CHECK(thrown_kind([&] { executor<host::device>(dev, w.p, tight); }) == failure_kind::out_of_memory);
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
  const auto piece = a.allocate_extent(192, 64);  // 64-aligned: [256, 448)
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
