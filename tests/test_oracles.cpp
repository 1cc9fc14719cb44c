// Tests of the exact oracles: `revolve` (Griewank's binomial checkpointing)
// against Griewank's recursion and on chains, and `milp` (Checkmate's
// integer program, built with MEMPLAN_ENABLE_MILP) against revolve, the
// checkpoint baseline and every registered planner's recompute-only plans.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "memplan/planners/registry.hpp"
#include "memplan/sim/simulator.hpp"
#include "memplan/sim/validator.hpp"
#include "sim_fixtures.hpp"

namespace {

using namespace memplan;
using memplan::test::dev;
constexpr bytes_t state_bytes = 100;    // A: x and every a_i
constexpr bytes_t gradient_bytes = 10;  // G: every g_i

plan run(std::string_view planner, const problem& p, bytes_t budget, const planner_options& o = {}) {
  return find_planner(planner).run(p, dev, budget, o);
}

/// An oracle's plan in its own memory model, live bytes (Griewank's slots,
/// Checkmate's program), before the registry gives it a layout. With
/// tensors of 100 and 10 B the greedy layout can need a gradient's 10 B
/// more than the live peak (revolve, 8 layers, 1 slot: 320 B for 310), and
/// the registered planner then plans again for a tighter target.
plan live_plan(std::string_view planner, const problem& p, bytes_t budget, const planner_options& o = {}) {
#ifdef MEMPLAN_ENABLE_MILP
  if (planner == "milp") return detail::registered_milp{}(p, dev, budget, o);
#endif
  REQUIRE(planner == "revolve");
  return revolve_planner{}(p, dev, budget, o);
}

// A chain of l identical layers: f_i: a_{i-1} -> a_i (10 µs, x = a_0 an
// input), loss: a_l -> g_l (20 µs), b_i: g_i, a_{i-1} -> g_{i-1} (20 µs).
// Baseline peak at the loss: x, a_1..a_l, g_l = (l + 1) A + G.
problem layer_chain(int l) {
  test::graph_maker m;
  std::vector<index_t> a{m.tensor("x", state_bytes, tensor_kind::input)};
  for (int i = 1; i <= l; ++i) a.push_back(m.tensor("a" + std::to_string(i), state_bytes, tensor_kind::activation));
  std::vector<index_t> g(static_cast<std::size_t>(l) + 1);
  for (int i = l; i >= 0; --i) {
    g[static_cast<std::size_t>(i)] = m.tensor("g" + std::to_string(i), gradient_bytes, tensor_kind::gradient);
  }
  const auto last = static_cast<std::size_t>(l);
  for (std::size_t i = 1; i <= last; ++i) m.op("f" + std::to_string(i), 10, {a[i - 1]}, {a[i]});
  m.op("loss", 20, {a[last]}, {g[last]}, 0, phase::backward);
  for (std::size_t i = last; i >= 1; --i) {
    m.op("b" + std::to_string(i), 20, {g[i], a[i - 1]}, {g[i - 1]}, 0, phase::backward);
  }
  return m.compile();
}

/// Griewank's recursion for the least forward steps, written out directly:
/// t(1, s) = 0, t(l, 1) = l(l-1)/2, t(l, s) = min_m m + t(l-m, s-1) + t(m, s).
std::vector<std::vector<std::int64_t>> griewank_table(int max_l) {
  const auto n = static_cast<std::size_t>(max_l);
  std::vector<std::vector<std::int64_t>> t(n + 1, std::vector<std::int64_t>(n + 1, 0));
  for (std::size_t l = 1; l <= n; ++l) {
    for (std::size_t s = 1; s <= n; ++s) {
      if (l == 1) {
        t[l][s] = 0;
      } else if (s == 1) {
        t[l][s] = static_cast<std::int64_t>(l * (l - 1) / 2);
      } else {
        std::int64_t best = std::numeric_limits<std::int64_t>::max();
        for (std::size_t m = 1; m < l; ++m) {
          best = std::min(best, static_cast<std::int64_t>(m) + t[l - m][s - 1] + t[m][s]);
        }
        t[l][s] = best;
      }
    }
  }
  return t;
}

/// Budget of revolve with s slots on layer_chain(l): (s + 2) A + G (revolve.hpp).
constexpr bytes_t slot_budget(std::int64_t s) { return (s + 2) * state_bytes + gradient_bytes; }

/// The plan is valid and fits: simulator and validator agree.
report judge(const problem& p, const plan& pl, bytes_t budget) {
  const report r = simulate(p, pl, dev, budget);
  CHECK(r.feasible);
  const validation v = validate(p, pl, dev, budget);
  CHECK(v.ok);
  CHECK(v.peak_bytes == r.peak_bytes);
  CHECK(v.time_us == doctest::Approx(r.time_us));
  CHECK(r.peak_bytes <= budget);
  return r;
}

}  // namespace

