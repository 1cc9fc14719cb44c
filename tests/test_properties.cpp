// Property tests (issue 5): generated training graphs x budgets from the
// lower bound to the baseline peak x every registered planner x seeds. Each
// case must give a plan that the validator and the simulator accept within
// the budget, or an infeasible plan with a reason (testing/properties.hpp);
// a feasible plan of a graph whose baseline peak is at most 16 MiB also runs
// on the host executor, whose ops check every input (testing/integrity.hpp).
// A failing case is shrunk and saved as a memplan-graph document under
// tests/data/regressions/, which the last test case replays.
//
// Case count: MEMPLAN_PROPERTY_CASES (default 2,400, what CI runs); the
// seed of the first graph: MEMPLAN_PROPERTY_SEED (default 1); the size of
// every 24th graph: MEMPLAN_PROPERTY_BIG times 750-1,050 ops (default 1).
// A longer run (docs/results.md, "Reliability"):
//   MEMPLAN_PROPERTY_CASES=50000 MEMPLAN_PROPERTY_SEED=1000 MEMPLAN_PROPERTY_BIG=3
//     build/ci/tests/test_properties -tc='every planner*'

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "memplan/compile.hpp"
#include "memplan/cost/devices.hpp"
#include "memplan/io/graph_json.hpp"
#include "memplan/planners/registry.hpp"
#include "memplan/testing/generators.hpp"
#include "memplan/testing/integrity.hpp"
#include "memplan/testing/properties.hpp"
#include "memplan/testing/shrink.hpp"
#include "sim_fixtures.hpp"

