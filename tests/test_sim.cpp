// Tests of memplan/sim (simulator, report) and the report's JSON and Chrome
// trace forms. Every number is worked by hand in the comments; the graphs
// and the device are described in sim_fixtures.hpp.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "memplan/plan_builder.hpp"
#include "memplan/io/report_json.hpp"
#include "memplan/io/trace.hpp"
#include "memplan/sim/simulator.hpp"
#include "memplan/sim/validator.hpp"
#include "sim_fixtures.hpp"

namespace {

using namespace memplan;
namespace chain = memplan::test::chain;
namespace residual = memplan::test::residual;

using memplan::test::dev;

/// Device memory in use at time t: the last curve point at or before t.
bytes_t memory_at(const report& r, double t) {
  bytes_t b = 0;
  for (const memory_point& m : r.memory_curve) {
    if (m.time_us <= t) b = m.bytes;
  }
  return b;
}

using memplan::test::record_all;

}  // namespace

TEST_CASE("keep-all costs exactly the baseline") {
  SUBCASE("chain") {
    const problem p = chain::make();
    REQUIRE(p.baseline_peak() == 400);
    const report r = simulate(p, keep_all_plan(p, 1000), dev, 1000);
    CHECK(r.feasible);
    CHECK(r.failure.empty());
    CHECK(r.peak_bytes == 400);
    CHECK(r.baseline_peak_bytes == 400);
    CHECK(r.time_us == 1100);
    CHECK(r.baseline_time_us == 1100);
    CHECK(r.overhead == 0);
    CHECK(r.stall_us == 0);
    CHECK(r.swapped_out_bytes == 0);
    CHECK(r.recomputed_ops == 0);
  }
  SUBCASE("residual block with parameters and workspace") {
    const problem p = residual::make();
    REQUIRE(p.baseline_peak() == 540);
    const report r = simulate(p, keep_all_plan(p, 540), dev, 540);
    CHECK(r.feasible);
    CHECK(r.peak_bytes == 540);  // at `add`: w1 + w2 + a + b + c + d, see sim_fixtures.hpp
    CHECK(r.time_us == 580);
    CHECK(r.stall_us == 0);
  }
}

TEST_CASE("a swap that overlaps fully costs no time") {
  // swap_out a1 waits for f1 and runs on d2h over [100, 200] beside f2
  // (100 B at 1 B/µs). a1 is released once f2, its last reader so far, ends
  // at 400. swap_in a1 is triggered by the end of f3 (700) and runs over
  // [700, 800], hidden behind b3 [700, 1000]; b2 starts at 1000 as without
  // the swap. Memory during f3 is a2 + a3 = 200 B instead of 300; at 700,
  // b3 (+g2) and the swap-in (+a1) bring it to a2 + a3 + g2 + a1 = 400 B.
  const problem p = chain::make();
  const report r = simulate(p, chain::swap_a1(p, chain::f3, 1000), dev, 1000, record_all);
  CHECK(r.feasible);
  CHECK(r.time_us == 1100);
  CHECK(r.stall_us == 0);
  CHECK(r.overhead == 0);
  CHECK(r.peak_bytes == 400);
  CHECK(r.swapped_out_bytes == 100);
  CHECK(r.swapped_in_bytes == 100);
  CHECK(memory_at(r, 500) == 200);
  CHECK(memory_at(r, 1100) == 0);
  REQUIRE(r.timeline.size() == 7);
  // Start order: f1 0, f2 100, swap_out 100, f3 400, b3 700, swap_in 700, b2 1000.
  CHECK(r.timeline[2].action == 2);
  CHECK(r.timeline[2].stream == stream_kind::d2h);
  CHECK(r.timeline[2].start_us == 100);
  CHECK(r.timeline[2].end_us == 200);
  CHECK(r.timeline[5].action == 5);
  CHECK(r.timeline[5].stream == stream_kind::h2d);
  CHECK(r.timeline[5].start_us == 700);
  CHECK(r.timeline[5].end_us == 800);
  CHECK(r.timeline[6].start_us == 1000);
}