TEST_CASE("revolve's closed form matches Griewank's recursion for l <= 24 and every s") {
  const auto t = griewank_table(24);
  for (int l = 1; l <= 24; ++l) {
    for (int s = 1; s <= 24; ++s) {
      CAPTURE(l);
      CAPTURE(s);
      CHECK(revolve_forward_steps(l, s) == t[static_cast<std::size_t>(l)][static_cast<std::size_t>(s)]);
    }
  }
  // By hand: l = 10, s = 2: C(2+3, 2) = 10 >= 10 so r = 3, 3*10 - C(5, 3) = 20.
  CHECK(revolve_forward_steps(10, 2) == 20);
  // One slot: x_0 only, l(l-1)/2; enough slots: one sweep, l - 1.
  CHECK(revolve_forward_steps(24, 1) == 276);
  CHECK(revolve_forward_steps(24, 23) == 23);
  CHECK(revolve_forward_steps(24, 100) == 23);
  CHECK_THROWS_AS((void)revolve_forward_steps(0, 3), invalid_argument);
  CHECK_THROWS_AS((void)revolve_forward_steps(5, 0), invalid_argument);
}

TEST_CASE("revolve on chains of 4 to 24 layers: t(l, s) - (l - 1) recomputations at (s + 2) A + G") {
  for (int l = 4; l <= 24; ++l) {
    const problem p = layer_chain(l);
    REQUIRE(p.baseline_peak() == (l + 1) * state_bytes + gradient_bytes);
    for (std::int64_t s = 1; s < l; ++s) {
      CAPTURE(l);
      CAPTURE(s);
      const std::int64_t recomputes = revolve_forward_steps(l, s) - (l - 1);
      // Slots fixed by the option, and chosen from the budget.
      planner_options fixed;
      fixed.extra["slots"] = std::to_string(s);
      const plan by_slots = live_plan("revolve", p, slot_budget(s), fixed);
      const plan by_budget = live_plan("revolve", p, slot_budget(s));
      REQUIRE(by_slots.feasible);
      REQUIRE(by_budget.feasible);
      for (const plan* pl : {&by_slots, &by_budget}) {
        const report r = judge(p, *pl, slot_budget(s));
        CHECK(r.recomputed_ops == recomputes);
        CHECK(r.time_us == p.baseline_time_us() + 10.0 * static_cast<double>(recomputes));
        CHECK(r.peak_bytes == slot_budget(s));
        CHECK(pl->best_peak == r.peak_bytes);
      }
      // A budget one byte short of s slots gets s - 1.
      if (s > 1) {
        const report fewer = judge(p, live_plan("revolve", p, slot_budget(s) - 1), slot_budget(s) - 1);
        CHECK(fewer.recomputed_ops == revolve_forward_steps(l, s - 1) - (l - 1));
      }
    }
    // Below one slot's budget nothing fits; the plan says what it needs.
    const plan none_fits = run("revolve", p, slot_budget(1) - 1);
    CHECK(none_fits.kind == failure_kind::out_of_memory);
    CHECK(none_fits.best_peak == slot_budget(1));
    CHECK(none_fits.reason.find("1 slot needs 310 bytes") != std::string::npos);
  }
}

TEST_CASE("registered revolve: s slots laid out in (s + 2) A + 2 G, the greedy layout's cost") {
  // The layout keeps the gradient that lives across a recomputation sweep
  // above the slots, and the next one beside it: one G more than the live peak at most.
  for (int l = 4; l <= 24; ++l) {
    const problem p = layer_chain(l);
    for (std::int64_t s = 1; s < l; ++s) {
      CAPTURE(l);
      CAPTURE(s);
      const bytes_t arena = slot_budget(s) + gradient_bytes;
      const plan pl = run("revolve", p, arena);
      REQUIRE(pl.feasible);
      const report r = judge(p, pl, arena);
      CHECK(r.recomputed_ops == revolve_forward_steps(l, s) - (l - 1));
      CHECK(r.peak_live_bytes == slot_budget(s));
      CHECK(r.peak_bytes == pl.arena_bytes);
    }
  }
  // By hand, 8 layers and 1 slot: x, two working buffers and g_8 take 310 B;
  // g_7 is made beside g_8, at 310.
  const plan tight = run("revolve", layer_chain(8), slot_budget(1));
  CHECK(tight.kind == failure_kind::out_of_memory);
  CHECK(tight.best_peak == 320);
  CHECK(tight.reason.find("needs an arena of 320 bytes (320 B; 310 bytes live at its peak)") != std::string::npos);
}

