// Tests of the Capuchin planner (planners/capuchin.hpp): passive-mode
// measured execution, the Fig. 4 swap estimate (FT, Eq. 1, and the
// in-trigger), the T1..T4 MSPS update of §4.5 (Algo 2), feedback-driven
// in-trigger adjustment, and plans on zoo models and a recorded PyTorch
// graph that the validator accepts, with the §6.3.2 property. Small graphs
// use sim_fixtures.hpp's device: both links 1 B/µs, no latency.
#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "memplan/compile.hpp"
#include "memplan/cost/devices.hpp"
#include "memplan/io/graph_json.hpp"
#include "memplan/model/zoo.hpp"
#include "memplan/planners/capuchin.hpp"
#include "memplan/planners/max_batch.hpp"
#include "memplan/planners/registry.hpp"
#include "memplan/sim/simulator.hpp"
#include "memplan/sim/validator.hpp"
#include "sim_fixtures.hpp"

namespace {

using namespace memplan;
using memplan::test::dev;
using memplan::test::unlimited;
using test::check_valid;

index_t tensor_named(const problem& p, std::string_view name) {
  const auto it = std::ranges::find(p.tensor_name, name);
  REQUIRE(it != p.tensor_name.end());
  return static_cast<index_t>(it - p.tensor_name.begin());
}

// The Fig. 4 situation: T3 is evicted at its second access (f4 reads it)
// and comes back for b3. Steps (start-end µs with unlimited memory):
//   0 f1 x -> T1        0-50      6 b6 T6 -> g6         900-1100
//   1 f2 T1 -> T2      50-100     7 b5 g6, T5 -> g5   1100-1300
//   2 f3 T2 -> T3     100-200     8 b4 g5, T4 -> g4   1300-1500
//   3 f4 T3 -> T4     200-300     9 b3 g4, T3 -> g3   1500-1700
//   4 f5 T4 -> T5     300-600    10 b2 g3, T2 -> g2   1700-1800
//   5 f6 T5 -> T6     600-900
// T3 is 200 B: each copy takes 200 µs.
problem fig4() {
  test::graph_maker m;
  const index_t x = m.tensor("x", 10, tensor_kind::input);
  std::vector<index_t> t{x};
  for (const auto& [name, bytes] : {std::pair{"T1", 100}, {"T2", 100}, {"T3", 200}, {"T4", 100}, {"T5", 100},
                                    {"T6", 100}}) {
    t.push_back(m.tensor(name, bytes, tensor_kind::activation));
  }
  std::vector<index_t> g(7);
  for (const auto& [i, name] : {std::pair{6, "g6"}, {5, "g5"}, {4, "g4"}, {3, "g3"}, {2, "g2"}}) {
    g[static_cast<std::size_t>(i)] = m.tensor(name, 10, tensor_kind::gradient);
  }
  const std::pair<const char*, double> fwd[] = {{"f1", 50}, {"f2", 50}, {"f3", 100}, {"f4", 100}, {"f5", 300}, {"f6", 300}};
  for (std::size_t i = 0; i < 6; ++i) m.op(fwd[i].first, fwd[i].second, {t[i]}, {t[i + 1]});
  m.op("b6", 200, {t[6]}, {g[6]}, 0, phase::backward);
  m.op("b5", 200, {g[6], t[5]}, {g[5]}, 0, phase::backward);
  m.op("b4", 200, {g[5], t[4]}, {g[4]}, 0, phase::backward);
  m.op("b3", 200, {g[4], t[3]}, {g[3]}, 0, phase::backward);
  m.op("b2", 100, {g[3], t[2]}, {g[2]}, 0, phase::backward);
  return m.compile();
}

}  // namespace