TEST_CASE("a late swap-in stalls the compute stream") {
  // The swap-in is triggered by the end of b3 (1000), runs [1000, 1100],
  // and b2 waits for it: b2 runs [1100, 1200]. Time 1200 µs; the compute
  // stream is busy 1100 µs, so it stalls 100 µs; overhead 1200/1100 - 1.
  // Memory: at b3 (700) a1 is gone: a2 + a3 + g2 = 300; at 1000 a2 and a3
  // die (100 left), the swap-in adds 100; at 1100 b2 adds g1: 300. Peak 300.
  const problem p = chain::make();
  const report r = simulate(p, chain::swap_a1(p, chain::b3, 300), dev, 300);
  CHECK(r.feasible);
  CHECK(r.time_us == 1200);
  CHECK(r.stall_us == 100);
  CHECK(r.overhead == doctest::Approx(1.0 / 11.0));
  CHECK(r.peak_bytes == 300);
  CHECK(r.baseline_time_us == 1100);
  // Without the baselines (a search's numbers-only run): the same time and
  // peak, the problem's baseline peak and time not counted, no overhead.
  const report bare = simulator().run(p, chain::swap_a1(p, chain::b3, 300), dev, 300, {.baselines = false});
  CHECK(bare.time_us == 1200);
  CHECK(bare.peak_bytes == 300);
  CHECK(bare.baseline_peak_bytes == 0);
  CHECK(bare.baseline_time_us == 0);
  CHECK(bare.overhead == 0);

  // One byte less and b3 cannot allocate g2 at 700: 200 B in use, nothing
  // in flight to free.
  const report oom = simulate(p, chain::swap_a1(p, chain::b3, 299), dev, 299);
  CHECK_FALSE(oom.feasible);
  CHECK(oom.kind == failure_kind::out_of_memory);
  CHECK(oom.failure ==
        "out of memory at action 4 (compute 'b3'), at 700 us: needs 100 B (1 B more than is free), 200 B in use, "
        "budget 299 B");
  CHECK(std::isnan(oom.overhead));  // a plan that does not run has no overhead
  CHECK(io::to_json(oom).at("overhead").is_null());
}

TEST_CASE("an allocation waits for in-flight frees") {
  // The early-triggered swap-in of the first case, under a 300 B budget. At
  // 700 b3 starts first (issued first): 200 + g2 = 300 B. The swap-in needs
  // 100 B more and waits until b3 ends at 1000 and frees a2 and a3 (100 B
  // left); it runs [1000, 1100] and b2 [1100, 1200]: 100 µs of stall.
  const problem p = chain::make();
  const report r = simulate(p, chain::swap_a1(p, chain::f3, 300), dev, 300, record_all);
  CHECK(r.feasible);
  CHECK(r.time_us == 1200);
  CHECK(r.stall_us == 100);
  CHECK(r.peak_bytes == 300);
  CHECK(r.timeline[5].action == 5);
  CHECK(r.timeline[5].start_us == 1000);
}

TEST_CASE("a recompute costs its op's time and saves its output's memory") {
  // free a1 after f2 (at 400); recompute f1 before b2: [1000, 1100], b2
  // [1100, 1200]. Time 1200 = 1100 + 100 of recompute, no stall. x (10 B)
  // stays until the recompute, its last reader, ends. Memory: f2 at 100:
  // x + a1 + a2 = 210; f3 at 400 after a1 goes: x + a2 + a3 = 210; b3 at
  // 700: x + a2 + a3 + g2 = 310 (peak); recompute at 1000: x + g2 + a1 =
  // 210; b2 at 1100 after x goes: g2 + a1 + g1 = 300.
  const problem p = chain::make();
  const report r = simulate(p, chain::recompute_a1(p, 310), dev, 310);
  CHECK(r.feasible);
  CHECK(r.time_us == 1200);
  CHECK(r.stall_us == 0);
  CHECK(r.recompute_us == 100);
  CHECK(r.recomputed_ops == 1);
  CHECK(r.peak_bytes == 310);
  CHECK_FALSE(simulate(p, chain::recompute_a1(p, 309), dev, 309).feasible);
}

TEST_CASE("out of memory names the action, the op and the numbers") {
  // keep-all under 350 B: at b3 (700) a1 + a2 + a3 = 300 B are in use and
  // b3 needs g2 (100 B); a2 and a3 wait for b3 itself, so nothing can free.
  const problem p = chain::make();
  const report r = simulate(p, keep_all_plan(p, 350), dev, 350);
  CHECK_FALSE(r.feasible);
  CHECK(r.kind == failure_kind::out_of_memory);
  CHECK(r.failure ==
        "out of memory at action 3 (compute 'b3'), at 700 us: needs 100 B (50 B more than is free), 300 B in use, "
        "budget 350 B");
  CHECK(r.peak_bytes == 300);
  // The tensors without a producer alone (x, 10 B) do not fit 5 B.
  const report at_start = simulate(p, keep_all_plan(p, 5), dev, 5);
  CHECK(at_start.kind == failure_kind::out_of_memory);
  CHECK(at_start.failure == "out of memory at time 0: the tensors without a producer need 10 B, budget 5 B");
}