TEST_CASE("revolve refuses graphs that are not chains, naming the op") {
  const problem p = test::residual::make();  // `add` reads a and c
  const plan pl = run("revolve", p, 1000);
  CHECK(pl.kind == failure_kind::planner_gave_up);
  CHECK(pl.reason == "revolve: not a chain: forward op 'add' reads 'a', which is not the output of the forward op "
                     "just before it");
  planner_options zero;
  zero.extra["slots"] = "0";
  CHECK_THROWS_AS((void)run("revolve", layer_chain(4), 1000, zero), invalid_argument);
}

#ifdef MEMPLAN_ENABLE_MILP
namespace {

/// The milp plan, judged; its time equals the simulator's (recompute only).
report judge_milp(const problem& p, bytes_t budget, const planner_options& o, plan* out = nullptr) {
  plan pl = live_plan("milp", p, budget, o);
  REQUIRE(pl.feasible);
  const report r = judge(p, pl, budget);
  CHECK(r.swapped_out_bytes == 0);
  CHECK(r.stall_us == 0);
  CHECK(pl.best_peak == r.peak_bytes);
  // Stopped early, it reports its objective: the simulator's time.
  if (const auto at = pl.reason.find(" s; "); at != std::string::npos) {
    CHECK(std::stod(pl.reason.substr(at + 4)) == doctest::Approx(r.time_us));
  }
  if (out != nullptr) *out = std::move(pl);
  return r;
}

}  // namespace

TEST_CASE("milp on a three-op chain: the optimum by hand") {
  // layer_chain(2) with budget 3A + G = 310: keeping x, a1, a2 and g2 at the loss
  // is exactly 310 B, so nothing is recomputed; at 300 B a1 must go after
  // f2 and come back for b2 (one 10 µs recompute): at the loss x, a2, g2 =
  // 210 B; at b2 x, g2, a1 (recomputed), g1 = 220 B; at f2 x, a1, a2 = 300 B.
  const problem p = layer_chain(2);
  REQUIRE(p.baseline_peak() == 310);
  REQUIRE(p.baseline_time_us() == 80);
  CHECK(judge_milp(p, 310, {}).time_us == 80);
  const report tight = judge_milp(p, 300, {});
  CHECK(tight.time_us == 90);
  CHECK(tight.recomputed_ops == 1);
  CHECK(tight.peak_bytes == 300);
  // Below x + a1 + a2 (f2 needs its input and output) nothing fits.
  const plan none_fits = run("milp", p, 299);
  CHECK(none_fits.kind == failure_kind::out_of_memory);
  CHECK(none_fits.reason == "milp: no recompute-only plan fits the budget of 299 bytes (299 B)");
}

TEST_CASE("milp equals revolve on chains of 4 to 7 layers at every slot count, proven optimal") {
  // Here the memory models coincide: with G < A, memplan's budget
  // (s + 2) A + G holds exactly revolve's s slots plus its working state
  // plus the output of the step being run, so no plan does better.
  for (int l = 4; l <= 7; ++l) {
    const problem p = layer_chain(l);
    for (std::int64_t s = 1; s < l; ++s) {
      CAPTURE(l);
      CAPTURE(s);
      plan pl;
      const report m = judge_milp(p, slot_budget(s), {}, &pl);
      CHECK(pl.reason.empty());  // proven optimal, no time limit
      CHECK(m.recomputed_ops == revolve_forward_steps(l, s) - (l - 1));
      CHECK(m.time_us == simulate(p, live_plan("revolve", p, slot_budget(s)), dev, slot_budget(s)).time_us);
    }
  }
}

