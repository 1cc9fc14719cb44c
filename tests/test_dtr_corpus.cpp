// The real logs of ../shared/corpus/dtr-logs (io/dtr_log.hpp) against the
// DTR simulator's no-eviction peaks and its h_DTR^eq overheads, and delta,
// tsplit and capuchin against dtr on them (issue 4's acceptance), with the
// ratios pinned in tests/data/regression.json's "dtr_log" cells. Without the
// corpus the program says so and exits 77: CTest reports it skipped. The
// environment variable MEMPLAN_SHARED_DIR, where set, replaces ../shared.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "main_or_skip.hpp"
#include "memplan/cost/devices.hpp"
#include "memplan/io/dtr_log.hpp"
#include "memplan/planners/registry.hpp"
#include "memplan/problem.hpp"
#include "memplan/sim/simulator.hpp"
#include "memplan/sim/validator.hpp"
#include "regression_data.hpp"

namespace {

using namespace memplan;

// The corpus README's no-eviction peaks (GB) and the DTR simulator's
// h_DTR^eq compute-time ratios at budgets 0.3, 0.5, 0.7, 0.9 of that peak.
struct corpus_log {
  const char* prefix;
  double peak_gb;
  double time_ms;
  double ratio[4];  // 0: no reference point
};
constexpr corpus_log corpus[] = {
    {"tv_densenet121", 11.02, 355.3, {}},      {"inceptionv4", 11.25, 636.4, {}},
    {"resnet32", 10.06, 291.9, {1.179, 1.107, 1.046, 1.013}},
    {"transformer", 9.86, 276.3, {1.124, 1.058, 1.031, 1.009}},
    {"unet", 8.42, 435.3, {}},                 {"treelstm", 0.170, 120.5, {}},
    {"lstm", 5.60, 769.5, {}},                 {"unroll_gan", 0.253, 125.5, {}},
};

/// ../shared/corpus/dtr-logs, or $MEMPLAN_SHARED_DIR/corpus/dtr-logs.
std::filesystem::path corpus_dir() {
  const char* shared = std::getenv("MEMPLAN_SHARED_DIR");
  return std::filesystem::path(shared != nullptr ? shared : MEMPLAN_SHARED_DIR) / "corpus" / "dtr-logs";
}

std::filesystem::path corpus_file(const char* prefix) {
  for (const auto& e : std::filesystem::directory_iterator(corpus_dir())) {
    if (e.path().filename().string().starts_with(std::string(prefix) + "-")) return e.path();
  }
  return {};
}

/// The corpus log named by `prefix`, read and compiled.
struct corpus_case {
  io::dtr_log log;
  problem p;
};
corpus_case load(const char* prefix) {
  const auto path = corpus_file(prefix);
  REQUIRE_FALSE(path.empty());
  io::dtr_log log = io::read_dtr_log_file(path);
  problem p = compile(log.graph, log.schedule);
  return {std::move(log), std::move(p)};
}

TEST_CASE("dtr log: the corpus, against the DTR simulator") {
  const device_spec titan_v = find_device("titan-v");
  for (const corpus_log& c : corpus) {
    INFO(std::string(c.prefix));
    const auto [log, p] = load(c.prefix);
    // Within 1 % of the DTR simulator's replay (the README's claim).
    CHECK(static_cast<double>(log.refcount_peak) / 1e9 == doctest::Approx(c.peak_gb).epsilon(0.01));
    CHECK(p.baseline_time_us() / 1e3 == doctest::Approx(c.time_ms).epsilon(0.01));
    CHECK(p.baseline_peak() <= log.refcount_peak);  // memplan frees at the last read
    if (c.ratio[0] == 0) continue;
    const double ratios[] = {0.3, 0.5, 0.7, 0.9};
    for (int i = 0; i < 4; ++i) {
      const auto budget = static_cast<bytes_t>(ratios[i] * static_cast<double>(log.refcount_peak));
      const plan pl = dtr_planner{}(p, titan_v, budget, planner_options{});
      REQUIRE(pl.feasible);
      const report r = simulate(p, pl, titan_v, budget);
      REQUIRE(r.feasible);
      // The DTR simulator counts live bytes; dtr allocates through PyTorch's
      // caching allocator (runtime/caching_allocator.hpp), whose
      // fragmentation costs releases and whose cudaMallocs cost time: at
      // or above the simulator's ratio (less 1 %: memplan frees at the last
      // read), by at most 20 % (16 % on the Transformer at 0.3,
      // docs/results.md).
      const double ratio = r.time_us / p.baseline_time_us();
      CHECK(ratio >= c.ratio[i] * 0.99);
      CHECK(ratio <= c.ratio[i] * 1.20);
      if (p.num_steps() < 500) {
        const validation v = validate(p, pl, titan_v, budget);
        CHECK_MESSAGE(v.ok, (v.errors.empty() ? std::string() : v.errors.front()));
      }
    }
  }
}

/// The compute-time ratio of `pl` (the DTR simulator's measure; stalls
/// included), or -1 where it does not fit.
double ratio_of(const problem& p, const plan& pl, bytes_t budget, const device_spec& dev) {
  if (!pl.feasible) return -1.0;
  const report r = simulate(p, pl, dev, budget);
  return r.feasible ? r.time_us / p.baseline_time_us() : -1.0;
}

/// Whether regression.json's DTR-log `cell` pins planner `name`.
bool pinned_for(const nlohmann::json& cell, std::string_view name) {
  return cell.at("planner").get<std::string>() == name;
}

/// `run` (the registry's `name`: laid out, validated) on every corpus log at 0.3, 0.5, 0.7 and
/// 0.9 of its peak: it fits on every cell where `dtr` does (and on `dtr`'s
/// failures too unless `only_where_dtr_fits`), its ratio is at most `dtr`'s
/// there (times 1 + `above`), its feasible plans pass the validator (logs
/// under 500 ops), and the cells regression.json pins for `name` have their ratio.
template <class Planner>
void check_against_dtr(const Planner& run, std::string_view name, bool only_where_dtr_fits = false,
                       double above = 0) {
  const device_spec titan_v = find_device("titan-v");
  const nlohmann::json data = test::regression_data();
  std::ptrdiff_t pinned = 0;  // cells of regression.json met
  for (const corpus_log& c : corpus) {
    const auto [log, p] = load(c.prefix);
    for (const double ratio : {0.3, 0.5, 0.7, 0.9}) {
      INFO(std::string(c.prefix), " at ", ratio);
      const auto budget = static_cast<bytes_t>(ratio * static_cast<double>(log.refcount_peak));
      const double dtr = ratio_of(p, find_planner("dtr").run(p, titan_v, budget, planner_options{}), budget, titan_v);
      const plan pl = run(p, titan_v, budget, planner_options{});
      const double mine = ratio_of(p, pl, budget, titan_v);
      if (dtr > 0 || !only_where_dtr_fits) CHECK_MESSAGE(mine > 0, pl.reason);
      if (dtr > 0) CHECK(mine <= dtr * (1 + above));
      if (mine > 0 && p.num_steps() < 500) {
        const validation v = validate(p, pl, titan_v, budget);
        CHECK_MESSAGE(v.ok, (v.errors.empty() ? std::string() : v.errors.front()));
      }
      for (const nlohmann::json& cell : data.at("dtr_log")) {
        if (pinned_for(cell, name) && cell.at("log").get<std::string>() == c.prefix &&
            cell.at("budget_share").get<double>() == ratio) {
          CHECK(cell.at("device") == titan_v.name);
          CHECK(mine == test::pinned(cell.at("time_ratio").get<double>(), data));
          ++pinned;
        }
      }
    }
  }
  // Every cell pinned for `name` names a log and a share of the corpus.
  CHECK(pinned ==
        std::ranges::count_if(data.at("dtr_log"), [&](const nlohmann::json& c) { return pinned_for(c, name); }));
}

TEST_CASE("dtr log: delta fits wherever dtr does, at most 5 % above it") {
  // Pinned: the cells where the paper's Filter and §5.5 run out of memory
  // (rematerialisation thrashing) or land far above dtr, and where dtr fails.
  // Both allocate through the caching allocator: on InceptionV4 neither
  // fits (no gap between its segments holds the next one), and on
  // DenseNet-121 at 0.3 delta's offloads fragment it more than dtr's
  // evictions (1.072 against 1.045): 4.3 % above dtr.
  check_against_dtr(find_planner("delta").run, "delta", true, 0.05);
}

TEST_CASE("dtr log: tsplit fits wherever dtr does, at or below it") {
  // Pinned: the cells where Algo 2 without guarded checkpoints and with
  // swap-ins in issue order lands above dtr, and where dtr fails.
  check_against_dtr(find_planner("tsplit").run, "tsplit");
}

TEST_CASE("dtr log: capuchin at or below dtr wherever dtr fits") {
  // Pinned: the cells where capuchin lands above dtr when a candidate past
  // its last access counts as a recomputation source (msps.hpp), and the
  // Unrolled GAN at 0.3, where dtr fails. On U-Net at 0.3 neither fits.
  check_against_dtr(find_planner("capuchin").run, "capuchin", true);
}

}  // namespace

int main(int argc, char** argv) {
  const bool present = std::filesystem::is_directory(corpus_dir());
  return memplan::test::main_or_skip(argc, argv, present ? "" : corpus_dir().string() + " is absent");
}