namespace {

using namespace memplan;
using testing::graph_shape;

std::uint64_t env_number(const char* name, std::uint64_t fallback) {
  const char* text = std::getenv(name);
  return text != nullptr && *text != '\0' ? std::strtoull(text, nullptr, 10) : fallback;
}

const std::filesystem::path regressions_dir = std::filesystem::path(MEMPLAN_SOURCE_DIR) / "tests/data/regressions";

/// Settings that keep search planners quick in a run of thousands of cases
/// (HOME's swarm, the MILP's graph size): applied to a planner only if it
/// declares the option.
const std::map<std::string, std::string, std::less<>> small_search{
    {"particles", "6"}, {"iterations", "4"}, {"max-ops", "40"},
};

/// Options for one case: a time limit of 1 s as a backstop for exact
/// solvers, or one that has already run out (1 ns) for every seventh graph:
/// a planner must then still return its best plan so far, valid or
/// infeasible with a reason. Every fourth graph plans on two threads.
planner_options options_for(const planner_entry& e, std::uint64_t seed) {
  planner_options o;
  o.seed = seed;
  o.time_limit_s = seed % 7 == 3 ? 1e-9 : 1.0;
  o.threads = seed % 4 == 0 ? 2 : 1;
  for (const planner_option& opt : e.options) {
    if (const auto it = small_search.find(opt.name); it != small_search.end()) o.extra.emplace(it->first, it->second);
  }
  return o;
}

/// One generated graph's parameters, drawn from its seed.
struct graph_case {
  testing::graph_options options;
  std::uint64_t seed = 0;
};

graph_case draw_graph(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto pick = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  graph_case c;
  c.seed = seed;
  auto& o = c.options;
  o.shape = static_cast<graph_shape>(seed % testing::graph_shape_names.size());
  // Mostly small graphs; every 24th a big one: 750 to 1,050 ops in all, or
  // MEMPLAN_PROPERTY_BIG times that.
  o.forward_ops = seed % 24 == 0 ? pick(250, 350) * static_cast<int>(env_number("MEMPLAN_PROPERTY_BIG", 1)) : static_cast<int>(std::exp(std::uniform_real_distribution<double>(
                                                          std::log(2.0), std::log(120.0))(rng)));
  switch (seed % 3) {
    case 0: o.min_bytes = 256; o.max_bytes = 256LL << 20; break;              // 6 orders of magnitude
    case 1: o.min_bytes = 1; o.max_bytes = 100'000; break;                    // bytes to 100 kB
    default: o.min_bytes = 10'000'000'000; o.max_bytes = 1'000'000'000'000'000; break;  // 10 GB to 1 PB
  }
  o.zero_bytes_fraction = pick(0, 1) == 0 ? 0.0 : 0.2;
  o.not_recomputable_fraction = pick(0, 3) * 0.2;
  o.not_splittable_fraction = pick(0, 4) * 0.25;
  o.max_outputs = pick(1, 6);
  o.updates = pick(0, 3) != 0;
  return c;
}

/// Budgets from below the lower bound to the baseline peak.
std::vector<bytes_t> budgets_for(const problem& p) {
  const bytes_t lo = testing::peak_lower_bound(p), hi = p.baseline_peak();
  std::vector<bytes_t> b{lo, hi};
  if (lo > 0) b.push_back(lo - 1);
  for (const double f : {0.1, 0.3, 0.6}) b.push_back(lo + static_cast<bytes_t>(f * static_cast<double>(hi - lo)));
  std::ranges::sort(b);
  b.erase(std::ranges::unique(b).begin(), b.end());
  return b;
}

/// Where a budget sits between the lower bound and the baseline peak, so that
/// a shrunk graph is asked at the same relative budget.
double position_of(bytes_t budget, const problem& p) {
  const bytes_t lo = testing::peak_lower_bound(p), hi = p.baseline_peak();
  if (budget < lo) return -1;
  return hi > lo ? static_cast<double>(budget - lo) / static_cast<double>(hi - lo) : 0;
}
bytes_t budget_at(double position, const problem& p) {
  const bytes_t lo = testing::peak_lower_bound(p), hi = p.baseline_peak();
  if (position < 0) return lo > 0 ? lo - 1 : 0;
  return lo + static_cast<bytes_t>(position * static_cast<double>(hi - lo));
}

/// Shrinks a failing case and saves it; returns the file's path.
std::filesystem::path shrink_and_save(const graph& g, const planner_entry& e, bytes_t budget,
                                      const planner_options& o, const std::string& failure) {
  const device_spec& dev = find_device("titan-rtx");
  const double position = position_of(budget, compile(g));
  const std::string property = testing::broken_property(failure);
  std::string last = failure;
  const graph small = testing::shrink(g, [&](const graph& candidate) {
    try {
      const problem p = compile(candidate);
      const std::string f = testing::check_planner(e, p, dev, budget_at(position, p), o).failure;
      if (f.empty() || testing::broken_property(f) != property) return false;
      last = f;
      return true;
    } catch (const error&) {
      return false;  // the candidate itself is malformed (e.g. bytes overflow)
    }
  });
  const problem p = compile(small);
  auto doc = io::to_json(small, dfs_schedule(small));
  doc["regression"] = {{"planner", e.name},        {"budget_bytes", budget_at(position, p)},
                       {"seed", o.seed},           {"time_limit_s", o.time_limit_s},
                       {"threads", o.threads},     {"extra", o.extra},
                       {"failure", last}};
  std::filesystem::create_directories(regressions_dir);
  const auto path = regressions_dir / (std::string(e.name) + "-" + g.name() + ".json");
  std::ofstream(path) << doc.dump(1) << '\n';
  return path;
}

struct tally {
  int cases = 0;
  int feasible = 0;
  double seconds = 0;
};

}  // namespace

TEST_CASE("generated graphs have a forward/backward structure and the sizes asked for") {
  for (std::size_t shape = 0; shape < testing::graph_shape_names.size(); ++shape) {
    testing::graph_options o;
    o.shape = static_cast<graph_shape>(shape);
    o.forward_ops = 30;
    o.min_bytes = 1000;
    o.max_bytes = 100'000'000;
    o.zero_bytes_fraction = 0.1;
    const graph g = testing::random_training_graph(o, 7);
    CAPTURE(testing::to_string(o.shape));
    const problem p = compile(g);
    std::map<phase, int> ops;
    for (std::size_t s = 0; s < p.num_steps(); ++s) ++ops[p.op_phase[s]];
    CHECK(ops[phase::forward] >= 30);
    CHECK(ops[phase::backward] > ops[phase::forward]);  // one backward per forward op, plus the loss
    CHECK(ops[phase::update] > 0);
    int zero = 0;
    std::size_t widest = 0;
    for (std::size_t t = 0; t < p.num_tensors(); ++t) {
      zero += p.bytes[t] == 0 ? 1 : 0;
      CHECK(p.bytes[t] <= 100'000'000);
      if (p.bytes[t] != 0 && p.kind[t] == tensor_kind::activation) CHECK(p.bytes[t] >= 1000);
    }
    for (std::size_t s = 0; s < p.num_steps(); ++s) widest = std::max(widest, p.outputs(static_cast<index_t>(s)).size());
    CHECK(zero > 0);
    CHECK(widest >= (o.shape == graph_shape::residual ? 2U : 3U));  // residual: input and weight gradients
    // Same seed, same graph.
    CHECK(io::to_json(g, dfs_schedule(g)) == io::to_json(testing::random_training_graph(o, 7), dfs_schedule(g)));
    // Every activation is read (by a later op or the loss): nothing is dead on arrival.
    for (std::size_t t = 0; t < p.num_tensors(); ++t) {
      if (p.kind[t] == tensor_kind::activation) CHECK(p.last_use[t] != no_index);
    }
    const bytes_t bound = testing::peak_lower_bound(p);
    CHECK(bound > 0);
    CHECK(bound <= p.baseline_peak());
  }
}