TEST_CASE("out of memory counts only the frees that happened (workspace of actions not started)") {
  // Found by the property tests (issue 5): the message subtracted the
  // workspace of every action that never started. keep-all on the residual
  // block under 399 B: after conv1, x is dead, so w1 + w2 + a = 140 B are in
  // use; conv2 needs b (200) + its workspace (60) = 260 B, 1 B too many.
  const problem p = residual::make();
  const report r = simulate(p, keep_all_plan(p, 399), dev, 399);
  CHECK(r.kind == failure_kind::out_of_memory);
  CHECK(r.failure ==
        "out of memory at action 1 (compute 'conv2'), at 100 us: needs 260 B (1 B more than is free), 140 B in use, "
        "budget 399 B");
  CHECK(r.peak_bytes == 220);  // during conv1: x + w1 + w2 + a + its workspace
}

TEST_CASE("a split op costs the split model's time and one part's workspace") {
  // One op, 300 µs, workspace 51 B: x (10 B) -> y (100 B). Whole: peak
  // 10 + 100 + 51 = 161. In 2 parts: 2 * 150 µs + 1 launch (5 µs) = 305 µs
  // (cost/split.hpp), workspace ceil(51 / 2) = 26: peak 136.
  test::graph_maker m;
  const index_t x = m.tensor("x", 10, tensor_kind::input);
  const index_t y = m.tensor("y", 100, tensor_kind::activation);
  m.op("big", 300, {x}, {y}, 51);
  const problem p = m.compile();
  CHECK(simulate(p, keep_all_plan(p, 200), dev, 200).peak_bytes == 161);
  plan_builder b(p, "split", 200);
  b.compute(0, 2);
  const report r = simulate(p, std::move(b).finish(), dev, 200);
  CHECK(r.feasible);
  CHECK(r.time_us == 305);
  CHECK(r.peak_bytes == 136);
  CHECK(r.split_ops == 1);
}

TEST_CASE("a whole output of a split op is written by every micro-op: a swap-out of it waits for the last") {
  // b (backward): y (100 B) -> gw (10 B, a parameter gradient: the
  // micro-ops' sum), in 2 micro-ops (actions 1 and 2). Micro-op 0 makes gw,
  // micro-op 1 adds to it: a swap-out of gw that waits only for micro-op 0
  // would copy a partial sum while micro-op 1 writes it (TSan found such a
  // race in a tsplit plan run on host::device).
  test::graph_maker m;
  const index_t x = m.tensor("x", 10, tensor_kind::input);
  const index_t y = m.tensor("y", 100, tensor_kind::activation);
  const index_t gw = m.tensor("gw", 10, tensor_kind::parameter_gradient);
  m.op("f", 100, {x}, {y});
  m.op("b", 200, {y}, {gw}, 0, phase::backward);
  const problem p = m.compile();
  plan_builder b(p, "split", 1000);
  b.compute(0);
  b.compute(1, 2, 0);
  const index_t last = b.compute(1, 2, 1);
  const index_t out = b.swap_out(gw);
  const plan pl = std::move(b).finish();
  const auto waits = pl.waits_of(static_cast<std::size_t>(out));
  CHECK(std::ranges::find(waits, last) != waits.end());
  CHECK(simulate(p, pl, dev, 1000).feasible);
  CHECK(validate(p, pl, dev, 1000).ok);
  plan early = pl;  // the swap-out waits for micro-op 0 only
  early.waits[static_cast<std::size_t>(early.wait_begin[static_cast<std::size_t>(out)])] = last - 1;
  const report r = simulate(p, early, dev, 1000);
  CHECK(r.kind == failure_kind::invalid_plan);
  CHECK(r.failure.find("action 3 (swap_out 'gw') needs tensor 'gw' from action 2 (compute 'b'), but no wait") !=
        std::string::npos);
  const validation v = validate(p, early, dev, 1000);
  REQUIRE(v.kind == failure_kind::invalid_plan);
  CHECK(v.errors.front().find("made by action 2 (compute 'b')") != std::string::npos);
}

TEST_CASE("a later micro-op writing a whole output waits only for the micro-ops before it, also under memory waits") {
  // The check of the test above once took the *last* writer for every
  // reader, so micro-op 1 waited for itself: every plan with such a split
  // op that needed a memory wait was "invalid" (resnet101 on titan-rtx lost
  // its split plans that way). f: x (20 B) -> y (100 B), 100 µs; b: y, x ->
  // gw (10 B), 200 µs, in 2 micro-ops of (2 * 100 + 5) / 2 = 102.5 µs. x is
  // swapped out (0-20) and in again; under 130 B the swap-in waits for f to
  // end (x's first copy is released then: 20 + 100 + 20 > 130 before) and
  // runs 100-120; the micro-ops run 120-222.5 and 222.5-325 with y, x and
  // gw on the device: peak 130 B.
  test::graph_maker m;
  const index_t x = m.tensor("x", 20, tensor_kind::input);
  const index_t y = m.tensor("y", 100, tensor_kind::activation);
  const index_t gw = m.tensor("gw", 10, tensor_kind::parameter_gradient);
  m.op("f", 100, {x}, {y});
  m.op("b", 200, {y, x}, {gw}, 0, phase::backward);
  const problem p = m.compile();
  plan_builder b(p, "split", 130);
  b.compute(0);
  b.swap_out(x);
  b.swap_in(x);
  b.compute(1, 2, 0);
  b.compute(1, 2, 1);
  const plan pl = std::move(b).finish();
  const report r = simulate(p, pl, dev, 130);
  CHECK(r.kind == failure_kind::none);
  CHECK(r.time_us == 325);
  CHECK(r.peak_bytes == 130);
  CHECK(validate(p, pl, dev, 130).ok);
}

