// Tests of the baseline planners (vDNN, sqrt(n) checkpointing,
// SuperNeurons): hand-worked costs on small chains, and plans on zoo models
// that the validator accepts. Device: sim_fixtures.hpp's 1 B/µs links.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "memplan/compile.hpp"
#include "memplan/cost/devices.hpp"
#include "memplan/distributed/data_parallel.hpp"
#include "memplan/model/zoo.hpp"
#include "memplan/plan_builder.hpp"
#include "memplan/planners/baselines/common.hpp"
#include "memplan/planners/registry.hpp"
#include "memplan/sim/simulator.hpp"
#include "memplan/sim/validator.hpp"
#include "registry_fixtures.hpp"
#include "sim_fixtures.hpp"

namespace {

using namespace memplan;
using test::three_layers;  // sim_fixtures.hpp: baseline 700 µs, peak 700 B
using memplan::test::dev;
using memplan::test::unlimited;

using memplan::test::run;

// n identical layers f1..fn (10 µs, a_i = 100 B), a loss (20 µs) and
// b_n..b_1 (20 µs), b_i reading g_i and a_{i-1} (a_0 = x, 100 B input).
problem identical_chain(int n) {
  test::graph_maker m;
  std::vector<index_t> a{m.tensor("x", 100, tensor_kind::input)};
  for (int i = 1; i <= n; ++i) a.push_back(m.tensor("a" + std::to_string(i), 100, tensor_kind::activation));
  std::vector<index_t> g(static_cast<std::size_t>(n) + 1);
  for (int i = n; i >= 0; --i) g[static_cast<std::size_t>(i)] = m.tensor("g" + std::to_string(i), 100, tensor_kind::gradient);
  for (std::size_t i = 1; i <= static_cast<std::size_t>(n); ++i) m.op("f" + std::to_string(i), 10, {a[i - 1]}, {a[i]});
  const auto last = static_cast<std::size_t>(n);
  m.op("loss", 20, {a[last]}, {g[last]}, 0, phase::backward);
  for (std::size_t i = last; i >= 1; --i) {
    m.op("b" + std::to_string(i), 20, {g[i], a[i - 1]}, {g[i - 1]}, 0, phase::backward);
  }
  return m.compile();
}

}  // namespace

TEST_CASE("vdnn-all on three layers: offloads stall the forward pass, prefetches the backward") {
  // Offloaded: x (last forward read f1, first backward read b0), a1 (f2, b1),
  // a2 (f3, b2); not a3 (no forward layer reads it). Timeline (1 B/µs):
  //   f1 [0,100], out x [0,100]; f2 waits for it: [100,200], out a1 [100,300];
  //   f3 waits: [300,400], out a2 [300,500]; b3 waits: [500,600].
  //   in a2 (needed by b2, started by the end of f3) [500,700]; b2 [700,800];
  //   in a1 (started by b3's end, h2d busy) [700,900]; b1 [900,1000];
  //   in x (started by b2's end, h2d busy) [900,1000]; b0 [1000,1100].
  // Compute busy 700 µs of 1100: stall 400 µs. Memory is highest over
  // [700,800]: a2 + g3 + a1 + g2 = 600 B (the baseline's is 700 B).
  const problem p = three_layers();
  REQUIRE(p.baseline_peak() == 700);
  const plan pl = run("vdnn-all", p, dev, 1000);
  CHECK(pl.feasible);
  const report r = simulate(p, pl, dev, 1000);
  CHECK(r.feasible);
  CHECK(r.swapped_out_bytes == 500);
  CHECK(r.swapped_in_bytes == 500);
  CHECK(r.time_us == 1100);
  CHECK(r.stall_us == 400);
  CHECK(r.peak_bytes == 600);
  CHECK(pl.best_peak == 600);
  CHECK(validate(p, pl, dev, 1000).ok);

  SUBCASE("a budget below its peak is an ordinary infeasible plan") {
    const plan small = run("vdnn-all", p, dev, 500);
    CHECK(small.kind == failure_kind::out_of_memory);
    CHECK(small.best_peak == 600);
    CHECK(small.reason.find("600 bytes") != std::string::npos);
  }
  SUBCASE("vdnn-conv swaps nothing when there is no convolution") {
    const report rc = simulate(p, run("vdnn-conv", p, dev, 1000), dev, 1000);
    CHECK(rc.swapped_out_bytes == 0);
    CHECK(rc.peak_bytes == 700);
  }
}