TEST_CASE("the lower bound on a hand-checked graph") {
  // f: x(100), w(40 parameter) -> a(300), workspace 50, splittable;
  // b: a, x -> g(200), workspace 70, not splittable.
  // Step f needs only w = 40 whole (micro-ops shrink x, a and the workspace
  // at will); step b needs a + x + g + 70 = 670, the bound. Baseline peak:
  // w + x + a + g + 70 = 710.
  graph g("bound");
  const index_t x = g.add_tensor({.id = 0, .name = "x", .bytes = 100, .kind = tensor_kind::input, .shape = {}, .dtype = {}});
  const index_t a = g.add_tensor({.id = 1, .name = "a", .bytes = 300, .kind = tensor_kind::activation, .shape = {}, .dtype = {}});
  const index_t gr = g.add_tensor({.id = 2, .name = "g", .bytes = 200, .kind = tensor_kind::gradient, .shape = {}, .dtype = {}});
  const index_t w = g.add_tensor({.id = 3, .name = "w", .bytes = 40, .kind = tensor_kind::parameter, .shape = {}, .dtype = {}});
  g.add_op({.id = 0, .name = "f", .type = "op", .phase = phase::forward, .time_us = 1, .workspace_bytes = 50,
            .inputs = {x, w}, .outputs = {a}, .recomputable = true, .split_dims = {0}});
  g.add_op({.id = 1, .name = "b", .type = "op", .phase = phase::backward, .time_us = 1, .workspace_bytes = 70,
            .inputs = {a, x, a}, .outputs = {gr}, .recomputable = false, .split_dims = {}});
  const problem p = compile(g);
  CHECK(testing::peak_lower_bound(p) == 670);
  CHECK(p.baseline_peak() == 710);
}

TEST_CASE("check_plan: an infeasible plan says why, with a failure kind; a feasible one has none") {
  // The chain of sim_fixtures.hpp: keeping every tensor peaks at 400 B.
  const problem p = test::chain::make();
  const device_spec dev = test::byte_per_us_device();
  plan pl = keep_all_plan(p, 350);
  pl.feasible = false;
  pl.reason = "keeping every tensor needs 400 bytes";
  CHECK(testing::check_plan(p, pl, dev, 350) == "kind: infeasible with failure kind none");
  pl.kind = failure_kind::out_of_memory;
  CHECK(testing::check_plan(p, pl, dev, 350) == "");
  pl = keep_all_plan(p, 400);
  CHECK(testing::check_plan(p, pl, dev, 400) == "");
  pl.kind = failure_kind::time_limit;
  CHECK(testing::check_plan(p, pl, dev, 400) == "kind: feasible with failure kind time_limit");
}