TEST_CASE("invalid plans are reported, never thrown or hung") {
  const problem p = chain::make();
  const auto failure = [&](const plan& pl) {
    const report r = simulate(p, pl, dev, 1000);
    CHECK_FALSE(r.feasible);
    CHECK(r.kind == failure_kind::invalid_plan);
    return r.failure;
  };
  SUBCASE("read after free") {
    CHECK(failure(chain::read_after_free(p, 1000)) ==
          "invalid plan: action 5 (compute 'b2'): tensor 'a1' is not on the device; action 2 (free 'a1') released "
          "it and nothing brought it back");
  }
  SUBCASE("swap-in without a swap-out") {
    plan_builder b(p, "bad", 1000);
    b.compute(chain::f1);
    b.free(chain::a1);
    b.swap_in(chain::a1);
    CHECK(failure(std::move(b).finish()) ==
          "invalid plan: action 2 (swap_in 'a1'): the tensor was never swapped out, so no host copy exists");
  }
  SUBCASE("a read that is not made to wait for its swap-in") {
    // The swap-in is triggered by b3's end and runs [1000, 1100]; b2 lacks
    // the wait and would start at 1000.
    plan pl = chain::swap_a1(p, chain::b3, 1000);
    pl.waits.pop_back();  // b2's wait on the swap-in
    pl.wait_begin.back() -= 1;
    CHECK(failure(pl) ==
          "invalid plan: action 6 (compute 'b2') needs tensor 'a1' from action 5 (swap_in 'a1'), but no wait or "
          "stream order makes it start after that ends: a wait is missing");
  }
  SUBCASE("structure") {
    plan pl = keep_all_plan(p, 1000);
    pl.waits.push_back(4);  // action 4 waits on itself
    pl.wait_begin.back() += 1;
    CHECK(failure(pl) == "invalid plan: action 4 waits on action 4, which is not an earlier action");
    pl = keep_all_plan(p, 1000);
    pl.actions.pop_back();
    pl.wait_begin.pop_back();
    CHECK(failure(pl) == "invalid plan: step 4 (op 'b2') is never computed");
    pl = keep_all_plan(p, 1000);
    pl.actions[4].step = 9;
    CHECK(failure(pl) == "invalid plan: action 4 (compute) names step 9, but the problem has 5 steps");
    pl = keep_all_plan(p, 1000);
    pl.actions[4].step = 3;
    CHECK(failure(pl) == "invalid plan: action 4 (compute 'b3'): the step is computed twice (use recompute)");
    pl = keep_all_plan(p, 1000);
    pl.wait_begin.pop_back();
    CHECK(failure(pl).starts_with("invalid plan: wait_begin must hold 6"));
  }
  CHECK_THROWS_AS(static_cast<void>(simulate(p, keep_all_plan(p, 0), dev, -1)), invalid_argument);
}

TEST_CASE("a read ordered after its swap-in only through another action's wait is valid") {
  // f1 f2, swap_out a1, f3, swap_in a1 after f3 [700, 800], b3 waiting on
  // the swap-in [800, 1100], then b2 reading a1 with no wait of its own: b3
  // precedes it on the compute stream, so the swap-in has ended (the vector
  // clocks' case; plan_builder would have b2 wait too).
  const problem p = chain::make();
  plan_builder b(p, "through-b3", 1000);
  b.compute(chain::f1);
  b.compute(chain::f2);
  b.swap_out(chain::a1);
  const index_t f3 = b.compute(chain::f3);
  const index_t in = b.swap_in(chain::a1, std::span(&f3, 1));
  b.compute(chain::b3, 1, no_index, std::span(&in, 1));
  b.compute(chain::b2);
  plan pl = std::move(b).finish();
  REQUIRE(pl.waits_of(6).size() == 1);  // b2's derived wait on the swap-in
  pl.waits.pop_back();
  pl.wait_begin.back() -= 1;
  const report r = simulate(p, pl, dev, 1000);
  CHECK(r.feasible);
  CHECK(r.time_us == 1200);
  CHECK(r.stall_us == 100);
  const validation v = validate(p, pl, dev, 1000);
  CHECK(v.ok);
  CHECK(v.time_us == 1200);
}

