// Tests of `auto` (planners/portfolio.hpp): it returns the fastest plan that
// fits among its members, as the simulator times each member's own plan;
// none's plan where everything fits; the lowest peak, with every verdict,
// where nothing does; and it checks its option. And of the registry's one
// verdict: a plan a registered planner calls feasible has passed the validator.
#include <doctest/doctest.h>

#include <limits>
#include <string>
#include <string_view>

#include "memplan/compile.hpp"
#include "memplan/cost/devices.hpp"
#include "memplan/model/zoo.hpp"
#include "memplan/planners/registry.hpp"
#include "memplan/sim/simulator.hpp"
#include "memplan/sim/validator.hpp"
#include "sim_fixtures.hpp"

namespace {

using namespace memplan;

problem resnet50(int batch) {
  model::options o;
  o.batch = batch;
  return compile(model::build("resnet50", o, find_device("titan-rtx")));
}

TEST_CASE("auto returns the fastest member plan that fits, by the simulator's time") {
  const device_spec& dev = find_device("titan-rtx");
  const problem p = resnet50(32);
  for (const int percent : {60, 35}) {
    CAPTURE(percent);
    const bytes_t budget = p.baseline_peak() * percent / 100;
    // The portfolio's answer worked out here, member by member.
    double fastest = std::numeric_limits<double>::infinity();
    std::string winner;
    int fit = 0;
    for (const std::string_view name : planner_names(portfolio_planner::default_portfolio, "auto", "portfolio")) {
      const report r = simulate(p, find_planner(name).run(p, dev, budget, planner_options{}), dev, budget);
      if (!r.feasible) continue;
      ++fit;
      if (r.time_us < fastest) {
        fastest = r.time_us;
        winner = name;
      }
    }
    REQUIRE(fit > 0);
    const plan pl = find_planner("auto").run(p, dev, budget, planner_options{});
    REQUIRE(pl.feasible);
    const report r = simulate(p, pl, dev, budget);
    CHECK(r.time_us == fastest);
    CHECK(r.peak_bytes <= budget);
    CHECK(pl.best_peak == r.peak_bytes);
    CHECK_MESSAGE(pl.reason.starts_with(detail::concat("auto: ", winner, "'s plan, the fastest of the ", fit,
                                                       " of 10 planners whose plans fit")),
                  pl.reason);
    CHECK(validate(p, pl, dev, budget).ok);
  }
}

TEST_CASE("auto keeps everything where everything fits, and names every verdict where nothing does") {
  const device_spec& dev = find_device("titan-rtx");
  const problem p = resnet50(8);
  // Keeping everything needs the arena of none's layout: the baseline peak plus rounding.
  const bytes_t keep_all = find_planner("none").run(p, dev, p.baseline_peak() * 2, {}).arena_bytes;
  const plan all = find_planner("auto").run(p, dev, keep_all, planner_options{});
  REQUIRE(all.feasible);
  CHECK(simulate(p, all, dev, keep_all).time_us == doctest::Approx(p.baseline_time_us()));
  CHECK_MESSAGE(all.reason.starts_with("auto: none's plan, the fastest of the "), all.reason);

  // 1 MiB: less than resnet50's parameters alone (25.6 M floats).
  const plan nothing = find_planner("auto").run(p, dev, bytes_t{1} << 20, planner_options{});
  CHECK(nothing.kind == failure_kind::out_of_memory);
  CHECK_MESSAGE(nothing.reason.starts_with("auto: none of the 10 planners' plans fits; the lowest peak, "),
                nothing.reason);
  for (const char* name : {"capuchin: ", "tsplit: ", "dtr: ", "delta: ", "revolve: "}) {
    CHECK_MESSAGE(nothing.reason.find(name) != std::string::npos, name);
  }
  CHECK_FALSE(simulate(p, nothing, dev, bytes_t{1} << 20).feasible);
}

TEST_CASE("auto's portfolio option and time limit") {
  const device_spec& dev = find_device("titan-rtx");
  const problem p = resnet50(8);
  const bytes_t budget = p.baseline_peak() * 6 / 10;
  planner_options o;
  o.extra["portfolio"] = "vdnn-all,checkpoint";
  const plan two = find_planner("auto").run(p, dev, budget, o);
  REQUIRE(two.feasible);
  // At 60 % checkpointing does not fit resnet50 b8 (its plan peaks at 554 MiB
  // against 517 MiB), vdnn-all does: auto returns vdnn-all's plan.
  const report vdnn = simulate(p, find_planner("vdnn-all").run(p, dev, budget, {}), dev, budget);
  const report ckpt = simulate(p, find_planner("checkpoint").run(p, dev, budget, {}), dev, budget);
  REQUIRE(vdnn.feasible);
  REQUIRE_FALSE(ckpt.feasible);
  CHECK(simulate(p, two, dev, budget).time_us == vdnn.time_us);
  CHECK_MESSAGE(two.reason == "auto: vdnn-all's plan, the fastest of the 1 of 2 planners whose plans fit", two.reason);

  // A spent limit: the first member runs, the others are skipped.
  planner_options spent;
  spent.time_limit_s = 1e-9;
  const bytes_t keep_all = find_planner("none").run(p, dev, p.baseline_peak() * 2, {}).arena_bytes;
  const plan first = find_planner("auto").run(p, dev, keep_all, spent);
  REQUIRE(first.feasible);
  CHECK_MESSAGE(first.reason ==
                    "auto: none's plan, the fastest of the 1 of 1 planners whose plans fit (the time limit of 1e-09 s "
                    "ran out before 9 more)",
                first.reason);
  // Where the one member that ran does not fit, the time limit is the verdict.
  const plan starved = find_planner("auto").run(p, dev, bytes_t{1} << 20, spent);
  CHECK(starved.kind == failure_kind::time_limit);
  CHECK_MESSAGE(starved.reason.starts_with("auto: none of the 1 planners' plans fits (the time limit of 1e-09 s ran "
                                           "out before 9 more)"),
                starved.reason);

  // An online policy's plan keeps its allocator's layout through auto.
  o.extra["portfolio"] = "dtr";
  const plan online = find_planner("auto").run(p, dev, budget, o);
  const plan dtr = find_planner("dtr").run(p, dev, budget, {});
  REQUIRE(dtr.feasible);
  REQUIRE(online.feasible);
  CHECK(online.offsets == dtr.offsets);
  CHECK(online.arena_bytes == dtr.arena_bytes);
  CHECK(online.allocator_us == dtr.allocator_us);

  o.extra["portfolio"] = "none,auto";
  CHECK_THROWS_WITH_AS(find_planner("auto").run(p, dev, budget, o),
                       "auto: --portfolio takes a comma-separated list of other planners, got 'none,auto'",
                       invalid_argument);
  o.extra["portfolio"] = "none,,dtr";
  CHECK_THROWS_AS(find_planner("auto").run(p, dev, budget, o), invalid_argument);
  o.extra["portfolio"] = "none,fastest";
  CHECK_THROWS_WITH_AS(find_planner("auto").run(p, dev, budget, o), doctest::Contains("unknown planner 'fastest'"),
                       invalid_argument);
}

TEST_CASE("register_planner refuses names that are taken or not one word, and registers nothing then") {
  // examples/embedding/own_planner.cpp registers one (CTest example_own_planner): in a
  // process of its own, as the registry is shared by every test here.
  const std::size_t before = planners().size();
  CHECK_THROWS_WITH_AS(register_planner<none_planner>("tsplit", "again"),
                       "register_planner: a planner is called 'tsplit' already", invalid_argument);
  CHECK_THROWS_WITH_AS(register_planner<none_planner>("a,b", "two"),
                       "register_planner: a planner's name is one word without commas, got 'a,b'", invalid_argument);
  CHECK_THROWS_AS(register_planner<none_planner>("", "none"), invalid_argument);
  CHECK_THROWS_AS(register_planner<none_planner>("my planner", "two words"), invalid_argument);
  CHECK(planners().size() == before);
}

}  // namespace