TEST_CASE("measured execution: passive mode evicts from the start of the access list, timestamps exclude swaps") {
  // sim_fixtures' chain (live bytes per step 110, 200, 300, 400, 300) under
  // 300 B. f1 frees x (10 B); f2 and f3 fit (300 B). b3 needs g2 (100 B):
  // 100 B missing; the oldest access on the device is a1's generation and
  // a1 is 100 B, the approximate size, so a1 goes out (100 µs). b2 reads
  // a1: access failure, back in (100 µs). Time 1100 + 200 µs of swaps.
  const problem p = test::chain::make();
  const detail::capuchin::measured_execution m = detail::capuchin::measure(p, dev, 300);
  CHECK(m.failure.empty());
  CHECK(m.evictions == 1);
  CHECK(m.evicted_bytes == 100);
  CHECK(m.swap_time_us == doctest::Approx(200));
  CHECK(m.time_us == doctest::Approx(1300));
  // Starts with the swap time subtracted: 0, 100, 400, 700, 1000.
  CHECK(m.start_us == std::vector<double>{0, 100, 400, 700, 1000});
  CHECK(m.end_us == std::vector<double>{100, 400, 700, 1000, 1100});
  // a1: made by f1 (ends 100), read by f2 (starts 100) and by b2 (starts 1000).
  const auto list = m.accesses_of(test::chain::a1);
  REQUIRE(list.size() == 3);
  const detail::capuchin::tensor_access& back = m.accesses[static_cast<std::size_t>(list[2])];
  CHECK(back.count == 3);
  CHECK(back.step == test::chain::b2);
  CHECK(back.time_us == doctest::Approx(1000));
  CHECK(m.accesses[static_cast<std::size_t>(list[0])].write);
  // The access list is in time order.
  CHECK(std::ranges::is_sorted(m.accesses, {}, &detail::capuchin::tensor_access::time_us));
}

TEST_CASE("measured execution: an op that cannot fit even after evicting everything else is reported") {
  // b3 reads a3 and a2 and makes g2: 300 B that cannot leave; budget 250.
  const problem p = test::chain::make();
  const detail::capuchin::measured_execution m = detail::capuchin::measure(p, dev, 250);
  CHECK(m.failure.find("op 'b3'") != std::string::npos);
  const plan pl = detail::capuchin::plan_capuchin(p, dev, 250).result;
  CHECK(pl.kind == failure_kind::out_of_memory);
  CHECK(pl.reason.find("op 'b3'") != std::string::npos);
}

TEST_CASE("Fig. 4: FT (Eq. 1) and the in-trigger found backwards from the back-access") {
  const problem p = fig4();
  const index_t t3 = tensor_named(p, "T3");
  const detail::capuchin::measured_execution m = detail::capuchin::measure(p, dev, unlimited);
  // Live bytes peak at steps 4 and 5 (x gone; T1..T4 or T1..T5); a budget
  // one byte under the peak makes T3's time away useful.
  const bytes_t peak = p.baseline_peak();
  const detail::capuchin::memory_estimate mem(m.memory, peak - 1);
  const auto cands = detail::capuchin::identify_candidates(p, m, dev, mem);
  const auto it = std::ranges::find(cands, t3, &detail::capuchin::candidate::tensor);
  REQUIRE(it != cands.end());
  // Evicted-access: f4's read at 200 µs; back-access: b3's read at 1500 µs.
  CHECK(it->evicted_access == 3);
  CHECK(it->back_access == 9);
  CHECK(it->ideal_free_time_us == doctest::Approx(1500 - 200 - 200 - 200));

  const detail::capuchin::link_bookings idle;
  // SwapOutEndTime = 200 + 200 = 400; SwapInStartTime = 1500 - 200 = 1300,
  // which b5 ends exactly at: in-trigger b5 (step 7); FT = 1300 - 400 = 900.
  detail::capuchin::swap_estimate s = detail::capuchin::estimate_swap(m, dev, 200, *it, no_index, idle, idle);
  CHECK(s.swap_out_end_us == doctest::Approx(400));
  CHECK(s.in_trigger == 7);
  CHECK(s.swap_in_start_us == doctest::Approx(1300));
  CHECK(s.free_time_us == doctest::Approx(900));
  CHECK(s.overhead_us == doctest::Approx(0));
  CHECK(s.released_from == 5);  // f6, the first op to start after 400 µs

  // Not inside the peak: with b4 (step 8) as the earliest trigger the copy
  // starts at 1500 and ends 200 µs after the back-access.
  s = detail::capuchin::estimate_swap(m, dev, 200, *it, 8, idle, idle);
  CHECK(s.in_trigger == 8);
  CHECK(s.free_time_us == doctest::Approx(1100));
  CHECK(s.overhead_us == doctest::Approx(200));

  // A preceding swap-in holds the link over [1200, 1400]: the latest free
  // slot ends at 1200, so the copy starts at 1000; the trigger is f6 (ends
  // 900) and FT = 1000 - 400 = 600.
  detail::capuchin::link_bookings busy;
  busy.book(1200, 200);
  s = detail::capuchin::estimate_swap(m, dev, 200, *it, no_index, idle, busy);
  CHECK(s.swap_in_start_us == doctest::Approx(1000));
  CHECK(s.in_trigger == 5);
  CHECK(s.free_time_us == doctest::Approx(600));
  CHECK(s.overhead_us == doctest::Approx(0));
}