TEST_CASE("one verdict: plans whose timing hides a broken rule are invalid (issue 22)") {
  // The plans of sim_fixtures.hpp's `broken`: each runs, in time and in
  // memory, but breaks a rule; the validator rejects each too
  // (test_validator.cpp).
  const auto expect_invalid = [](const problem& p, const plan& pl, std::string_view needle) {
    const report r = simulate(p, pl, dev, 1000);
    CHECK_FALSE(r.feasible);
    CHECK(r.kind == failure_kind::invalid_plan);
    INFO("failure: ", r.failure);
    CHECK(r.failure.find(needle) != std::string::npos);
  };
  SUBCASE("1. an update lost: freed with only the host copy saved before it") {
    const problem p = test::sgd::make();
    expect_invalid(p, test::broken::update_lost(p),
                   "action 5 (free 'w'): loses the update of parameter 'w' by action 4 (compute 'u'), which no later "
                   "swap_out saved");
  }
  SUBCASE("1. an update lost: the swap_out saving it not ordered after it") {
    // The swap_out, waiting on nothing, runs [0, 50] while u runs [200, 220].
    const problem p = test::sgd::make();
    expect_invalid(p, test::broken::update_raced(p),
                   "action 3 (swap_out 'w') needs tensor 'w' from action 2 (compute 'u'), but no wait or stream order "
                   "makes it start after that ends");
  }
  SUBCASE("2. a parameter freed with no host copy") {
    const problem p = residual::make();
    expect_invalid(p, test::broken::parameter_lost(p), "action 1 (free 'w1'): loses parameter 'w1', which has no host copy");
  }
  SUBCASE("3. a read not ordered after the swap-in that makes it") {
    // The swap-in runs [700, 800] and b2 would start at 1000 without the wait.
    const problem p = chain::make();
    expect_invalid(p, test::broken::read_unordered(p),
                   "action 6 (compute 'b2') needs tensor 'a1' from action 5 (swap_in 'a1'), but no wait or stream "
                   "order makes it start after that ends: a wait is missing");
  }
  SUBCASE("3. a swap-in not ordered after its swap-out") {
    // The swap-out ends at 500 and f3, which the swap-in waits on, at 700.
    const problem p = chain::make();
    expect_invalid(p, test::broken::swap_in_unordered(p),
                   "action 5 (swap_in 'a1') copies back tensor 'a1' from action 2 (swap_out 'a1'), but no wait or "
                   "stream order makes it start after that ends");
  }
  SUBCASE("3. a split in place not ordered after a holder of the whole tensor") {
    // The swap-in holding a1 ends at 300, the split starts at 1000.
    const problem p = chain::make();
    expect_invalid(p, test::broken::split_unordered(p),
                   "action 6 (swap_out 'a1') splits tensor 'a1' in place while action 3 (swap_in 'a1') holds it, but "
                   "no wait or stream order makes it start after that ends");
  }
  SUBCASE("4. an update recomputed (applied twice), though marked recomputable") {
    problem p = test::sgd::make();
    p.recomputable[test::sgd::u] = 1;
    expect_invalid(p, test::broken::update_recomputed(p),
                   "action 3 (recompute 'u'): op 'u' is an update, which writes its state in place; it is never "
                   "recomputed");
  }
  SUBCASE("5. an op marked not recomputable, recomputed") {
    problem p = chain::make();
    p.recomputable[static_cast<std::size_t>(chain::f1)] = 0;
    expect_invalid(p, chain::recompute_a1(p, 1000), "action 5 (recompute 'f1'): op 'f1' is not recomputable");
  }
  SUBCASE("6. an op without split dimensions, split") {
    const problem p = test::with_split_dims(chain::make(), chain::f2, {});
    expect_invalid(p, chain::split_f2(p, 2, false),
                   "action 1 (compute 'f2'): splits op 'f2' into 2 parts along dimension 0 (the batch), which is not "
                   "one of its split dimensions");
    expect_invalid(p, chain::split_f2(p, 2, true), "action 1 (compute 'f2'): splits op 'f2' into 2 parts");
  }
  SUBCASE("6. an op split into more parts than the batch has samples") {
    // x has shape {2}: the batch is 2 samples, so 4 micro-batches would be empty.
    const problem p = chain::make(2);
    CHECK(simulate(p, chain::split_f2(p, 2, true), dev, 1000).feasible);
    expect_invalid(p, chain::split_f2(p, 4, false),
                   "action 1 (compute 'f2'): splits op 'f2' into 4 parts, more than the batch's 2 samples");
    expect_invalid(p, chain::split_f2(p, 4, true),
                   "action 1 (compute 'f2'): splits op 'f2' into 4 parts, more than the batch's 2 samples");
  }
  SUBCASE("7. a parameter left off the device at the end, not offloaded") {
    const problem p = residual::make();
    expect_invalid(p, test::broken::state_left_off_device(p),
                   "parameter 'w1' is not on the device at the end of the iteration, and offloaded_state does not "
                   "list it: action 1 (swap_out 'w1') released it and nothing brought it back");
  }
}