TEST_CASE("milp seeded with revolve on chains of 8 to 24 layers: never slower, the seed fits its memory model") {
  // CBC cannot prove these optimal in test time (the gap stays open), so
  // milp starts from the registered revolve's plan, s slots laid out in
  // (s + 2) A + 2 G (above): that CBC accepts it shows the program's
  // memory accounting admits it.
  planner_options o;
  o.time_limit_s = 0.05;
  o.extra["seed-with"] = "revolve";
  for (int l = 8; l <= 24; ++l) {
    const problem p = layer_chain(l);
    for (const std::int64_t s : {std::int64_t{1}, std::int64_t{2}, std::int64_t{3}, std::int64_t{l / 2}}) {
      CAPTURE(l);
      CAPTURE(s);
      const report rv = simulate(p, live_plan("revolve", p, slot_budget(s)), dev, slot_budget(s));
      const report m = judge_milp(p, slot_budget(s) + gradient_bytes, o);
      CHECK(m.time_us <= rv.time_us);
    }
  }
}

TEST_CASE("checkpoint on chains: sqrt(n)-level peak with at most one extra forward pass; milp no slower there") {
  for (int l = 4; l <= 24; ++l) {
    CAPTURE(l);
    const problem p = layer_chain(l);
    const plan ck = run("checkpoint", p, p.baseline_peak());
    REQUIRE(ck.feasible);
    const report r = judge(p, ck, p.baseline_peak());
    // At most one forward pass recomputed (every layer but the kept ones).
    CHECK(r.recomputed_ops < l);
    // Kept: x, about sqrt(l) checkpoints, one segment of about sqrt(l)
    // layers recomputed at a time, the gradients: within (2 ceil(sqrt l) + 3) A + 2G.
    const auto root = static_cast<bytes_t>(std::ceil(std::sqrt(static_cast<double>(l))));
    CHECK(r.peak_bytes <= (2 * root + 3) * state_bytes + 2 * gradient_bytes);
    if (l <= 7) {
      plan pl;
      CHECK(judge_milp(p, r.peak_bytes, {}, &pl).time_us <= r.time_us);
    }
  }
}
#endif

#ifdef MEMPLAN_ENABLE_MILP
namespace {

/// A forward graph with a mirrored backward pass: the backward op of
/// forward op k reads the gradients its consumers' backward ops made and
/// k's inputs, and makes one gradient (G bytes). A loss reads the last output.
class dag_maker {
 public:
  explicit dag_maker(std::uint32_t seed) : rng_(seed) { outs_.push_back(m_.tensor("x", size(), tensor_kind::input)); }
  /// A forward op reading the outputs of `from` (0: x, k: the k-th op); returns its index.
  std::size_t layer(std::vector<std::size_t> from) {
    const std::size_t k = outs_.size();
    std::vector<index_t> in;
    for (const std::size_t f : from) {
      in.push_back(outs_[f]);
      consumers_[f].push_back(k);
    }
    outs_.push_back(m_.tensor("a" + std::to_string(k), size(), tensor_kind::activation));
    inputs_.push_back(from);
    m_.op("f" + std::to_string(k), time(), in, {outs_.back()});
    return k;
  }
  [[nodiscard]] std::size_t last() const { return outs_.size() - 1; }
  std::mt19937& rng() { return rng_; }

  problem finish() {
    const std::size_t n = last();
    std::vector<index_t> grad(n + 1, no_index);
    const index_t loss_grad = m_.tensor("gloss", gradient_bytes, tensor_kind::gradient);
    m_.op("loss", 20, {outs_[n]}, {loss_grad}, 0, phase::backward);
    for (std::size_t k = n; k >= 1; --k) {
      std::vector<index_t> in;
      if (k == n) in.push_back(loss_grad);
      for (const std::size_t c : consumers_[k]) in.push_back(grad[c]);
      for (const std::size_t f : inputs_[k - 1]) in.push_back(outs_[f]);
      grad[k] = m_.tensor("g" + std::to_string(k), gradient_bytes, tensor_kind::gradient);
      m_.op("b" + std::to_string(k), 2 * time(), in, {grad[k]}, 0, phase::backward);
    }
    return m_.compile();
  }

 private:
  bytes_t size() { return std::uniform_int_distribution<bytes_t>(5, 20)(rng_) * 10; }
  double time() { return static_cast<double>(std::uniform_int_distribution<int>(1, 5)(rng_)) * 10; }

