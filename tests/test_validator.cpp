// Tests of memplan/sim/validator.hpp: it rejects each kind of broken plan
// with a message naming the action, op and tensor, and on valid plans it
// agrees exactly with the simulator on peak and time. Graphs, plans and the
// worked numbers are in sim_fixtures.hpp and test_sim.cpp.
#include <doctest/doctest.h>

#include <functional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "memplan/plan_builder.hpp"
#include "memplan/sim/simulator.hpp"
#include "memplan/sim/validator.hpp"
#include "sim_fixtures.hpp"

namespace {

using namespace memplan;
namespace chain = memplan::test::chain;
namespace residual = memplan::test::residual;

using memplan::test::dev;

/// The validator rejects `pl` as `kind` with an error containing `needle`.
void expect_rejected(const problem& p, const plan& pl, bytes_t budget, std::string_view needle,
                     failure_kind kind = failure_kind::invalid_plan) {
  const validation v = validate(p, pl, dev, budget);
  CHECK_FALSE(v.ok);
  CHECK(v.kind == kind);
  bool found = false;
  for (const std::string& e : v.errors) found = found || e.find(needle) != std::string::npos;
  INFO("expected an error containing: ", needle);
  for (const std::string& e : v.errors) INFO(e);
  CHECK(found);
}

/// The validator accepts `pl`, and its peak and time are the simulator's and the given ones.
void expect_accepted(const problem& p, const plan& pl, bytes_t budget, bytes_t peak, double time_us) {
  const validation v = validate(p, pl, dev, budget);
  for (const std::string& e : v.errors) INFO(e);
  CHECK(v.ok);
  CHECK(v.kind == failure_kind::none);
  CHECK(v.errors.empty());
  const report r = simulate(p, pl, dev, budget);
  CHECK(r.feasible);
  CHECK(v.peak_bytes == r.peak_bytes);
  CHECK(v.time_us == r.time_us);
  CHECK(v.peak_bytes == peak);
  CHECK(v.time_us == time_us);
}

}  // namespace

TEST_CASE("valid plans: the validator agrees with the simulator") {
  const problem c = chain::make();
  const problem res = residual::make();
  expect_accepted(c, keep_all_plan(c, 400), 400, 400, 1100);
  expect_accepted(res, keep_all_plan(res, 540), 540, 540, 580);
  expect_accepted(c, chain::swap_a1(c, chain::f3, 1000), 1000, 400, 1100);  // full overlap
  expect_accepted(c, chain::swap_a1(c, chain::b3, 300), 300, 300, 1200);    // 100 µs stall
  expect_accepted(c, chain::swap_a1(c, chain::f3, 300), 300, 300, 1200);    // waits for memory
  expect_accepted(c, chain::recompute_a1(c, 310), 310, 310, 1200);

  // Residual: swap b and w2 out after relu, back in once loss ends.
  //   conv1 [0, 100], conv2 [100, 300], relu [300, 350]: at relu
  //   w1 + w2 + a + b + c = 440 B, the budget and the peak.
  //   d2h: swap_out b [300, 500] (200 B), swap_out w2 [500, 520].
  //   add needs d (100 B) at 350 with 440 in use: it waits for b to leave
  //   at 500 (240 + 100 = 340) and runs [500, 520]; at 520 a, c and w2 go
  //   (120 left), loss adds gd over [520, 530].
  //   h2d, triggered at 530: swap_in b [530, 730], w2 [730, 750];
  //   bwd [750, 950] with 400 B in use. Time 950 µs.
  plan_builder b(res, "swap-b", 440);
  for (index_t s = 0; s < 3; ++s) b.compute(s);
  b.swap_out(residual::b);
  b.swap_out(residual::w2);
  b.compute(3);
  const index_t trigger[] = {b.compute(4)};
  b.swap_in(residual::b, trigger);
  b.swap_in(residual::w2, trigger);
  b.compute(5);
  expect_accepted(res, std::move(b).finish(), 440, 440, 950);
}

TEST_CASE("read after free") {
  const problem p = chain::make();
  expect_rejected(p, chain::read_after_free(p, 1000), 1000,
                  "action 5 (compute 'b2') reads tensor 'a1' after action 2 (free 'a1') released it");
}

TEST_CASE("double free") {
  const problem p = chain::make();
  plan_builder b(p, "bad", 1000);
  b.compute(chain::f1);
  b.compute(chain::f2);
  b.free(chain::a1);
  b.free(chain::a1);
  expect_rejected(p, std::move(b).finish(), 1000,
                  "action 3 (free 'a1') releases (twice) tensor 'a1' after action 2 (free 'a1') released it");
}