TEST_CASE("a simulator object gives the same answers when reused") {
  const problem p = chain::make();
  simulator sim;
  const plan late = chain::swap_a1(p, chain::b3, 300);
  const plan recompute = chain::recompute_a1(p, 310);
  for (int round = 0; round < 2; ++round) {
    CHECK(sim.run(p, late, dev, 300).time_us == 1200);
    CHECK(sim.run(p, recompute, dev, 310).peak_bytes == 310);
    CHECK_FALSE(sim.run(p, keep_all_plan(p, 350), dev, 350).feasible);
  }
}

TEST_CASE("one run gives the verdict under the budget and, where it does not fit, what the plan needs") {
  // The early swap-in of the cases above: without a budget it peaks at 400
  // B and takes 1100 µs; under 300 B it fits by waiting (1200 µs, peak 300);
  // under 299 B b3 cannot allocate g2 at 700 (200 B in use, nothing in
  // flight). keep-all needs the baseline's 400 B and 1100 µs.
  const problem p = chain::make();
  simulator sim;
  const plan early = chain::swap_a1(p, chain::f3, 300);
  unbounded_need need;
  const report fits = sim.run(p, early, dev, 1000, need);
  CHECK(fits.feasible);
  CHECK(fits.time_us == 1100);
  CHECK(fits.peak_bytes == 400);
  const report waits = sim.run(p, early, dev, 300, need);
  CHECK(waits.feasible);
  CHECK(waits.time_us == 1200);
  CHECK(waits.peak_bytes == 300);
  const report oom = sim.run(p, early, dev, 299, need);
  CHECK(oom.kind == failure_kind::out_of_memory);
  CHECK(oom.failure == sim.run(p, early, dev, 299).failure);
  CHECK(need.feasible);
  CHECK(need.peak_bytes == 400);
  CHECK(need.time_us == 1100);
  const report keep = sim.run(p, keep_all_plan(p, 350), dev, 350, need);
  CHECK_FALSE(keep.feasible);
  CHECK(need.peak_bytes == 400);
  CHECK(need.time_us == 1100);
  // An invalid plan is invalid whatever the budget.
  plan twice = keep_all_plan(p, 350);
  twice.actions.push_back(twice.actions.front());
  twice.wait_begin.push_back(twice.wait_begin.back());
  CHECK(sim.run(p, twice, dev, 350, need).kind == failure_kind::invalid_plan);
  CHECK_FALSE(need.feasible);
}

