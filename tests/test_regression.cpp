// Pinned numbers on zoo models (CTest label `regression`): each cell of
// tests/data/regression.json's "zoo" planned through the registry and
// judged by the simulator, as `memplan plan` does; its feasibility, peak
// and offloaded state as pinned, its overhead within the file's tolerance.
// A change that moves them fails here; where meant, the file's regenerate
// command writes the new numbers.
#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "memplan/compile.hpp"
#include "memplan/cost/devices.hpp"
#include "memplan/io/size.hpp"
#include "memplan/model/zoo.hpp"
#include "memplan/planners/registry.hpp"
#include "memplan/sim/simulator.hpp"
#include "regression_data.hpp"
#include "sim_fixtures.hpp"

using namespace memplan;

TEST_CASE("regression: zoo cells through the registry and the simulator") {
  const nlohmann::json data = test::regression_data();
  REQUIRE_FALSE(data.at("zoo").empty());
  for (const nlohmann::json& cell : data.at("zoo")) {
    INFO(cell.dump());
    const device_spec& d = find_device(cell.at("device").get<std::string>());
    model::options o;
    o.batch = cell.at("batch").get<int>();
    o.scale = cell.value("scale", 1.0);
    const problem p = compile(model::build(cell.at("model").get<std::string>(), o, d));
    const bytes_t budget = io::resolve(io::parse_size(cell.at("budget").get<std::string>()), p.baseline_peak());
    const plan pl = find_planner(cell.at("planner").get<std::string>()).run(p, d, budget, planner_options{});
    const report r = simulate(p, pl, d, budget);
    CHECK(pl.feasible == cell.at("feasible").get<bool>());
    CHECK(r.feasible == pl.feasible);
    if (!pl.feasible) continue;  // an infeasible plan's figures mean nothing (tools/regression.py keeps none)
    CHECK(r.overhead == test::pinned(cell.at("overhead").get<double>(), data));
    CHECK(r.peak_bytes == cell.at("peak_bytes").get<bytes_t>());
    CHECK(r.offloaded_state_bytes == cell.at("offloaded_state_bytes").get<bytes_t>());
    if (pl.feasible) test::check_valid(p, pl, d, budget);
  }
}