TEST_CASE("over budget") {
  // keep-all peaks at 400 B (b3); at 399 B b3 can never allocate g2: out of
  // memory, as the simulator says.
  const problem p = chain::make();
  expect_rejected(p, keep_all_plan(p, 399), 399,
                  "over budget: action 3 (compute 'b3') needs 100 bytes at 700 us with 300 in use",
                  failure_kind::out_of_memory);
  CHECK(simulate(p, keep_all_plan(p, 399), dev, 399).kind == failure_kind::out_of_memory);
  // x (10 B) alone does not fit 9 B.
  expect_rejected(p, keep_all_plan(p, 9), 9, "over budget at time 0: the tensors without a producer take 10 bytes",
                  failure_kind::out_of_memory);
}

TEST_CASE("a plan both invalid and over budget is an invalid plan") {
  // The read after free above, under 9 B: x alone (10 B) is over budget too.
  const problem p = chain::make();
  const plan pl = chain::read_after_free(p, 9);
  expect_rejected(p, pl, 9, "over budget at time 0");
  expect_rejected(p, pl, 9, "action 5 (compute 'b2') reads tensor 'a1' after action 2 (free 'a1') released it");
  CHECK(simulate(p, pl, dev, 9).kind == failure_kind::invalid_plan);
}

TEST_CASE("one verdict: plans whose timing hides a broken rule are invalid (issue 22)") {
  // The plans of sim_fixtures.hpp's `broken`; test_sim.cpp checks that the
  // simulator rejects each of them too.
  SUBCASE("1. an update lost: freed with only the host copy saved before it") {
    const problem p = test::sgd::make();
    expect_rejected(p, test::broken::update_lost(p), 1000,
                    "action 5 (free 'w'): loses the update of parameter 'w' by action 4 (compute 'u'), which no later "
                    "swap_out saved");
  }
  SUBCASE("1. an update lost: the swap_out saving it not ordered after it") {
    const problem p = test::sgd::make();
    expect_rejected(p, test::broken::update_raced(p), 1000,
                    "action 3 (swap_out 'w') uses tensor 'w' made by action 2 (compute 'u'), but no wait or stream "
                    "order makes it start after that ends");
  }
  SUBCASE("2. a parameter freed with no host copy") {
    const problem p = residual::make();
    expect_rejected(p, test::broken::parameter_lost(p), 1000,
                    "action 1 (free 'w1'): loses parameter 'w1', which has no host copy");
  }
  SUBCASE("3. a read not ordered after the swap-in that makes it") {
    const problem p = chain::make();
    expect_rejected(p, test::broken::read_unordered(p), 1000,
                    "action 6 (compute 'b2') uses tensor 'a1' made by action 5 (swap_in 'a1'), but no wait");
  }
  SUBCASE("3. a swap-in not ordered after its swap-out") {
    // The swap-out ends at 500 and f3, which the swap-in waits on, at 700.
    const problem p = chain::make();
    expect_rejected(p, test::broken::swap_in_unordered(p), 1000,
                    "action 5 (swap_in 'a1'): not ordered after the end of action 2 (swap_out 'a1')");
  }
  SUBCASE("3. a split in place not ordered after a holder of the whole tensor") {
    const problem p = chain::make();
    expect_rejected(p, test::broken::split_unordered(p), 1000,
                    "action 6 (swap_out 'a1') splits tensor 'a1' in place, but action 3 (swap_in 'a1') that holds "
                    "it is not ordered before it");
  }
  SUBCASE("4. an update recomputed (applied twice), though marked recomputable") {
    problem p = test::sgd::make();
    p.recomputable[test::sgd::u] = 1;
    const validation v = validate(p, test::broken::update_recomputed(p), dev, 1000);
    CHECK(v.kind == failure_kind::invalid_plan);
    REQUIRE(v.errors.size() == 1);
    CHECK(v.errors[0] ==
          "action 3 (recompute 'u'): op 'u' is an update, which writes its state in place; it is never recomputed");
  }
  SUBCASE("5. an op marked not recomputable, recomputed") {
    problem p = chain::make();
    p.recomputable[static_cast<std::size_t>(chain::f1)] = 0;
    expect_rejected(p, chain::recompute_a1(p, 1000), 1000, "action 5 (recompute 'f1'): op 'f1' is not recomputable");
  }
  SUBCASE("6. an op without split dimensions, split") {
    const problem p = test::with_split_dims(chain::make(), chain::f2, {});
    expect_rejected(p, chain::split_f2(p, 2, false), 1000,
                    "action 1 (compute 'f2'): splits op 'f2' into 2 parts along dimension 0 (the batch), which is "
                    "not one of its split dimensions");
  }
  SUBCASE("6. an op split into more parts than the batch has samples") {
    // x has shape {2}: the batch is 2 samples, so 4 micro-batches would be empty.
    const problem p = chain::make(2);
    CHECK(p.batch == 2);
    CHECK(validate(p, chain::split_f2(p, 2, true), dev, 1000).ok);
    expect_rejected(p, chain::split_f2(p, 4, false), 1000,
                    "action 1 (compute 'f2'): splits op 'f2' into 4 parts, more than the batch's 2 samples");
    expect_rejected(p, chain::split_f2(p, 4, true), 1000,
                    "action 4 (compute 'f2'): splits op 'f2' into 4 parts, more than the batch's 2 samples");
  }
  SUBCASE("7. a parameter left off the device at the end, not offloaded") {
    const problem p = residual::make();
    expect_rejected(p, test::broken::state_left_off_device(p), 1000,
                    "parameter 'w1' is off the device at the end of the iteration (action 1 (swap_out 'w1') released "
                    "it), but offloaded_state does not list it");
  }
}