TEST_CASE("checkpoint on a chain of 16 identical layers") {
  // sqrt(16) = 4: a4, a8, a12, a16 are kept; the other 12 activations are
  // freed after the next layer and recomputed segment-wise. Forward peak at
  // f16: x, a4, a8, a12, a15, a16 = 600 B. Backward peak at b16 after
  // recomputing f13..f15: x, a4, a8, a12, a13, a14, a15, g16, g15 = 900 B
  // (baseline: 1800 B at the loss: x, a1..a16, g16).
  // Recompute: the 12 non-checkpoint layers once each, 12 x 10 = 120 µs —
  // one forward pass (160 µs) less the 4 checkpoint layers, never more.
  const problem p = identical_chain(16);
  REQUIRE(p.baseline_peak() == 1800);
  REQUIRE(p.baseline_time_us() == 500);
  const plan pl = run("checkpoint", p, dev, 900);
  CHECK(pl.feasible);
  const report r = simulate(p, pl, dev, 900);
  CHECK(r.feasible);
  CHECK(r.peak_bytes == 900);
  CHECK(r.recomputed_ops == 12);
  CHECK(r.recompute_us == 120);
  CHECK(r.time_us == 620);
  CHECK(r.stall_us == 0);
  const validation v = validate(p, pl, dev, 900);
  CHECK(v.ok);
  CHECK(v.peak_bytes == 900);
  CHECK_FALSE(run("checkpoint", p, dev, 899).feasible);
}

TEST_CASE("checkpoint keeps the outputs of ops that cannot be recomputed") {
  const problem chain = identical_chain(16);
  problem p = chain;
  for (auto& r : p.recomputable) r = 0;
  const report r = simulate(p, run("checkpoint", p, dev, unlimited), dev, unlimited);
  CHECK(r.recomputed_ops == 0);
  CHECK(r.peak_bytes == 1800);
}

TEST_CASE("superneurons keeps what fits and evicts the least recently used tensor when memory is needed") {
  // identical_chain(4): f1..f4 (steps 0-3, 10 µs), loss (4, 20 µs), b4..b1
  // (5-8, 20 µs); baseline 140 µs. Live bytes per step: 200, 300, 400, 500,
  // 600, 600, 500, 400, 300 (peak 600 at the loss and b4).
  const problem p = identical_chain(4);
  REQUIRE(p.baseline_peak() == 600);
  SUBCASE("at the baseline peak the LRU cache keeps everything: no copy, no stall") {
    const plan pl = run("superneurons", p, dev, 600);
    const report r = simulate(p, pl, dev, 600);
    CHECK(r.feasible);
    CHECK(r.time_us == 140);
    CHECK(r.swapped_out_bytes == 0);
    CHECK(r.recomputed_ops == 0);
  }
  SUBCASE("at 500 B the loss needs 100 B: x, the least recently used, leaves") {
    // x is offloaded over [0,100] (d2h, 1 B/µs); the loss waits for it:
    // f1..f4 [0,40], loss [100,120], b4 [120,140], b3 [140,160]. x comes
    // back one op ahead of b1, started by b3's end: [160,260]; b2
    // [160,180], b1 [260,280]. Peak 500 B (a1..a4 + g4 at the loss).
    const plan pl = run("superneurons", p, dev, 500);
    const report r = simulate(p, pl, dev, 500);
    CHECK(r.feasible);
    CHECK(r.swapped_out_bytes == 100);
    CHECK(r.swapped_in_bytes == 100);
    CHECK(r.time_us == 280);
    CHECK(r.peak_bytes == 500);
    CHECK(validate(p, pl, dev, 500).ok);
  }
  SUBCASE("at 400 B f4 needs x's 100 B and the loss a1's, in LRU order") {
    // x out [0,100], a1 out [100,200]; f4 waits for x: [100,110]; the loss
    // for a1: [200,220]; b4 [220,240]; a1 back [240,340] (ahead of b2), x
    // [340,440] (ahead of b1, the h2d link busy until 340); b3 [240,260],
    // b2 [340,360], b1 [440,460].
    const plan pl = run("superneurons", p, dev, 400);
    const report r = simulate(p, pl, dev, 400);
    CHECK(r.feasible);
    CHECK(r.swapped_out_bytes == 200);
    CHECK(r.time_us == 460);
    CHECK(r.peak_bytes == 400);
    CHECK(validate(p, pl, dev, 400).ok);
  }
}