TEST_CASE("§4.5 T1..T4: choosing T2 moves T4's source to T1 and charges T1's repeats (Algo 2)") {
  // Lineage x -> T1 -> T2 -> T3 -> T4 (ops 10, 20, 30, 40 µs); T3 is read
  // only by f4, so it is gone when T4 comes back; x is read again by b1.
  test::graph_maker mk;
  const index_t x = mk.tensor("x", 10, tensor_kind::input);
  const index_t t1 = mk.tensor("T1", 100, tensor_kind::activation);
  const index_t t2 = mk.tensor("T2", 200, tensor_kind::activation);
  const index_t t3 = mk.tensor("T3", 300, tensor_kind::activation);
  const index_t t4 = mk.tensor("T4", 400, tensor_kind::activation);
  const index_t y = mk.tensor("y", 10, tensor_kind::activation);
  const index_t g5 = mk.tensor("g5", 10, tensor_kind::gradient);
  const index_t g4 = mk.tensor("g4", 10, tensor_kind::gradient);
  const index_t g2 = mk.tensor("g2", 10, tensor_kind::gradient);
  const index_t g1 = mk.tensor("g1", 10, tensor_kind::gradient);
  mk.op("f1", 10, {x}, {t1});
  mk.op("f2", 20, {t1}, {t2});
  mk.op("f3", 30, {t2}, {t3});
  mk.op("f4", 40, {t3}, {t4});
  mk.op("f5", 50, {t4}, {y});
  mk.op("b5", 10, {y}, {g5}, 0, phase::backward);     // step 5
  mk.op("b4", 10, {g5, t4}, {g4}, 0, phase::backward);  // step 6: T4's back-access
  mk.op("b2", 10, {g4, t2}, {g2}, 0, phase::backward);  // step 7: T2's
  mk.op("b1", 10, {g2, t1, x}, {g1}, 0, phase::backward);  // step 8: T1's
  const problem p = mk.compile();
  const detail::capuchin::measured_execution m = detail::capuchin::measure(p, dev, unlimited);
  // The candidate set {T1, T2, T4}, evicted after their last forward access.
  const std::vector<detail::capuchin::candidate> cands{{t1, 1, 8, 10, m.start_us[8], 0},
                                               {t2, 2, 7, 30, m.start_us[7], 0},
                                               {t4, 4, 6, 100, m.start_us[6], 0}};
  detail::capuchin::msps_recomputation rec(p, m, cands);
  // T1 from x (10 µs): MSPS 100 / 10. T2 from T1, live until b1 (20 µs):
  // 200 / 20. T4 from T2 through T3 (30 + 40 µs): 400 / 70.
  CHECK(rec.of(0).srcs == std::vector<index_t>{x});
  CHECK(rec.of(1).srcs == std::vector<index_t>{t1});
  CHECK(rec.of(2).srcs == std::vector<index_t>{t2});
  CHECK(rec.of(2).ops == std::vector<index_t>{2, 3});
  CHECK(rec.msps(0) == doctest::Approx(10.0));
  CHECK(rec.msps(1) == doctest::Approx(10.0));
  CHECK(rec.msps(2) == doctest::Approx(400.0 / 70));

  // Choose T2. T4 now starts from T1 and repeats f2: 70 + 20 = 90 µs
  // (lines 18-28). T1 is T2's source, so evicting it would repeat its 10 µs
  // once more: ext_time = 1 x 10 (lines 30-32).
  rec.choose(1);
  CHECK(rec.of(2).srcs == std::vector<index_t>{t1});
  CHECK(rec.of(2).rp_time_us == doctest::Approx(90));
  CHECK(rec.of(2).ext_time_us == doctest::Approx(0));
  CHECK(rec.msps(2) == doctest::Approx(400.0 / 90));
  CHECK(rec.of(0).ext_time_us == doctest::Approx(10));
  CHECK(rec.msps(0) == doctest::Approx(100.0 / 20));

  // Then T1: T2, already a target, now starts from x (lines 6-11); T4
  // starts from x and repeats f1: 90 + 10 = 100 µs.
  rec.choose(0);
  CHECK(rec.of(1).srcs == std::vector<index_t>{x});
  CHECK(rec.of(2).srcs == std::vector<index_t>{x});
  CHECK(rec.of(2).rp_time_us == doctest::Approx(100));
  CHECK(rec.msps(2) == doctest::Approx(4.0));
  CHECK(rec.overhead_us(2) == doctest::Approx(100));
}