TEST_CASE("lost parameter and parameter gradient") {
  const problem p = residual::make();
  SUBCASE("a parameter freed with no host copy") {
    plan_builder b(p, "bad", 1000);
    b.compute(0);
    b.free(residual::w1);  // conv1 was its only reader: no read fails, but the next iteration needs it
    for (index_t s = 1; s < 6; ++s) b.compute(s);
    expect_rejected(p, std::move(b).finish(), 1000, "action 1 (free 'w1'): loses parameter 'w1'");
  }
  SUBCASE("a parameter swapped out, and back in by the end, is not lost") {
    plan_builder b(p, "ok", 1000);
    b.compute(0);
    b.swap_out(residual::w1);
    for (index_t s = 1; s < 6; ++s) b.compute(s);
    b.swap_in(residual::w1);
    CHECK(validate(p, std::move(b).finish(), dev, 1000).ok);
  }
}

namespace {

/// Step 0 f (forward, or `made` phase): x -> y, an output of the iteration
/// (kind parameter); step 1 g (forward): x -> z. 10 B each, 5 µs each.
problem made_state(phase made) {
  test::graph_maker m;
  const index_t x = m.tensor("x", 10, tensor_kind::input);
  const index_t y = m.tensor("y", 10, tensor_kind::parameter);
  const index_t z = m.tensor("z", 10, tensor_kind::activation);
  m.op("f", 5, {x}, {y}, 0, made);
  m.op("g", 5, {x}, {z});
  return m.compile();
}

}  // namespace

TEST_CASE("state this iteration makes with an op that may run again may be freed and made again") {
  SUBCASE("freed, then remade before the end (DTR's outputs, dtr_runtime.hpp)") {
    const problem p = made_state(phase::forward);
    plan_builder b(p, "ok", 1000);
    b.compute(0);
    b.free(1);
    b.compute(1);
    b.recompute(0);
    // x and y at f; x and z at g; x and y again: 20 B; three ops of 5 µs.
    expect_accepted(p, std::move(b).finish(), 1000, 20, 15);
  }
  SUBCASE("freed and left off the device") {
    const problem p = made_state(phase::forward);
    plan_builder b(p, "bad", 1000);
    b.compute(0);
    b.free(1);
    b.compute(1);
    expect_rejected(p, std::move(b).finish(), 1000, "parameter 'y' is off the device at the end of the iteration");
  }
  SUBCASE("made by an op that may not run again: freeing it loses it") {
    const problem p = made_state(phase::backward);
    plan_builder b(p, "bad", 1000);
    b.compute(0);
    b.free(1);
    b.compute(1);
    expect_rejected(p, std::move(b).finish(), 1000, "action 1 (free 'y'): loses parameter 'y'");
  }
}

namespace {

/// Step 0 grad (backward): w -> gw; step 1 sgd (update): w, gw -> w.next;
/// every tensor 10 B.
problem grad_and_sgd() {
  test::graph_maker m;
  const index_t w = m.tensor("w", 10, tensor_kind::parameter);
  const index_t gw = m.tensor("gw", 10, tensor_kind::parameter_gradient);
  const index_t w2 = m.tensor("w.next", 10, tensor_kind::other);
  m.op("grad", 5, {w}, {gw}, 0, phase::backward);
  m.op("sgd", 5, {w, gw}, {w2}, 0, phase::update);
  return m.compile();
}

}  // namespace