TEST_CASE("every baseline's plan on zoo models passes the validator") {
  const device_spec& titan = find_device("titan-rtx");
  for (const char* name : {"vgg16", "resnet50"}) {
    model::options opt;
    opt.batch = 4;
    const problem p = compile(model::build(name, opt, titan));
    const bytes_t base = p.baseline_peak();
    // Search planners (home) with a small swarm, so that the test stays quick.
    planner_options o;
    o.extra = {{"iterations", "3"}, {"particles", "4"}};
    for (const auto& entry : planners()) {
      CAPTURE(name);
      CAPTURE(entry.name);
      // With no budget to speak of, every plan is valid and fits.
      const plan free_plan = entry.run(p, titan, unlimited, o);
      // The exact oracles take chains (revolve) and graphs of up to 120 ops
      // (milp; vgg16 has 110); test_oracles.cpp sweeps their budgets.
      if (entry.name == "revolve" || (entry.name == "milp" && p.num_steps() > 120)) {
        CHECK(free_plan.kind == failure_kind::planner_gave_up);
        CHECK(free_plan.reason.find(entry.name == "revolve" ? "not a chain" : "max-ops") != std::string::npos);
        continue;
      }
      REQUIRE(free_plan.feasible);
      CHECK(validate(p, free_plan, titan, unlimited).ok);
      CHECK(simulate(p, free_plan, titan, unlimited).peak_live_bytes <= base);  // best_peak: the arena, with rounding
      if (entry.name == "milp") continue;
      for (int percent = 40; percent <= 100; percent += 10) {
        CAPTURE(percent);
        const bytes_t budget = base * percent / 100;
        const plan pl = entry.run(p, titan, budget, o);
        const report r = simulate(p, pl, titan, budget);
        if (!pl.feasible) {
          CHECK_FALSE(pl.reason.empty());
          CHECK_FALSE(r.feasible);
          continue;
        }
        CHECK(r.feasible);
        CHECK(r.peak_bytes <= budget);
        CHECK(pl.best_peak == r.peak_bytes);
        const validation v = validate(p, pl, titan, budget);
        CHECK(v.ok);
        CHECK(v.peak_bytes == r.peak_bytes);
      }
    }
  }
}