TEST_CASE("§4.4: a candidate past its last access is no source; its lineage runs again") {
  // x -> A -> B (f1 10 µs, f2 20 µs). A's last access, bA at step 4,
  // comes before B's back-access, bB at step 5: A is gone when B is
  // recomputed, candidate or not, so B starts from x and runs f1 and f2
  // (30 µs, MSPS 200 / 30). Assuming A on the device (§4.4 (2)) would
  // give 20 µs and MSPS 10.
  test::graph_maker mk;
  const index_t x = mk.tensor("x", 10, tensor_kind::input);
  const index_t a = mk.tensor("A", 100, tensor_kind::activation);
  const index_t b = mk.tensor("B", 200, tensor_kind::activation);
  const index_t y = mk.tensor("y", 10, tensor_kind::activation);
  const index_t g3 = mk.tensor("g3", 10, tensor_kind::gradient);
  const index_t ga = mk.tensor("gA", 10, tensor_kind::gradient);
  const index_t gb = mk.tensor("gB", 10, tensor_kind::gradient);
  const index_t gx = mk.tensor("gx", 10, tensor_kind::gradient);
  mk.op("f1", 10, {x}, {a});
  mk.op("f2", 20, {a}, {b});
  mk.op("f3", 30, {b}, {y});
  mk.op("b3", 10, {y}, {g3}, 0, phase::backward);         // step 3
  mk.op("bA", 10, {g3, a}, {ga}, 0, phase::backward);     // step 4: A's back-access, its last
  mk.op("bB", 10, {ga, b}, {gb}, 0, phase::backward);     // step 5: B's
  mk.op("bx", 10, {gb, x}, {gx}, 0, phase::backward);     // step 6: x stays live
  const problem p = mk.compile();
  const detail::capuchin::measured_execution m = detail::capuchin::measure(p, dev, unlimited);
  const std::vector<detail::capuchin::candidate> cands{{a, 1, 4, 10, m.start_us[4], 0}, {b, 2, 5, 30, m.start_us[5], 0}};
  const detail::capuchin::msps_recomputation rec(p, m, cands);
  CHECK(rec.of(0).srcs == std::vector<index_t>{x});
  CHECK(rec.of(1).srcs == std::vector<index_t>{x});
  CHECK(rec.of(1).ops == std::vector<index_t>{0, 1});
  CHECK(rec.overhead_us(1) == doctest::Approx(30));
  CHECK(rec.msps(1) == doctest::Approx(200.0 / 30));
}