TEST_CASE("a parameter gradient freed before its use") {
  // A parameter gradient consumed by an update op: freeing it before the
  // update loses it even if something later brought... nothing can.
  const problem p = grad_and_sgd();
  plan_builder b(p, "bad", 100);
  b.compute(0);
  b.free(1);  // gw
  b.compute(1);
  expect_rejected(p, std::move(b).finish(), 100,
                  "action 1 (free 'gw'): loses parameter_gradient 'gw' before its use by op 'sgd'");
}

TEST_CASE("only recomputable ops that are not updates are recomputed") {
  SUBCASE("an op marked not recomputable") {
    // recompute_a1 is valid on the chain (first test case); with f1 marked
    // not recomputable its recompute, action 5, is the one violation.
    problem p = chain::make();
    p.recomputable[static_cast<std::size_t>(chain::f1)] = 0;
    const validation v = validate(p, chain::recompute_a1(p, 310), dev, 310);
    CHECK_FALSE(v.ok);
    REQUIRE(v.errors.size() == 1);
    CHECK(v.errors[0] == "action 5 (recompute 'f1'): op 'f1' is not recomputable");
  }
  SUBCASE("an update op, even one marked recomputable") {
    // Recomputing sgd would apply the update twice; nothing else is wrong.
    problem p = grad_and_sgd();
    p.recomputable[1] = 1;
    plan_builder b(p, "bad", 100);
    b.compute(0);
    b.compute(1);
    b.recompute(1);
    const validation v = validate(p, std::move(b).finish(), dev, 100);
    CHECK_FALSE(v.ok);
    REQUIRE(v.errors.size() == 1);
    CHECK(v.errors[0] ==
          "action 2 (recompute 'sgd'): op 'sgd' is an update, which writes its state in place; it is never recomputed");
  }
}

TEST_CASE("only ops with the batch (dimension 0) among their split dimensions are split") {
  // f2 (300 µs) in 2 parts: 2 * 150 + one 5 µs launch = 305 µs (cost/split.hpp),
  // so the chain takes 1105 µs; the peak stays b3's 400 B.
  const problem c = chain::make();
  expect_accepted(c, chain::split_f2(c, 2, false), 400, 400, 1105);
  CHECK(validate(c, chain::split_f2(c, 2, true), dev, 400).ok);
  const std::string message =
      "(compute 'f2'): splits op 'f2' into 2 parts along dimension 0 (the batch), which is not one of its split "
      "dimensions";
  for (const std::vector<int>& dims : {std::vector<int>{}, std::vector<int>{1}}) {
    INFO("split dimensions: ", dims.size() == 0 ? "none" : "{1}");
    const problem p = test::with_split_dims(c, chain::f2, dims);
    const validation whole = validate(p, chain::split_f2(p, 2, false), dev, 400);
    REQUIRE(whole.errors.size() == 1);
    CHECK(whole.errors[0] == "action 1 " + message);
    const validation micro = validate(p, chain::split_f2(p, 2, true), dev, 400);
    REQUIRE(micro.errors.size() == 2);  // both micro-ops
    CHECK(micro.errors[0] == "action 1 " + message);
    CHECK(micro.errors[1] == "action 2 " + message);
  }
}

TEST_CASE("structure: out of range, waits forward, steps not computed once") {
  const problem p = chain::make();
  plan pl = keep_all_plan(p, 1000);
  pl.actions[1].step = 7;
  pl.actions.push_back({action_kind::free, no_index, 42, 1});
  pl.waits.push_back(6);
  pl.wait_begin.push_back(static_cast<index_t>(pl.waits.size()));
  const validation v = validate(p, pl, dev, 1000);
  CHECK(v.kind == failure_kind::invalid_plan);
  REQUIRE(v.errors.size() == 3);
  CHECK(v.errors[0] == "action 1 (compute): step 7 is out of range [0, 5)");
  CHECK(v.errors[1] == "action 5 (free): tensor 42 is out of range [0, 6)");
  CHECK(v.errors[2] == "action 5 waits on action 6, which does not come before it");

  pl = keep_all_plan(p, 1000);
  pl.actions[4].step = 3;  // b3 twice, b2 never
  expect_rejected(p, pl, 1000, "action 4 (compute 'b3'): step 3 is computed more than once");
  expect_rejected(p, pl, 1000, "step 4 (op 'b2') is never computed");
}