TEST_CASE("the shrinker finds the smallest graph that still fails") {
  // Predicate: "some op writes a tensor of more than 5,000 bytes". A chain of
  // 40 layers with sizes up to 10^6 shrinks to one op writing one such tensor.
  testing::graph_options o;
  o.forward_ops = 40;
  o.min_bytes = 1000;
  o.max_bytes = 1'000'000;
  const graph g = testing::random_training_graph(o, 3);
  const auto fails = [](const graph& c) {
    for (std::size_t v = 0; v < c.num_ops(); ++v) {
      for (const index_t t : c.op(static_cast<index_t>(v)).outputs) {
        if (c.tensor(t).bytes > 5000) return true;
      }
    }
    return false;
  };
  REQUIRE(fails(g));
  const graph small = testing::shrink(g, fails);
  CHECK(fails(small));
  CHECK(small.num_ops() == 1);
  REQUIRE(small.op(0).outputs.size() == 1);
  const bytes_t b = small.tensor(small.op(0).outputs[0]).bytes;
  CHECK(b > 5000);
  CHECK(b <= 10'000);  // halving stops just above the threshold
  CHECK(small.op(0).inputs.empty());
  CHECK(small.op(0).time_us == 1);
}

TEST_CASE("every planner on generated graphs: valid within budget, or infeasible with a reason") {
  const device_spec& dev = find_device("titan-rtx");
  const auto target = static_cast<int>(env_number("MEMPLAN_PROPERTY_CASES", 2400));
  std::uint64_t seed = env_number("MEMPLAN_PROPERTY_SEED", 1);
  std::map<std::string, tally, std::less<>> per_planner;
  std::map<std::string, bool, std::less<>> shrunk;  // one shrink per planner and property
  int cases = 0, graphs = 0, budgets = 0, executed = 0;
  constexpr bytes_t integrity_limit = bytes_t{16} << 20;
  std::size_t largest = 0;
  for (; cases < target; ++seed, ++graphs) {
    const graph_case gc = draw_graph(seed);
    const graph g = testing::random_training_graph(gc.options, seed);
    const problem p = compile(g);
    largest = std::max(largest, p.num_steps());
    for (const bytes_t budget : budgets_for(p)) {
      ++budgets;
      for (const planner_entry& e : planners()) {
        const planner_options o = options_for(e, seed);
        CAPTURE(e.name);
        CAPTURE(g.name());
        CAPTURE(budget);
        const auto start = std::chrono::steady_clock::now();
        const testing::planner_check check = testing::check_planner(e, p, dev, budget, o);
        std::string failure = check.failure;
        // The executor's integrity check (issue 10) where the arena is small
        // enough to allocate: every op reads exactly what it would unplanned.
        if (failure.empty() && check.feasible && p.baseline_peak() <= integrity_limit) {
          const testing::integrity_check run = testing::check_integrity(p, check.plan, budget, &dev);
          failure = run.failure;
          executed += run.ran ? 1 : 0;
        }
        tally& t = per_planner[std::string(e.name)];
        t.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        ++t.cases;
        ++cases;
        t.feasible += check.feasible ? 1 : 0;
        if (failure.empty()) continue;
        const std::string key = std::string(e.name) + "/" + testing::broken_property(failure);
        std::string saved = "(not shrunk: an earlier case broke the same property)";
        if (!shrunk[key]) {
          shrunk[key] = true;
          saved = shrink_and_save(g, e, budget, o, failure).string();
        }
        FAIL_CHECK(failure << "\n  shrunk case: " << saved);
      }
    }
  }
  MESSAGE(cases << " cases: " << graphs << " graphs (up to " << largest << " ops) x " << budgets << " budgets in all x "
                << planners().size() << " planners; " << executed << " plans run by the host executor");
  for (const auto& [name, t] : per_planner) {
    MESSAGE(name << ": " << t.cases << " cases, " << t.feasible << " feasible, " << t.seconds << " s");
  }
  CHECK(cases >= target);
}

TEST_CASE("saved regressions replay") {
  REQUIRE(std::filesystem::is_directory(regressions_dir));  // tests/data/regressions is in the tree
  const device_spec& dev = find_device("titan-rtx");
  int replayed = 0;
  for (const auto& file : std::filesystem::directory_iterator(regressions_dir)) {
    if (file.path().extension() != ".json") continue;
    CAPTURE(file.path().string());
    const auto doc = io::read_graph_file(file.path());
    const auto meta = nlohmann::json::parse(std::ifstream(file.path()))["regression"];
    const std::string name = meta["planner"];
    bool known = false;
    for (const auto& e : planners()) known = known || e.name == name;
    if (!known) {
      MESSAGE("skipped: planner '" << name << "' is not registered");
      continue;
    }
    planner_options o;
    o.seed = meta["seed"];
    o.time_limit_s = meta["time_limit_s"];
    o.threads = meta["threads"];
    for (const auto& [k, v] : meta["extra"].items()) o.extra.emplace(k, v.get<std::string>());
    const problem p = compile(doc.graph, doc.schedule);
    CHECK(testing::check_planner(find_planner(name), p, dev, meta["budget_bytes"], o).failure == "");
    ++replayed;
  }
  CHECK(replayed >= 1);
}