namespace {

/// A planner with a bug: it frees w1 (the residual block's) after its one
/// use, losing the parameter, and calls the plan feasible.
struct loses_a_parameter {
  plan operator()(const problem& p, const device_spec&, bytes_t, const planner_options&) const {
    return test::broken::parameter_lost(p);
  }
};

}  // namespace

TEST_CASE("one verdict: a registered planner's plan that the validator rejects is infeasible, invalid_plan") {
  // detail::run_planner runs every registered planner (plan, compare,
  // maxbatch, auto's members, --seed-with).
  const problem p = test::residual::make();
  const device_spec dev = test::byte_per_us_device();
  const plan bad = detail::run_planner<loses_a_parameter>(p, dev, 1000, {});
  CHECK_FALSE(bad.feasible);
  CHECK(bad.kind == failure_kind::invalid_plan);
  CHECK_MESSAGE(bad.reason ==
                    "parameter-lost: the validator rejects the plan (a planner bug): action 1 (free 'w1'): loses "
                    "parameter 'w1', which has no host copy (and 1 more)",
                bad.reason);
  CHECK(simulate(p, bad, dev, 1000).kind == failure_kind::invalid_plan);
  // A sound plan passes unchanged.
  const plan none = detail::run_planner<none_planner>(p, dev, 1000, {});
  CHECK(none.feasible);
  CHECK(none.kind == failure_kind::none);
  CHECK(none.reason.empty());
}