TEST_CASE("offloaded state: in host memory at the start and the end, saved after its update") {
  // x (input, 10 B); w (parameter, 50 B) and m (its momentum, 50 B), both
  // offloaded. f (100 µs): x, w -> y (100 B); b (100 µs, backward): y, w ->
  // gw (50 B); u (20 µs, update): w, gw, m. Plan: swap_in w (h2d 0-50),
  // swap_in m (50-100), f 50-150 (it waits for w), b 150-250, u 250-270,
  // swap_out w 270-320 and m 320-370 (each waits on u, which writes them).
  // Memory: 10 at the start; 60 at 0; at 50 m and y: 210; x goes at 150:
  // 200; gw at 150: 250; y goes at 250: 150; gw at 270: 100; w at 320: 50;
  // m at 370: 0. Peak 250 B, time 370 µs, 100 B each way.
  test::graph_maker mk;
  const index_t x = mk.tensor("x", 10, tensor_kind::input);
  const index_t w = mk.tensor("w", 50, tensor_kind::parameter);
  const index_t m = mk.tensor("m", 50, tensor_kind::optimizer_state);
  const index_t y = mk.tensor("y", 100, tensor_kind::activation);
  const index_t gw = mk.tensor("gw", 50, tensor_kind::parameter_gradient);
  mk.op("f", 100, {x, w}, {y});
  mk.op("b", 100, {y, w}, {gw}, 0, phase::backward);
  mk.op("u", 20, {w, gw, m}, {}, 0, phase::update);
  const problem p = mk.compile();
  const auto make = [&](bool save_w, bool swap_in_w) {
    plan_builder b(p, "hand", 1000);
    b.offload(w);
    b.offload(m);
    if (swap_in_w) b.swap_in(w);
    b.swap_in(m);
    b.compute(0);
    b.compute(1);
    b.compute(2);
    if (save_w) b.swap_out(w);
    b.swap_out(m);
    return std::move(b).finish();
  };
  const plan pl = make(true, true);
  CHECK(pl.offloaded_state == std::vector<index_t>{w, m});
  const report r = simulate(p, pl, dev, 1000, record_all);
  REQUIRE_MESSAGE(r.feasible, r.failure);
  CHECK(r.peak_bytes == 250);
  CHECK(r.time_us == 370);
  CHECK(r.swapped_in_bytes == 100);
  CHECK(r.swapped_out_bytes == 100);
  CHECK(r.offloaded_state_bytes == 100);
  CHECK(memory_at(r, 0) == 60);
  CHECK(memory_at(r, 50) == 210);
  CHECK(memory_at(r, 150) == 250);
  CHECK(memory_at(r, 320) == 50);
  CHECK(memory_at(r, 370) == 0);
  const validation v = validate(p, pl, dev, 250);
  CHECK_MESSAGE(v.ok, (v.errors.empty() ? std::string() : v.errors.front()));
  CHECK(v.peak_bytes == 250);
  CHECK(v.time_us == 370);
  CHECK_FALSE(simulate(p, pl, dev, 249).feasible);

  // Invalid to both, the simulator's message naming the rule broken.
  const auto invalid = [&](const plan& bad) {
    CHECK(validate(p, bad, dev, 1000).kind == failure_kind::invalid_plan);
    const report rb = simulate(p, bad, dev, 1000);
    CHECK(rb.kind == failure_kind::invalid_plan);
    return rb.failure;
  };
  // w left on the device at the end.
  const plan kept = make(false, true);
  CHECK(invalid(kept).find("offloaded_state 'w' is on the device at the end") != std::string::npos);
  // f reads w, which nothing brought in.
  const plan unread = make(true, false);
  CHECK(invalid(unread).find("it is offloaded state, in host memory until a swap_in brings it") != std::string::npos);
  // w's swap_out not waiting on u: the update would not be saved.
  plan early = pl;
  const index_t last = static_cast<index_t>(early.actions.size()) - 2;  // swap_out w
  REQUIRE(early.actions[static_cast<std::size_t>(last)].kind == action_kind::swap_out);
  early.waits.erase(early.waits.begin() + early.wait_begin[static_cast<std::size_t>(last)]);
  for (std::size_t a = static_cast<std::size_t>(last) + 1; a < early.wait_begin.size(); ++a) --early.wait_begin[a];
  // (The walk's end-of-iteration check says "its update, action 4 (compute
  // 'u'), is not saved"; the order check finds the race first.)
  CHECK(invalid(early).find("action 5 (swap_out 'w') needs tensor 'w' from action 4 (compute 'u'), but no wait") !=
        std::string::npos);
  // Saved after u only by stream order (behind m's swap_out, which waits on
  // u): plan.hpp asks the last swap_out of offloaded state to wait on it.
  plan_builder chained_b(p, "chained", 1000);
  chained_b.offload(w);
  chained_b.offload(m);
  chained_b.swap_in(w);
  chained_b.swap_in(m);
  for (index_t s = 0; s < 3; ++s) chained_b.compute(s);
  chained_b.swap_out(m);
  const index_t save_w = chained_b.swap_out(w);
  plan chained = std::move(chained_b).finish();
  REQUIRE(chained.waits_of(static_cast<std::size_t>(save_w)).size() == 1);
  test::drop_wait(chained, save_w, 0);
  CHECK(invalid(chained).find("its update, action 4 (compute 'u'), is not saved") != std::string::npos);
  // Not offloaded, w saved before u and dropped after it: u's write is lost.
  plan_builder stale_b(p, "stale", 1000);
  stale_b.compute(0);
  stale_b.compute(1);
  stale_b.swap_out(w);
  stale_b.swap_in(w);
  const index_t update = stale_b.compute(2);
  stale_b.free(w);
  const validation stale = validate(p, std::move(stale_b).finish(), dev, 1000);
  REQUIRE(stale.kind == failure_kind::invalid_plan);
  CHECK(stale.errors.front().find(detail::concat("loses the update of parameter 'w' by action ", update,
                                                 " (compute 'u')")) != std::string::npos);
  // Only parameters and optimizer state can be offloaded.
  plan activation = pl;
  activation.offloaded_state = {w, m, y};
  CHECK(invalid(activation)
            .find("'y') of kind activation, made by an op; only parameters and optimizer state that no op makes") !=
        std::string::npos);
}