TEST_CASE("whole_tensor_builder writes plan_builder's plans: the same actions and waits, in the same order") {
  // Every saved activation kept, swapped or freed at random after the
  // forward pass is done with it; both builders under the same emitter, on
  // models with multi-input ops and on a DDP rank (its all-reduces run on
  // the communication stream: the cross-stream waits).
  const device_spec& titan = find_device("titan-rtx");
  const cluster_spec& a100 = find_cluster("a100-node");
  std::vector<std::pair<std::string, problem>> problems;
  for (const char* name : {"resnet50", "inception_v3", "bert-base"}) {
    model::options opt;
    opt.batch = 4;
    problems.emplace_back(name, compile(model::build(name, opt, titan)));
  }
  model::options opt;
  opt.batch = 4;
  const graph single = model::build("resnet50", opt, titan);
  const distributed::data_parallel_options ddp{.mode = distributed::data_parallel::ddp, .group = {&a100, 4}};
  const graph rank = distributed::data_parallel_rank(single, distributed::listed_order(single), ddp);
  problems.emplace_back("resnet50 ddp rank", compile(rank, distributed::listed_order(rank)));
  std::uint64_t rng = 11;
  std::int64_t swap_ins = 0;
  std::int64_t recomputes = 0;
  std::int64_t across = 0;  // waits of a compute on a maker on another stream
  for (const auto& [name, p] : problems) {
    CAPTURE(name);
    const detail::baselines::forward_backward_uses uses(p);
    for (int k = 0; k < 6; ++k) {
      std::vector<int> how(p.num_tensors(), 0);  // 0 keep, 1 swap, 2 free
      for (std::size_t t = 0; t < p.num_tensors(); ++t) {
        const auto ti = static_cast<index_t>(t);
        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
        const int r = static_cast<int>((rng >> 33) % 3);
        if (uses.saved_for_backward(p, ti)) how[t] = r == 2 && !uses.droppable(p, ti) ? 1 : r;
      }
      const auto evict = [&](index_t s, auto& em) {
        for (std::size_t t = 0; t < p.num_tensors(); ++t) {
          const auto ti = static_cast<index_t>(t);
          if (how[t] == 0 || uses.forward_done(p, ti) != s) continue;
          how[t] == 1 ? static_cast<void>(em.swap_out(ti)) : em.free(ti);
        }
      };
      const bool chains = k % 2 == 0;
      const plan fast = detail::baselines::emit_evictions(p, "x", unlimited, evict, chains).take();
      const plan walked = detail::baselines::emit_evictions<plan_builder>(p, "x", unlimited, evict, chains).take();
      REQUIRE(fast.actions.size() == walked.actions.size());
      for (std::size_t a = 0; a < fast.actions.size(); ++a) {
        CHECK(fast.actions[a].kind == walked.actions[a].kind);
        CHECK(fast.actions[a].step == walked.actions[a].step);
        CHECK(fast.actions[a].tensor == walked.actions[a].tensor);
        swap_ins += fast.actions[a].kind == action_kind::swap_in ? 1 : 0;
        recomputes += fast.actions[a].kind == action_kind::recompute ? 1 : 0;
        for (const index_t w : fast.waits_of(a)) {
          const action& maker = fast.actions[static_cast<std::size_t>(w)];
          const bool ops = stream_of(fast.actions[a].kind) == stream_kind::compute &&
                           stream_of(maker.kind) == stream_kind::compute;
          across += ops && stream_of(p, fast.actions[a]) != stream_of(p, maker) ? 1 : 0;
        }
      }
      CHECK(fast.wait_begin == walked.wait_begin);
      CHECK(fast.waits == walked.waits);
      CHECK(fast.decisions == walked.decisions);
      const report r = simulate(p, fast, titan, unlimited);
      CHECK(r.feasible);
      const validation v = validate(p, fast, titan, unlimited);
      CHECK(v.ok);
      CHECK(v.time_us == doctest::Approx(r.time_us));
    }
  }
  CHECK(swap_ins > 1000);
  CHECK(recomputes > 1000);
  CHECK(across > 0);
}

TEST_CASE("every baseline's plan on every zoo model passes the validator") {
  // Batch 2, at 60 % of the baseline peak and with no limit.
  const device_spec& titan = find_device("titan-rtx");
  for (const std::string_view name : model::names()) {
    model::options opt;
    opt.batch = 2;
    const problem p = compile(model::build(name, opt, titan));
    for (const char* planner : {"none", "vdnn-conv", "vdnn-all", "checkpoint", "superneurons"}) {
      CAPTURE(name);
      CAPTURE(planner);
      for (const bytes_t budget : {unlimited, p.baseline_peak() * 6 / 10}) {
        const plan pl = run(planner, p, titan, budget);
        const report r = simulate(p, pl, titan, budget);
        CHECK(r.feasible == pl.feasible);
        if (!pl.feasible) {
          CHECK_FALSE(pl.reason.empty());
          continue;
        }
        const validation v = validate(p, pl, titan, budget);
        CHECK(v.ok);
        CHECK(v.peak_bytes == r.peak_bytes);
      }
      CHECK(run(planner, p, titan, unlimited).feasible);
    }
  }
}