TEST_CASE("feedback: a late swap-in moves its in-trigger earlier by 5 % of its swap time per iteration") {
  // Fig. 4's T3 swapped out after f4, with the in-trigger forced to b4
  // (step 8), so its 200 µs copy misses b3 by 200 µs. Each late iteration
  // moves the wanted start 10 µs earlier (5 % of 200): from b4's end
  // (1500) to 1490 puts it at b5 (ends 1300) in iteration 2: 1300 + 200 =
  // 1500 is on time, so iteration 2 is stable.
  const problem p = fig4();
  const index_t t3 = tensor_named(p, "T3");
  const detail::capuchin::measured_execution m = detail::capuchin::measure(p, dev, unlimited);
  detail::capuchin::policy pol{{}, detail::capuchin::memory_estimate(m.memory, unlimited)};
  const detail::capuchin::candidate c{t3, 3, 9, 200, 1500, 900};
  pol.evictions.push_back({c, detail::capuchin::regeneration::swap, 8, 1100, 200});
  simulator sim;
  const detail::capuchin::guided_execution g = detail::capuchin::guide(p, m, dev, unlimited, pol, 100, sim);
  CHECK(g.iterations == 2);
  CHECK(g.trigger_moves == 1);
  // One point per iteration: 200 µs late, then on time (the 1,800 µs baseline).
  REQUIRE(g.history.size() == 2);
  CHECK(g.history[0].time_us == doctest::Approx(2000));
  CHECK(g.history[1].time_us == doctest::Approx(1800));
  CHECK(g.triggers == std::vector<index_t>{7});
  CHECK(g.sim.feasible);
  CHECK(g.sim.stall_us == doctest::Approx(0));
  CHECK(g.sim.time_us == doctest::Approx(p.baseline_time_us()));
  check_valid(p, g.result, dev, unlimited);

}

TEST_CASE("guided execution: a recomputation's source past its last access is gone, or kept until read") {
  // Fig. 4's T2 recomputed for b2 (step 10) after f3 (step 2) read it: its
  // lineage is f2 from T1, which f2 (step 1) read last. Gone (§4.4), T1
  // must be made again first: f1 (50 µs) and f2 (50 µs) run before b2,
  // 1,800 + 100 µs. Kept until the recomputation reads it, only f2 runs:
  // 1,850 µs, with T1's 100 B on the device from f1 to b2.
  const problem p = fig4();
  const index_t t1 = tensor_named(p, "T1");
  const index_t t2 = tensor_named(p, "T2");
  const detail::capuchin::measured_execution m = detail::capuchin::measure(p, dev, unlimited);
  detail::capuchin::policy pol{{}, detail::capuchin::memory_estimate(m.memory, unlimited)};
  const detail::capuchin::candidate c{t2, 2, 10, 100, 1700, 0};
  pol.evictions.push_back({c, detail::capuchin::regeneration::recompute, no_index, 0, 50});
  const std::vector<index_t> triggers{no_index};
  for (const bool keep : {false, true}) {
    CAPTURE(keep);
    const detail::capuchin::emitted_plan e = detail::capuchin::emit_guided(p, pol, triggers, unlimited, keep);
    const report r = simulate(p, e.result, dev, unlimited);
    REQUIRE(r.feasible);
    CHECK(r.recomputed_ops == (keep ? 1 : 2));
    CHECK(r.time_us == doctest::Approx(keep ? 1850 : 1900));
    const bool t1_freed = std::ranges::any_of(
        e.result.actions, [&](const action& a) { return a.kind == action_kind::free && a.tensor == t1; });
    CHECK(t1_freed == !keep);
    check_valid(p, e.result, dev, unlimited);
  }
}

TEST_CASE("capuchin on the Fig. 4 graph: swaps T3 with the in-trigger of Eq. 1 and costs nothing") {
  const problem p = fig4();
  const bytes_t budget = p.baseline_peak() - 1;
  const detail::capuchin::outcome out = detail::capuchin::plan_capuchin(p, dev, budget);
  REQUIRE(out.result.feasible);
  CHECK(out.swaps >= 1);
  CHECK(out.recomputations == 0);
  CHECK(out.sim.overhead == doctest::Approx(0));
  CHECK(out.sim.peak_bytes <= budget);
  check_valid(p, out.result, dev, budget);
}