TEST_CASE("report JSON carries the DESIGN §8 keys") {
  const problem p = chain::make();
  report r = simulate(p, chain::swap_a1(p, chain::b3, 300), dev, 300);
  nlohmann::json j = io::to_json(r);
  CHECK(j["planner"] == "swap-a1");
  CHECK(j["feasible"] == true);
  CHECK(j["budget_bytes"] == 300);
  CHECK(j["baseline_peak_bytes"] == 400);
  CHECK(j["peak_bytes"] == 300);
  CHECK(j["baseline_time_s"].get<double>() == doctest::Approx(0.0011));
  CHECK(j["time_s"].get<double>() == doctest::Approx(0.0012));
  CHECK(j["stall_s"].get<double>() == doctest::Approx(0.0001));
  CHECK(j["recompute_s"] == 0.0);
  CHECK(j["swapped_bytes"] == 100);
  CHECK(j["swapped_in_bytes"] == 100);
  CHECK(j["offloaded_state_bytes"] == 0);
  CHECK(j["recomputed_ops"] == 0);
  CHECK(j["split_ops"] == 0);
  CHECK(j["overhead"].get<double>() == doctest::Approx(1.0 / 11.0));
  CHECK_FALSE(j.contains("failure"));
  CHECK_FALSE(j.contains("failure_kind"));
  r = simulate(p, keep_all_plan(p, 350), dev, 350);
  j = io::to_json(r);
  CHECK(j["feasible"] == false);
  CHECK(j["failure_kind"] == "out_of_memory");
  CHECK(j["failure"] == r.failure);
}

TEST_CASE("Chrome trace: one track per stream, an X event per action, memory and budget counters") {
  const problem p = chain::make();
  const plan pl = chain::swap_a1(p, chain::b3, 300);
  const report r = simulate(p, pl, dev, 300, record_all);
  std::ostringstream out;
  io::write_chrome_trace(out, p, pl, r);
  const nlohmann::json trace = nlohmann::json::parse(out.str());
  int threads = 0, complete = 0, counters = 0;
  std::vector<std::pair<double, bytes_t>> budgets;
  for (const auto& e : trace.at("traceEvents")) {
    if (e["ph"] == "M" && e["name"] == "thread_name") ++threads;
    if (e["ph"] == "X") ++complete;
    if (e["ph"] == "C" && e["name"] == "device memory") ++counters;
    if (e["ph"] == "C" && e["name"] == "budget") budgets.push_back({e["ts"].get<double>(), e["args"]["bytes"].get<bytes_t>()});
    if (e["ph"] == "X" && e["name"] == "swap_in a1") {
      CHECK(e["tid"] == 2);
      CHECK(e["ts"] == 1000.0);
      CHECK(e["dur"] == 100.0);
      CHECK(e["args"]["bytes"] == 100);
    }
  }
  CHECK(threads == 3);
  CHECK(complete == 7);
  CHECK(counters == static_cast<int>(r.memory_curve.size()));
  // The budget, constant over the iteration (1100 us of ops plus the late swap-in's stall).
  CHECK(budgets == std::vector<std::pair<double, bytes_t>>{{0.0, 300}, {r.time_us, 300}});
}

TEST_CASE("arbitrary action lists never crash or hang the simulator or the validator") {
  // Random kinds, out-of-range steps and tensors, random waits, parts 0..2,
  // random budgets: every outcome must be a report (and a validation).
  const problem p = residual::make();
  std::mt19937 rng(7);
  const auto pick = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  simulator sim;
  int feasible = 0;
  for (int round = 0; round < 2000; ++round) {
    plan pl = keep_all_plan(p, 0);  // a valid start, then damage it
    const int edits = pick(0, 6);
    for (int e = 0; e < edits; ++e) {
      const action a{static_cast<action_kind>(pick(0, 5)), static_cast<index_t>(pick(-1, 7)),
                     static_cast<index_t>(pick(-1, 9)), static_cast<index_t>(pick(0, 2))};
      const std::size_t at = static_cast<std::size_t>(pick(0, static_cast<int>(pl.actions.size())));
      pl.actions.insert(pl.actions.begin() + static_cast<std::ptrdiff_t>(at), a);
      pl.wait_begin.push_back(pl.wait_begin.back());
      if (pick(0, 1) == 1) {
        pl.waits.push_back(static_cast<index_t>(pick(-1, static_cast<int>(pl.actions.size()))));
        ++pl.wait_begin.back();
      }
    }
    const bytes_t budget = pick(0, 700);
    const report r = sim.run(p, pl, dev, budget);
    if (r.feasible) ++feasible;
    else CHECK_FALSE(r.failure.empty());
    // The validator is stricter, never more lenient.
    if (validate(p, pl, dev, budget).ok) CHECK(r.feasible);
  }
  CHECK(feasible > 0);
}