  std::mt19937 rng_;
  test::graph_maker m_;
  std::vector<index_t> outs_;                               // per forward op k (0: x): its output
  std::vector<std::vector<std::size_t>> inputs_;            // per forward op k >= 1: what it reads
  std::map<std::size_t, std::vector<std::size_t>> consumers_;  // who reads the output of k
};

problem small_resnet(int blocks, std::uint32_t seed) {
  dag_maker d(seed);
  std::size_t h = d.layer({0});
  for (int b = 0; b < blocks; ++b) {
    const std::size_t c1 = d.layer({h});
    const std::size_t c2 = d.layer({d.layer({c1})});
    h = d.layer({h, c2});  // the residual add
  }
  return d.finish();
}

problem unet(int depth, std::uint32_t seed) {
  dag_maker d(seed);
  std::vector<std::size_t> down{d.layer({0})};
  for (int i = 1; i < depth; ++i) down.push_back(d.layer({d.layer({down.back()})}));  // pool, conv
  std::size_t up = down.back();
  for (int i = depth - 2; i >= 0; --i) up = d.layer({d.layer({up}), down[static_cast<std::size_t>(i)]});  // upsample, concat-conv
  return d.finish();
}

problem random_dag(int ops, std::uint32_t seed) {
  dag_maker d(seed);
  for (int k = 1; k <= ops; ++k) {
    std::vector<std::size_t> from{d.last()};
    if (k > 2 && std::uniform_int_distribution<int>(0, 2)(d.rng()) == 0) {
      from.push_back(std::uniform_int_distribution<std::size_t>(0, d.last() - 1)(d.rng()));
    }
    d.layer(from);
  }
  return d.finish();
}

bool recompute_only(const plan& pl) {
  return std::ranges::all_of(pl.actions, [](const action& a) {
    return a.parts == 1 && a.kind != action_kind::swap_out && a.kind != action_kind::swap_in;
  });
}

/// Every registered planner's recompute-only plans at three budgets; milp's
/// plan is never slower. With `seed_with_rivals`, milp starts from those
/// plans (under `milp_options`' time limit). Returns how many plans milp
/// was compared with.
int milp_never_beaten(const problem& p, planner_options milp_options, bool seed_with_rivals) {
  int compared = 0;
  for (const int percent : {55, 70, 85}) {
    const bytes_t budget = p.baseline_peak() * percent / 100;
    CAPTURE(percent);
    std::vector<std::pair<std::string_view, report>> rivals;
    for (const auto& entry : planners()) {
      if (entry.name == "milp") continue;
      CAPTURE(entry.name);
      planner_options o;
      o.time_limit_s = 1;
      for (const planner_option& opt : entry.options) {
        if (opt.name == "iterations" || opt.name == "particles") o.extra[std::string(opt.name)] = "20";
      }
      const plan pl = entry.run(p, dev, budget, o);
      if (pl.feasible && recompute_only(pl)) rivals.emplace_back(entry.name, judge(p, pl, budget));
    }
    if (seed_with_rivals) {
      std::string names;
      for (const auto& [name, r] : rivals) names.append(names.empty() ? "" : ",").append(name);
      if (!names.empty()) milp_options.extra["seed-with"] = names;
    }
    // milp's optimum is over plans whose live peak fits; each rival's layout fits, so its live peak does too.
    const plan best = live_plan("milp", p, budget, milp_options);
    if (rivals.empty()) continue;
    REQUIRE(best.feasible);
    const report mr = judge(p, best, budget);
    for (const auto& [name, r] : rivals) {
      CAPTURE(name);
      CHECK(mr.time_us <= r.time_us + 1e-9);
      ++compared;
    }
  }
  return compared;
}

}  // namespace

TEST_CASE("milp is never beaten by a registered planner's recompute-only plan on graphs of up to 60 ops") {
  SUBCASE("small graphs, proven optimal") {
    int compared = 0;
    for (const problem& p : {small_resnet(3, 1), unet(4, 2), random_dag(12, 3), random_dag(14, 4)}) {
      CAPTURE(p.num_steps());
      CHECK(p.num_steps() <= 31);
      compared += milp_never_beaten(p, {}, false);
    }
    CHECK(compared >= 8);
  }
  SUBCASE("59 ops, seeded with the others' plans under a time limit") {
    // CBC does not close the gap on 59 ops in test time (unseeded, dtr's
    // plan at 55 % beats its incumbent after 2 s), so milp starts from
    // every rival plan: each must fit the program's memory model, or milp
    // could come out slower.
    planner_options o;
    o.time_limit_s = 1;
    const problem p = small_resnet(7, 5);
    REQUIRE(p.num_steps() == 59);
    CHECK(milp_never_beaten(p, o, true) >= 3);
  }
}
#endif