namespace {

/// A random chain of `layers` (forward f_i: a_{i-1}, w_i -> a_i; loss;
/// backward b_i: g_i, a_{i-1}, w_i -> g_{i-1}, gw_i), some ops taking no
/// time, and a random plan that keeps, swaps or recomputes each activation,
/// with random prefetch triggers. Valid by construction.
struct random_case {
  problem p;
  plan pl;
};

random_case make_random_case(std::mt19937& rng) {
  const auto pick = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int layers = pick(2, 7);
  test::graph_maker m;
  std::vector<index_t> act{m.tensor("x", pick(1, 50), tensor_kind::input)};
  std::vector<index_t> w{no_index}, g{no_index};
  for (int i = 1; i <= layers; ++i) {
    w.push_back(m.tensor("w" + std::to_string(i), pick(1, 20), tensor_kind::parameter));
    act.push_back(m.tensor("a" + std::to_string(i), pick(0, 100), tensor_kind::activation));
    g.push_back(m.tensor("g" + std::to_string(i), pick(1, 100), tensor_kind::gradient));
  }
  const auto time = [&] { return pick(0, 3) == 0 ? 0.0 : pick(1, 200); };
  for (int i = 1; i <= layers; ++i) m.op("f" + std::to_string(i), time(), {act[i - 1], w[i]}, {act[i]}, pick(0, 30));
  m.op("loss", time(), {act[layers]}, {g[layers]}, 0, phase::backward);
  for (int i = layers; i >= 1; --i) {
    std::vector<index_t> out{m.tensor("gw" + std::to_string(i), pick(1, 20), tensor_kind::parameter_gradient)};
    if (i > 1) out.push_back(g[i - 1]);
    m.op("b" + std::to_string(i), time(), {g[i], act[i - 1], w[i]}, out, pick(0, 30), phase::backward);
  }
  random_case c{m.compile(), {}};
  // Steps: f_i is i - 1, loss is `layers`, b_i is 2 * layers + 1 - i.
  plan_builder b(c.p, "random", 0);
  std::vector<int> state(act.size(), 0);  // 0 on the device, 1 swapped out, 2 freed
  index_t last = no_index;
  for (int i = 1; i <= layers; ++i) {
    last = b.compute(i - 1);
    const int j = i - 1;  // a_j's forward use is over
    if (j >= 1) {
      state[j] = pick(0, 2);
      if (state[j] == 1) b.swap_out(act[j]);
      if (state[j] == 2) b.free(act[j]);
    }
  }
  last = b.compute(layers);
  const std::function<void(int)> bring = [&](int j) {
    if (j < 1 || state[j] == 0) return;
    if (state[j] == 1) {
      const index_t trigger[] = {last};
      b.swap_in(act[j], pick(0, 1) == 0 ? std::span<const index_t>{} : std::span<const index_t>(trigger));
    } else {
      bring(j - 1);
      b.recompute(j - 1);
    }
    state[j] = 0;
  };
  for (int i = layers; i >= 1; --i) {
    if (pick(0, 1) == 1) bring(i - 2);  // prefetch one step ahead
    bring(i - 1);
    last = b.compute(2 * layers + 1 - i);
  }
  c.pl = std::move(b).finish();
  return c;
}

}  // namespace

TEST_CASE("N-version: random valid plans, the validator and the simulator agree") {
  std::mt19937 rng(20240611);
  int feasible = 0, out_of_memory = 0;
  for (int round = 0; round < 300; ++round) {
    const random_case c = make_random_case(rng);
    const bytes_t base = c.p.baseline_peak();
    const bytes_t budget = std::uniform_int_distribution<bytes_t>(base / 3, base + base / 4)(rng);
    const report r = simulate(c.p, c.pl, dev, budget);
    const validation v = validate(c.p, c.pl, dev, budget);
    INFO("round ", round, ": budget ", budget, ", simulator: ", r.failure);
    for (const std::string& e : v.errors) INFO(e);
    CHECK(r.feasible == v.ok);
    CHECK(r.kind == v.kind);
    CHECK(r.peak_bytes == v.peak_bytes);
    if (r.feasible) {
      CHECK(r.time_us == v.time_us);
      ++feasible;
    } else {
      CHECK(r.kind == failure_kind::out_of_memory);
      ++out_of_memory;
    }
  }
  // Both outcomes are exercised.
  CHECK(feasible > 50);
  CHECK(out_of_memory > 50);
}