TEST_CASE("capuchin on zoo models: validator-clean plans under the P100's 16 GiB, hybrid when swaps cannot hide") {
  const device_spec& p100 = find_device("p100");
  struct run_case {
    const char* model;
    int batch;
  };
  for (const run_case rc : {run_case{"resnet50", 300}, run_case{"resnet50", 500}, run_case{"inception_v3", 400}}) {
    CAPTURE(rc.model);
    CAPTURE(rc.batch);
    model::options o;
    o.batch = rc.batch;
    const problem p = compile(model::build(rc.model, o, p100));
    REQUIRE(p.baseline_peak() > p100.memory_bytes);
    const detail::capuchin::outcome out = detail::capuchin::plan_capuchin(p, p100, p100.memory_bytes);
    REQUIRE(out.result.feasible);
    CHECK(out.sim.peak_bytes <= p100.memory_bytes);
    CHECK(out.guided_iterations >= 1);
    CHECK(out.guided_iterations <= detail::capuchin::max_guided_iterations);
    CHECK(out.result.history.size() == static_cast<std::size_t>(out.guided_iterations));
    check_valid(p, out.result, p100, p100.memory_bytes);
    // Through the registry, the same plan.
    const plan again = find_planner("capuchin").run(p, p100, p100.memory_bytes, planner_options{});
    CHECK(again.actions.size() == out.result.actions.size());
  }
}

TEST_CASE("capuchin at a batch where the host link saturates: a valid hybrid plan after re-plans") {
  // resnet50 at batch 1000 on the P100: 80.9 GiB with no planning, five
  // times the memory; swaps alone cannot be hidden and the first guided
  // iterations run out of memory, so the plan comes from a re-plan.
  const device_spec& p100 = find_device("p100");
  model::options o;
  o.batch = 1000;
  const problem p = compile(model::build("resnet50", o, p100));
  const detail::capuchin::outcome out = detail::capuchin::plan_capuchin(p, p100, p100.memory_bytes);
  REQUIRE(out.result.feasible);
  CHECK(out.replans >= 1);
  CHECK(out.replans <= detail::capuchin::max_replans);
  CHECK(out.swaps > 0);
  CHECK(out.recomputations > 0);
  CHECK(out.sim.peak_bytes <= p100.memory_bytes);
  check_valid(p, out.result, p100, p100.memory_bytes);
}

TEST_CASE("§6.3.2: at 1.2x the largest batch `none` fits, capuchin only swaps and costs at most 3 %") {
  const device_spec& p100 = find_device("p100");
  for (const char* name : {"resnet50", "bert-base", "vgg16"}) {
    CAPTURE(name);
    model::options o;
    // The largest batch whose baseline peak fits 16 GiB.
    const int largest = max_batch([&](int batch) {
                          o.batch = batch;
                          return compile(model::build(name, o, p100)).baseline_peak() <= p100.memory_bytes;
                        }).batch;
    o.batch = largest * 6 / 5;
    const problem p = compile(model::build(name, o, p100));
    const detail::capuchin::outcome out = detail::capuchin::plan_capuchin(p, p100, p100.memory_bytes);
    REQUIRE(out.result.feasible);
    CHECK(out.recomputations == 0);
    CHECK(out.sim.recomputed_ops == 0);
    CHECK(out.swaps > 0);
    CHECK(out.sim.overhead <= 0.03);
    check_valid(p, out.result, p100, p100.memory_bytes);
  }
}

TEST_CASE("capuchin on a recorded PyTorch execution order (memplan-graph file)") {
  const auto doc = io::read_graph_file(std::string(MEMPLAN_SOURCE_DIR) + "/tests/data/pytorch_cnn.json");
  const problem p = compile(doc.graph, doc.schedule);
  const device_spec& d = find_device("p100");
  const bytes_t budget = p.baseline_peak() * 9 / 10;
  const detail::capuchin::outcome out = detail::capuchin::plan_capuchin(p, d, budget);
  REQUIRE(out.result.feasible);
  CHECK(out.sim.peak_bytes <= budget);
  CHECK(out.swaps + out.recomputations > 0);
  check_valid(p, out.result, d, budget);
}
