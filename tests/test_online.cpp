// Tests of the online runtime and its policies (DTR, DELTA): heuristics and
// the director on hand-built states, the runtime on a chain worked by hand,
// and plans on zoo models, every one accepted by the validator.
#include <doctest/doctest.h>

#include <limits>
#include <string>
#include <vector>

#include "memplan/compile.hpp"
#include "memplan/cost/devices.hpp"
#include "memplan/io/plan_json.hpp"
#include "memplan/model/zoo.hpp"
#include "memplan/planners/registry.hpp"
#include "memplan/planners/dtr.hpp"
#include "memplan/sim/simulator.hpp"
#include "memplan/sim/validator.hpp"
#include "sim_fixtures.hpp"

namespace {

using namespace memplan;
using online::online_state;
using online::release_kind;
using online::residence;
using test::check_valid;
// sim_fixtures.hpp's three layers: f1 x(100) -> a1(200), f2 a1 -> a2(200),
// f3 a2 -> a3(100), b3 a3 -> g3, b2 g3,a2 -> g2, b1 g2,a1 -> g1, b0 g1,x ->
// g0 (gradients 100 B), every op 100 µs. Baseline peak 700 B.
using test::three_layers;

// A forward chain read by one backward op (steps in order):
//   0 f1 100 µs: x(100 B input) -> a1(200 B)
//   1 f2 300 µs: a1 -> a2(100 B)
//   2 f3  50 µs: a2 -> a3(400 B)
//   3 b   10 µs: a3, a2, a1 -> g(100 B)
namespace fan {
inline constexpr index_t x = 0, a1 = 1, a2 = 2, a3 = 3, g = 4;
problem make() {
  test::graph_maker m;
  m.tensor("x", 100, tensor_kind::input);
  m.tensor("a1", 200, tensor_kind::activation);
  m.tensor("a2", 100, tensor_kind::activation);
  m.tensor("a3", 400, tensor_kind::activation);
  m.tensor("g", 100, tensor_kind::gradient);
  m.op("f1", 100, {x}, {a1});
  m.op("f2", 300, {a1}, {a2});
  m.op("f3", 50, {a2}, {a3});
  m.op("b", 10, {a3, a2, a1}, {g}, 0, phase::backward);
  return m.compile();
}
// The state after f3, 50 µs later: now 500 µs; last access x 0, a1 400
// (read by f2), a2 450 (read by f3), a3 450 (made by f3).
online_state after_forward(const problem& p, bool offloads) {
  online_state s(p, 1000, offloads);
  s.set_step(0);
  s.advance(100);
  s.make_resident(a1);
  s.set_step(1);
  s.advance(300);
  s.touch(a1);
  s.make_resident(a2);
  s.set_step(2);
  s.advance(50);
  s.touch(a2);
  s.make_resident(a3);
  s.advance(50);
  return s;
}
}  // namespace fan

// Links of 0.01 GB/s (10 B/µs), no latency.
device_spec slow_link_device() {
  device_spec d = test::byte_per_us_device();
  d.d2h = {0.01, 0.0};
  d.h2d = {0.01, 0.0};
  return d;
}

TEST_CASE("online state: staleness, costs and the candidate index") {
  const problem p = fan::make();
  online_state s = fan::after_forward(p, false);
  CHECK(s.now_us() == doctest::Approx(500));
  CHECK(s.used() == 800);  // x 100 + a1 200 + a2 100 + a3 400
  CHECK(s.staleness_us(fan::a1) == doctest::Approx(100));
  CHECK(s.staleness_us(fan::a2) == doctest::Approx(50));
  // DTR: x has no producer, so it is no candidate; without offloading neither.
  CHECK(s.candidates().size() == 3);
  CHECK_FALSE(s.candidate(fan::x));
  CHECK(s.cost_us(fan::a1) == doctest::Approx(100));
  CHECK(s.cost_us(fan::a3) == doctest::Approx(50));

  // Evicting a2 puts it in a class of cost 300: a1 (its parent) and a3 (its
  // child) now cost their own time plus 300.
  s.make_evicted(fan::a2);
  CHECK(s.used() == 700);
  CHECK(s.where(fan::a2) == residence::evicted);
  CHECK(s.cost_us(fan::a1) == doctest::Approx(400));
  CHECK(s.cost_us(fan::a3) == doctest::Approx(350));
  // a1 joins a2's class (300 + 100): a3's neighbourhood is now 50 + 400.
  s.make_evicted(fan::a1);
  CHECK(s.cost_us(fan::a3) == doctest::Approx(450));
  // a2 comes back: it leaves the class (400 - 300); a3's parent is resident.
  s.make_resident(fan::a2);
  CHECK(s.cost_us(fan::a3) == doctest::Approx(50));
  CHECK(s.cost_us(fan::a2) == doctest::Approx(300 + 100));  // its evicted parent a1

  // Pinned tensors leave the index and come back when unpinned.
  s.pin(fan::a3);
  CHECK_FALSE(s.candidate(fan::a3));
  s.unpin(fan::a3);
  CHECK(s.candidate(fan::a3));
}

TEST_CASE("dtr: h = c / (m s) picks the cheapest, largest, stalest tensor") {
  const problem p = fan::make();
  const online_state s = fan::after_forward(p, false);
  // h(a1) = 100 / (200 * 100) = 0.005, h(a2) = 300 / (100 * 50) = 0.06,
  // h(a3) = 50 / (400 * 50) = 0.0025.
  CHECK(dtr_policy::score(100, 200, 100) == doctest::Approx(0.005));
  const dtr_policy policy;
  const online::release r = policy.choose(s);
  CHECK(r.tensor == fan::a3);
  CHECK(r.kind == release_kind::evict);
}

TEST_CASE("delta: the three filters of Eq. 1-3") {
  const problem p = fan::make();
  const online_state s = fan::after_forward(p, true);
  const device_spec d = slow_link_device();
  CHECK(s.candidate(fan::x));  // offloadable
  const auto pick = [&](delta_policy::filter f) {
    return delta_policy(d, {.heuristic = f}).filter_tensor(s);
  };
  // base 1/(m s): x 1/(100*500), a1 1/(200*100), a2 1/(100*50), a3 1/(400*50):
  // x has the smallest (2e-5).
  CHECK(pick(delta_policy::filter::base) == fan::x);
  // lru 1/s: x is the stalest (500 µs).
  CHECK(pick(delta_policy::filter::lru) == fan::x);
  // greedy 1/m: a3 is the largest (400 B).
  CHECK(pick(delta_policy::filter::greedy) == fan::a3);
}

TEST_CASE("delta: the cost filter, min(h_r, h_o), and fetching the cheaper way") {
  const problem p = fan::make();
  online_state s = fan::after_forward(p, true);
  const device_spec d = slow_link_device();  // 10 B/µs each way
  const delta_policy policy(d, {});          // filter cost, all of the link: c_s(m) = m / 5
  CHECK(policy.swap_cost_us(100) == doctest::Approx(20));
  // min(c_r, c_s) / (m s): x min(inf, 20) / (100 * 500) = 4e-4; a1 min(100,
  // 40) / (200 * 100) = 2e-3; a2 min(300, 20) / (100 * 50) = 4e-3; a3 min(50,
  // 80) / (400 * 50) = 2.5e-3.
  CHECK(delta_policy::h_cost(300, 20, 100, 50) == doctest::Approx(4e-3));
  CHECK(policy.filter_tensor(s) == fan::x);
  CHECK(policy.direct(s, fan::x) == release_kind::offload);  // evict_pinned
  s.make_offloaded(fan::x);
  // Then a1 (2e-3), offloaded: F = 100 / 40 > 1. Eq. 1 scores a1 and a3
  // alike (1 / 20,000) though a3 costs half as much to bring back.
  CHECK(policy.filter_tensor(s) == fan::a1);
  CHECK(policy.direct(s, fan::a1) == release_kind::offload);
  // An offloaded tensor comes back the cheaper way: a2 by a reload (10 µs,
  // where §5.5's rule recomputes it: f2, 300 µs); a3 too at full bandwidth
  // (40 µs against f3's 50), and by recomputing where the link runs at 35 %
  // (114 µs).
  s.make_offloaded(fan::a2);
  s.make_offloaded(fan::a3);
  CHECK(policy.fetch(s, fan::a2) == online::fetch_kind::reload);
  CHECK(policy.fetch(s, fan::a3) == online::fetch_kind::reload);
  const delta_policy slow(d, {.link_efficiency = 0.35});
  CHECK(slow.fetch(s, fan::a2) == online::fetch_kind::reload);
  CHECK(slow.fetch(s, fan::a3) == online::fetch_kind::recompute);
  CHECK(policy.fetch(s, fan::x) == online::fetch_kind::reload);  // cannot be recomputed
}

TEST_CASE("delta: the director (Eq. 4-6, Algo 3)") {
  const problem p = fan::make();
  online_state s = fan::after_forward(p, true);
  const device_spec d = slow_link_device();
  const delta_policy policy(d, {.link_efficiency = 0.35});  // §4.1's testbed
  // c_s(m) = m / (0.35 * 10 B/µs) out + the same back.
  CHECK(policy.swap_cost_us(400) == doctest::Approx(2 * 400 / 3.5));
  // a3: F = 50 / 228.57 = 0.219 <= 1: evict.
  CHECK(policy.decision_score(s, fan::a3) == doctest::Approx(50 / (2 * 400 / 3.5)));
  CHECK(policy.direct(s, fan::a3) == release_kind::evict);
  // a2: F = 300 / 57.14 = 5.25 > 1: offload.
  CHECK(policy.decision_score(s, fan::a2) == doctest::Approx(300 / (2 * 100 / 3.5)));
  CHECK(policy.direct(s, fan::a2) == release_kind::offload);
  // x cannot be recomputed (evict_pinned): offload.
  CHECK(policy.direct(s, fan::x) == release_kind::offload);
  // At 100 % link efficiency a3 costs 80 µs to swap: F = 0.625, still evict;
  // at 10 % it costs 800 µs.
  const delta_policy fast(d, {.link_efficiency = 1.0});
  CHECK(fast.decision_score(s, fan::a3) == doctest::Approx(50.0 / 80));
  // A tensor a prefetch brought back and no op has read (offload_pinned): evict.
  s.make_offloaded(fan::a2);
  s.make_resident(fan::a2, true);
  CHECK(s.in_flight(fan::a2));
  CHECK(s.has_host_copy(fan::a2));
  CHECK(policy.direct(s, fan::a2) == release_kind::evict);
  s.touch(fan::a2);
  CHECK(policy.direct(s, fan::a2) == release_kind::offload);
}

TEST_CASE("delta: the prefetcher (Algo 4) reloads the latest offload, bounded, under the early-start mark") {
  const problem p = fan::make();
  online_state s = fan::after_forward(p, true);  // budget 1000, 800 in use
  const device_spec d = slow_link_device();
  delta_policy one(d, {.prefetch = 1});
  delta_policy four(d, {.prefetch = 4});
  for (const index_t t : {fan::a2, fan::a1}) {  // a2 offloaded first, then a1
    s.make_offloaded(t);
    one.on_release(s, {t, release_kind::offload});
    four.on_release(s, {t, release_kind::offload});
  }
  CHECK(s.used() == 500);
  CHECK(one.prefetch(s) == no_index);  // step 2 is a forward op: no prefetching
  s.set_step(3);                       // b, backward
  // The latest offload first: a1 (200 B), 500 + 200 <= 750 (3/4 of 1000).
  CHECK(one.prefetch(s) == fan::a1);
  CHECK(four.prefetch(s) == fan::a1);
  s.make_resident(fan::a1, true);
  CHECK(s.used() == 700);
  // n = 1: a1 is in flight, so nothing more; n = 4: a2 would reach 800 > 750.
  CHECK(one.prefetch(s) == no_index);
  CHECK(four.prefetch(s) == no_index);
  // Once b has read a1 and a3 is gone (300 in use), a2 comes back too.
  s.touch(fan::a1);
  s.make_evicted(fan::a3);
  CHECK(s.used() == 300);
  CHECK(one.prefetch(s) == fan::a2);
  // A tensor brought back otherwise (recomputed, §5.5) is skipped.
  s.make_resident(fan::a2);
  CHECK(four.prefetch(s) == no_index);
}

TEST_CASE("online runtime with dtr on three layers, worked by hand") {
  const problem p = three_layers();
  const device_spec d = test::byte_per_us_device();
  dtr_policy policy;
  // Budget 600: b3 needs g3 with x, a1, a2, a3 resident (700). The
  // candidates are a1 (h = 100 / (200 * 100)) and a2 (read just now): a1
  // goes, and b1 recomputes it (f1, 100 µs) from x.
  // The allocator (byte-exact segments, test::byte_per_us_device): x, a1,
  // a2, a3 get segments [0, 100), [100, 300), [300, 500), [500, 600), the
  // arena full. g3 fits a1's segment once a1 is evicted ([100, 200), the
  // rest split off); g2 the rest of it (100 B: 100@200 and a3's 100@500 tie,
  // the lower address wins); a1 again a2's segment, freed after b2; g1 g3's
  // bytes (100@100 and 100@500 tie); g0 g2's, freed after b1 (100@200
  // before 100@500; a2's segment has 200 B). Four segments (cudaMalloc,
  // 50 µs each), none given back.
  const auto r = online::run_online(p, d, 600, policy, "dtr");
  REQUIRE(r.result.feasible);
  CHECK(r.counts.evictions == 1);
  CHECK(r.counts.recomputations == 1);
  CHECK(r.counts.offloads == 0);
  CHECK(r.result.best_peak == 600);
  CHECK(r.counts.segment_mallocs == 4);
  CHECK(r.counts.segment_frees == 0);
  CHECK(r.counts.arena_high_water == 600);
  CHECK(r.counts.live_peak == 600);
  CHECK(r.result.allocator_us == doctest::Approx(200));
  // x, a1, a2, a3, g3, g2, a1, g1, g0: allocation order (plan_layout.hpp).
  CHECK(r.result.offsets == std::vector<bytes_t>{0, 100, 300, 500, 100, 200, 300, 100, 200});
  CHECK(r.result.arena_bytes == 600);
  const report rep = simulate(p, r.result, d, 600);
  REQUIRE(rep.feasible);
  CHECK(rep.time_us == doctest::Approx(800 + 200));  // the ops, the recompute, the driver calls
  CHECK(rep.allocator_us == doctest::Approx(200));
  CHECK(rep.recompute_us == doctest::Approx(100));
  CHECK(rep.peak_bytes == 600);
  check_valid(p, r.result, d, 600);

  // Budget 400: f2 needs x (no producer: never evicted), a1 (its input,
  // pinned) and a2: 500 > 400 with nothing to release. Infeasible, reported
  // with the op, not thrown.
  dtr_policy again;
  const auto tight = online::run_online(p, d, 400, again, "dtr");
  CHECK(tight.result.kind == failure_kind::out_of_memory);
  CHECK_MESSAGE(tight.result.reason.find("op 'f2'") != std::string::npos, tight.result.reason);
}

// A chain for DTR's simulator (steps in order; backward ops may not run again):
//   0 a 1 ms: x(100 B input) -> A(100 B)   3 d 1 ms (bwd): A, C -> D(100 B)
//   1 b 2 ms: A -> B(100 B)                4 e 1 ms (bwd): B, D -> E(100 B)
//   2 c 3 ms: B -> C(100 B)
namespace dtr_chain {
inline constexpr index_t x = 0, A = 1, B = 2, C = 3, D = 4, E = 5;
problem make() {
  test::graph_maker m;
  m.tensor("x", 100, tensor_kind::input);
  for (const char* name : {"A", "B", "C", "D", "E"}) m.tensor(name, 100, tensor_kind::activation);
  m.op("a", 1000, {x}, {A});
  m.op("b", 2000, {A}, {B});
  m.op("c", 3000, {B}, {C});
  m.op("d", 1000, {A, C}, {D}, 0, phase::backward);
  m.op("e", 1000, {B, D}, {E}, 0, phase::backward);
  return m.compile();
}
}  // namespace dtr_chain

TEST_CASE("dtr's simulator on a chain, worked by hand") {
  using namespace dtr_chain;
  const problem p = make();
  // Budget 400, clock in ns from 1. a, b, c fill it (x A B C). d needs 100
  // more: A and C are its inputs, so B goes (the only candidate). A and C
  // die after d and go, joining B's class (A next to B, C next to B: 6 ms).
  // e needs B: b runs again, and first a (A is gone): the class pays 1 + 2
  // ms back. e's 100 B then need room: B and D are its inputs, A (made at
  // 8 ms, read by b at 8 ms, now 10 ms) goes: h = 1 ms / (100 B * 2 ms).
  const auto r = online::run_dtr(p, 400);
  REQUIRE(r.pl.feasible);
  CHECK(r.counts.evictions == 2);
  CHECK(r.counts.recomputations == 2);
  CHECK(r.counts.peak == 400);
  // The frees after which nothing reads the tensor are left out (C after d,
  // A's second, B, D and E at the end): those go after their last reader.
  std::vector<std::string> seen;
  for (const action& a : r.pl.actions) {
    seen.push_back(detail::concat(to_string(a.kind), " ", a.kind == action_kind::free ? p.tensor_name[static_cast<std::size_t>(a.tensor)]
                                                                                 : p.op_name[static_cast<std::size_t>(a.step)]));
  }
  CHECK(seen == std::vector<std::string>{"compute a", "compute b", "compute c", "free B", "compute d", "free A",
                                         "recompute a", "recompute b", "compute e"});
  CHECK(r.pl.decisions[static_cast<std::size_t>(A)] == decision::recompute);
  CHECK(r.pl.decisions[static_cast<std::size_t>(C)] == decision::keep);
  const device_spec d = test::byte_per_us_device();
  const report rep = simulate(p, r.pl, d, 400);
  REQUIRE(rep.feasible);
  CHECK(rep.time_us == doctest::Approx(8000 + 3000));
  CHECK(rep.peak_bytes == 400);
  check_valid(p, r.pl, d, 400);

  // Budget 300: d needs x (a constant: it stays), A, C and D at once.
  const auto tight = online::run_dtr(p, 300);
  CHECK(tight.pl.kind == failure_kind::out_of_memory);
  CHECK_MESSAGE(tight.pl.reason.find("op 'd'") != std::string::npos, tight.pl.reason);
  // Budget 200: b needs x, A and B.
  const auto none = online::run_dtr(p, 200);
  CHECK(none.pl.kind == failure_kind::out_of_memory);
  CHECK_MESSAGE(none.pl.reason.find("op 'b'") != std::string::npos, none.pl.reason);
}

TEST_CASE("the cheapest window of an arena, worked by hand") {
  using detail::dtr::arena_block;
  using detail::dtr::cheapest_window;
  // hole [0,100) | T1 [100,300) cost 5 | locked [300,400) | hole [400,450) |
  // T2 [450,600) cost 2 | T3 [600,700) cost 1 | hole [700,800)
  const std::vector<arena_block> line{{0, 100, no_index, 0}, {100, 300, 1, 5}, {300, 400, 2, -1},
                                      {400, 450, no_index, 0}, {450, 600, 3, 2}, {600, 700, 4, 1},
                                      {700, 800, no_index, 0}};
  // 200 B: T1 alone (5), hole + T2 (2), T2 + T3 (3), T3 + hole (1): the last.
  CHECK(cheapest_window(line, 200) == std::pair<std::size_t, std::size_t>{5, 7});
  // 50 B: the first hole, free.
  CHECK(cheapest_window(line, 50) == std::pair<std::size_t, std::size_t>{0, 1});
  // 350 B: the blocks before the locked one span 300; after it, T2 + T3 +
  // the last hole (cost 3; the hole before T2 is not needed).
  CHECK(cheapest_window(line, 350) == std::pair<std::size_t, std::size_t>{4, 7});
  // 500 B: the locked block cuts the arena into 300 and 400 B: none.
  CHECK(cheapest_window(line, 500) == std::pair<std::size_t, std::size_t>{0, 0});
}

TEST_CASE("dtr in an arena evicts a contiguous window, worked by hand") {
  // x(100, input) -a 1 ms-> A(100) -b 2 ms-> B(100) -c 3 ms-> C(100);
  // backward (may not run again): d: C -> D(200); e: B, D -> E(100);
  // f: A, E -> F(100). Budget 500, alignment 1, best fit.
  test::graph_maker m;
  m.tensor("x", 100, tensor_kind::input);
  for (const char* name : {"A", "B", "C"}) m.tensor(name, 100, tensor_kind::activation);
  m.tensor("D", 200, tensor_kind::activation);
  for (const char* name : {"E", "F"}) m.tensor(name, 100, tensor_kind::activation);
  m.op("a", 1000, {0}, {1});
  m.op("b", 2000, {1}, {2});
  m.op("c", 3000, {2}, {3});
  m.op("d", 1000, {3}, {4}, 0, phase::backward);
  m.op("e", 1000, {2, 4}, {5}, 0, phase::backward);
  m.op("f", 1000, {1, 5}, {6}, 0, phase::backward);
  const problem p = m.compile();
  // x@0 A@100 B@200 C@300. d's D needs 200: by count A goes (h = 1 ms /
  // (100 B * 5 ms) below B's 2 ms / (100 B * 3 ms)), leaving the holes
  // [100, 200) and [400, 500); the only window of 200 B without a locked
  // tensor is [100, 300): B goes too, D@100. C dies after d: e's B is
  // remade (first A@300, the one hole [300, 500); then B@400); E needs A's
  // room (A is the only candidate): E@300. f remakes A in B's old place
  // (@400, the smaller hole) and F@100 where D was.
  const auto r = online::run_dtr(p, 500, 0, 1);
  REQUIRE_MESSAGE(r.pl.feasible, r.pl.reason);
  CHECK(r.counts.evictions == 3);
  CHECK(r.counts.recomputations == 3);
  CHECK(r.pl.offsets == std::vector<bytes_t>{0, 100, 200, 300, 100, 300, 400, 300, 400, 100});
  CHECK(r.pl.arena_bytes == 500);
  // Counting bytes alone, B stays: A goes for D and is remade for f.
  const auto counted = online::run_dtr(p, 500);
  REQUIRE(counted.pl.feasible);
  CHECK(counted.counts.evictions == 1);
  CHECK(counted.counts.recomputations == 1);
  check_valid(p, r.pl, test::byte_per_us_device(), 500);
}

TEST_CASE("dtr's simulator keeps what the framework holds, and remakes evicted outputs at the end") {
  // x -> y (a, 1 ms) -> z (b, 1 ms); the framework holds y until after c
  // (step 2: c reads z only). z is persistent (an output of the iteration),
  // made by a forward op: it may be evicted and is made again at the end.
  graph g("held");
  const index_t x = g.add_tensor({.name = "x", .bytes = 100, .kind = tensor_kind::input, .shape = {}, .dtype = {}});
  const index_t y = g.add_tensor({.name = "y", .bytes = 100, .kind = tensor_kind::activation, .shape = {}, .dtype = {}});
  const index_t z = g.add_tensor({.name = "z", .bytes = 100, .kind = tensor_kind::parameter, .shape = {}, .dtype = {}});
  const index_t w = g.add_tensor({.name = "w", .bytes = 100, .kind = tensor_kind::activation, .shape = {}, .dtype = {}});
  const auto op = [&](const char* name, std::vector<index_t> in, std::vector<index_t> out) {
    return g.add_op({.name = name, .type = "op", .phase = phase::forward, .time_us = 1000, .workspace_bytes = 0,
                     .inputs = std::move(in), .outputs = std::move(out), .recomputable = true, .split_dims = {}});
  };
  op("a", {x}, {y});
  op("b", {y}, {z});
  const index_t c = op("c", {z}, {w});
  g.set_released_after(y, c);
  const problem p = compile(g, schedule{0, 1, 2});
  CHECK(p.live_end(y) == 1);
  CHECK(p.held_until(y) == 2);
  // Budget 300: c's w needs room with x, y (held) and z there: y goes (z
  // is c's input). Without the hold y would be dead after b: no eviction.
  const auto held = online::run_dtr(p, 300);
  REQUIRE(held.pl.feasible);
  CHECK(held.counts.evictions == 1);
  CHECK(held.counts.recomputations == 0);
  // Budget 200: b needs x, y and z; y is its input, x a constant.
  CHECK(online::run_dtr(p, 200).pl.kind == failure_kind::out_of_memory);
  const device_spec d = test::byte_per_us_device();
  check_valid(p, held.pl, d, 300);
  (void)w;
  (void)z;
}

TEST_CASE("allocator time: the simulator and the validator add plan::allocator_us, the plan file keeps it") {
  // dtr at 600 on three layers (above): 800 µs of ops and recompute, 4
  // segments at 50 µs. Twice the driver time adds 200 µs more; a negative
  // one is an invalid plan in both.
  const problem p = three_layers();
  const device_spec d = test::byte_per_us_device();
  dtr_policy policy;
  plan pl = online::run_online(p, d, 600, policy, "dtr").result;
  REQUIRE(pl.allocator_us == doctest::Approx(200));
  const plan read = io::read_plan(io::to_json(pl, p).dump(), p);
  CHECK(read.allocator_us == doctest::Approx(200));
  CHECK(read.offsets == pl.offsets);
  pl.allocator_us = 400;
  CHECK(simulate(p, pl, d, 600).time_us == doctest::Approx(1200));
  CHECK(validate(p, pl, d, 600).time_us == doctest::Approx(1200));
  pl.allocator_us = -1;
  CHECK(simulate(p, pl, d, 600).kind == failure_kind::invalid_plan);
  CHECK_FALSE(validate(p, pl, d, 600).ok);
}

TEST_CASE("online runtime: recursive rematerialisation of an evicted chain") {
  const problem p = three_layers();
  const device_spec d = test::byte_per_us_device();
  online_state probe(p, 500, false);
  dtr_policy policy;
  // Budget 500: b3 needs 700 - 200; a1 and later a2 are evicted ... whatever
  // the choices, every plan must be valid and the recomputations show in time.
  const auto r = online::run_online(p, d, 500, policy, "dtr");
  REQUIRE(r.result.feasible);
  const report rep = simulate(p, r.result, d, 500);
  REQUIRE(rep.feasible);
  CHECK(rep.peak_bytes <= 500);
  CHECK(rep.time_us == doctest::Approx(700 + 100.0 * r.counts.recomputations + 50.0 * r.counts.segment_mallocs));
  CHECK(r.counts.allocator_us == doctest::Approx(50.0 * (r.counts.segment_mallocs + r.counts.segment_frees)));
  check_valid(p, r.result, d, 500);
}

TEST_CASE("delta on three layers: offloads what cannot be recomputed, early start, validator") {
  const problem p = three_layers();
  const device_spec d = test::byte_per_us_device();
  for (const bytes_t budget : {bytes_t{700}, bytes_t{600}, bytes_t{500}}) {
    for (const char* f : {"base", "lru", "greedy"}) {
      planner_options o;
      o.extra["filter"] = f;
      const plan pl = find_planner("delta").run(p, d, budget, o);
      INFO("budget ", budget, " filter ", std::string(f));
      REQUIRE(pl.feasible);
      const report rep = simulate(p, pl, d, budget);
      REQUIRE(rep.feasible);
      CHECK(rep.peak_bytes <= budget);
      check_valid(p, pl, d, budget);
    }
  }
}

TEST_CASE("online planners: the tensors without a producer must fit before any release") {
  // x (100 B, no producer) is on the device at time 0 in the simulator, so
  // no policy may start by offloading it: 99 B is infeasible for both, with
  // the bytes named (tests/data/regressions/delta-transformer-8-seed1098.json
  // is the 1-byte case the property test found).
  const problem p = three_layers();
  const device_spec d = test::byte_per_us_device();
  for (const char* name : {"dtr", "delta"}) {
    INFO(name);
    const plan pl = find_planner(name).run(p, d, 99, planner_options{});
    CHECK(pl.kind == failure_kind::out_of_memory);
    CHECK_MESSAGE(pl.reason.find("the tensors without a producer need 100 bytes") != std::string::npos, pl.reason);
    CHECK_FALSE(simulate(p, pl, d, 99).feasible);
  }
  planner_options caching;
  caching.extra["allocator"] = "caching";
  CHECK(find_planner("dtr").run(p, d, 99, caching).reason.find(
            "the allocator cannot place 'x' (100 bytes) with 0 in segments; budget 99 bytes") != std::string::npos);
  caching.extra["allocator"] = "cuda";
  CHECK_THROWS_WITH_AS(find_planner("dtr").run(p, d, 600, caching),
                       "option '--allocator' takes none or caching, got 'cuda'", invalid_argument);
}

TEST_CASE("online planners stop at their time limit, infeasible, saying so") {
  // resnet50 b8 at 50 %: hundreds of steps and releases. A limit that has
  // run out stops the run before the first step; without one both fit.
  const device_spec d = find_device("titan-rtx");
  model::options mo;
  mo.batch = 8;
  const problem p = compile(model::build("resnet50", mo, d));
  const bytes_t budget = p.baseline_peak() / 2;
  for (const char* name : {"dtr", "delta"}) {
    INFO(name);
    planner_options spent;
    spent.time_limit_s = 1e-9;
    const plan stopped = find_planner(name).run(p, d, budget, spent);
    CHECK(stopped.kind == failure_kind::time_limit);
    CHECK_MESSAGE(stopped.reason.find("at step 0 (op '") != std::string::npos, stopped.reason);
    CHECK_MESSAGE(stopped.reason.find("the time limit of 1e-09 s ran out before the last step") != std::string::npos,
                  stopped.reason);
    CHECK(find_planner(name).run(p, d, budget, planner_options{}).feasible);
  }
}

TEST_CASE("delta options are checked") {
  const problem p = three_layers();
  const device_spec d = test::byte_per_us_device();
  planner_options o;
  o.extra["filter"] = "fifo";
  CHECK_THROWS_WITH_AS(find_planner("delta").run(p, d, 600, o),
                       "option '--filter' takes base, lru, greedy or cost, got 'fifo'", invalid_argument);
  o.extra["filter"] = "lru";
  o.extra["link-efficiency"] = "2";
  CHECK_THROWS_AS(find_planner("delta").run(p, d, 600, o), invalid_argument);
}

TEST_CASE("dtr and delta on zoo models: valid plans under tight budgets") {
  const device_spec d = find_device("titan-rtx");
  for (const char* name : {"resnet50", "vgg16", "transformer"}) {
    model::options mo;
    mo.batch = 8;
    const problem p = compile(model::build(name, mo, d));
    for (const double ratio : {0.5, 0.8}) {
      const auto budget = static_cast<bytes_t>(ratio * static_cast<double>(p.baseline_peak()));
      for (const char* planner : {"dtr", "delta"}) {
        INFO(std::string(name), " ", std::string(planner), " at ", ratio);
        const plan pl = find_planner(planner).run(p, d, budget, planner_options{});
        const report rep = simulate(p, pl, d, budget);
        CHECK_MESSAGE(rep.feasible == pl.feasible, rep.failure);
        // At 0.5 some do not fit: vgg16's weights alone exceed it. At 0.8
        // dtr on the transformer does not either: DTR's plan keeps 99.9 % of
        // the budget live, but its allocations need an arena 0.9 % larger,
        // and at any tighter target the 125 MiB output projection finds
        // 833 MB that are pinned or cannot be recomputed. DELTA offloads them.
        const bool fragments = std::string_view(name) == "transformer" && std::string_view(planner) == "dtr";
        if (ratio > 0.6 && !fragments) CHECK_MESSAGE(pl.feasible, pl.reason);
        if (ratio > 0.6 && fragments) {
          CHECK_MESSAGE(pl.reason.find("the plan's memory layout needs an arena of") != std::string::npos, pl.reason);
        }
        if (!pl.feasible) continue;
        CHECK(rep.peak_bytes <= budget);
        CHECK(pl.best_peak == rep.peak_bytes);  // the simulator's peak: the layout's arena
        // The arena: at least the live peak, at most the budget.
        CHECK(pl.arena_bytes <= budget);
        CHECK(pl.arena_bytes >= rep.peak_live_bytes);
        // Driver time: delta's allocator makes segments; dtr's layout is placed ahead.
        CHECK((pl.allocator_us > 0) == (std::string_view(planner) == "delta"));
        if (std::string_view(name) != "transformer") check_valid(p, pl, d, budget);  // quadratic: small ones
      }
    }
  }
}

}  // namespace
