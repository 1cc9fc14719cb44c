// The real logs of ../shared/corpus/dtr-logs (io/dtr_log.hpp) against
// DTR's simulator's no-eviction peaks and its h_DTR^eq overheads, and delta,
// tsplit and capuchin against dtr on them (issue 4's acceptance), with the
// ratios pinned in tests/data/regression.json's "dtr_log" cells. Without the
// corpus the program says so and exits 77: CTest reports it skipped. The
// environment variable MEMPLAN_SHARED_DIR, where set, replaces ../shared.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "main_or_skip.hpp"
#include "memplan/compile.hpp"
#include "memplan/cost/devices.hpp"
#include "memplan/io/dtr_log.hpp"
#include "memplan/planners/dtr.hpp"
#include "memplan/planners/registry.hpp"
#include "memplan/problem.hpp"
#include "memplan/sim/simulator.hpp"
#include "memplan/sim/validator.hpp"
#include "regression_data.hpp"

namespace {

using namespace memplan;

// Per log: the corpus README's no-eviction peak (GB) and compute time (ms);
// the no-eviction peak in bytes and the h_DTR^eq compute-time ratios at
// budgets 0.3, 0.5, 0.7, 0.9 of it, as DTR's simulator computes them
// (tools/dtr_simulator.py LOG; 0: out of memory, or past the prototype's
// overhead limit of 2); and the corpus README's own ratios where it gives
// them (0: none), which that tool reproduces.
struct corpus_log {
  const char* prefix;
  double peak_gb;
  double time_ms;
  bytes_t peak_bytes;
  double simulator[4];
  double readme[4];
};
constexpr corpus_log corpus[] = {
    {"tv_densenet121", 11.02, 355.3, 11020749360, {1.4258, 1.1763, 1.1036, 1.0258}, {}},
    {"inceptionv4", 11.25, 636.4, 11245348984, {1.2435, 1.0919, 1.0442, 1.0079}, {}},
    {"resnet32", 10.06, 291.9, 10061179152, {1.1786, 1.1068, 1.0463, 1.0131}, {1.179, 1.107, 1.046, 1.013}},
    {"transformer", 9.86, 276.3, 9864405000, {1.1238, 1.0584, 1.0314, 1.0090}, {1.124, 1.058, 1.031, 1.009}},
    {"unet", 8.42, 435.3, 8415764640, {0, 1.1587, 1.0846, 1.0331}, {}},
    {"treelstm", 0.170, 120.5, 170173608, {0, 1.1268, 1.0334, 1.0077}, {}},
    {"lstm", 5.60, 769.5, 5595127736, {1.3651, 1.0710, 1.0314, 1.0174}, {}},
    {"unroll_gan", 0.253, 125.5, 252677418, {1.1115, 1.0686, 1.0444, 1.0108}, {}},
};
constexpr double shares[] = {0.3, 0.5, 0.7, 0.9};

/// Issue 24's acceptance: within max(0.01, 10 % of the simulator's overhead).
bool close_to_simulator(double mine, double simulator) {
  return std::abs(mine - simulator) <= std::max(0.01, 0.1 * (simulator - 1));
}

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

/// The compute-time ratio of `pl` (the DTR simulator's measure; stalls
/// included), or -1 where it does not fit.
double ratio_of(const problem& p, const plan& pl, bytes_t budget, const device_spec& dev) {
  if (!pl.feasible) return -1.0;
  const report r = simulate(p, pl, dev, budget);
  return r.feasible ? r.time_us / p.baseline_time_us() : -1.0;
}

TEST_CASE("dtr log: the corpus, against the DTR simulator") {
  const device_spec titan_v = find_device("titan-v");
  int laid_out_close = 0;  // cells where the registry's dtr, laid out, lands close
  int laid_out_fits = 0;   // cells where it fits
  for (const corpus_log& c : corpus) {
    INFO(std::string(c.prefix));
    const auto [log, p] = load(c.prefix);
    // DTR's count, to the byte; the README's figures are rounded.
    CHECK(log.refcount_peak == c.peak_bytes);
    CHECK(static_cast<double>(log.refcount_peak) / 1e9 == doctest::Approx(c.peak_gb).epsilon(0.005));
    CHECK(p.baseline_time_us() / 1e3 == doctest::Approx(c.time_ms).epsilon(0.001));
    CHECK(p.baseline_peak() <= log.refcount_peak);  // memplan frees at the last read
    for (int i = 0; i < 4; ++i) {
      INFO("at ", shares[i]);
      if (c.readme[i] > 0) CHECK(c.simulator[i] == doctest::Approx(c.readme[i]).epsilon(0.0005));
      const auto budget = static_cast<bytes_t>(shares[i] * static_cast<double>(log.refcount_peak));
      // DTR's simulator in memplan: its compute-time ratio, out of memory
      // where the prototype's is (TreeLSTM at 0.3 thrashes there, past its
      // overhead limit of 2, and runs out of memory here).
      const auto run = online::run_dtr(p, budget);
      if (c.simulator[i] == 0) {
        CHECK(run.pl.kind == failure_kind::out_of_memory);
        continue;
      }
      REQUIRE_MESSAGE(run.pl.feasible, run.pl.reason);
      const report r = simulate(p, run.pl, titan_v, budget);
      REQUIRE(r.feasible);
      CHECK(r.peak_bytes <= budget);
      const double ratio = r.time_us / p.baseline_time_us();
      CHECK(close_to_simulator(ratio, c.simulator[i]));
      // memplan's graph keeps no view ops (a view reads its base): where
      // they take under 0.2 % of the time, the ratios agree to 0.001.
      if (c.prefix != std::string_view("lstm") && c.prefix != std::string_view("treelstm") &&
          c.prefix != std::string_view("unroll_gan")) {
        CHECK(ratio == doctest::Approx(c.simulator[i]).epsilon(0.001));
      }
      // The registry's dtr: the same plan laid out in an arena of exactly
      // the budget, or DTR's at a tighter target where its allocations
      // fragment the arena (docs/results.md).
      const plan laid_out = find_planner("dtr").run(p, titan_v, budget, planner_options{});
      const double mine = ratio_of(p, laid_out, budget, titan_v);
      if (mine > 0 && close_to_simulator(mine, c.simulator[i])) ++laid_out_close;
      if (mine > 0) ++laid_out_fits;
      // DenseNet-121 at 0.3: DTR's plan needs an arena 17 % above its live
      // bytes; DTR in the arena evicts contiguous windows instead (1.562
      // at a tighter target).
      if (c.prefix == std::string_view("tv_densenet121") && i == 0) CHECK(mine == doctest::Approx(1.475).epsilon(0.001));
      if (mine > 0) CHECK(mine >= ratio * 0.999);
      if (mine > 0 && p.num_steps() < 500) {
        const validation v = validate(p, laid_out, titan_v, budget);
        CHECK_MESSAGE(v.ok, (v.errors.empty() ? std::string() : v.errors.front()));
      }
    }
  }
  // Of the 30 cells where DTR's simulator fits, the laid-out plan fits all
  // and lands close on 23; on the other 7 (DenseNet-121 at 0.3-0.7,
  // InceptionV4 at 0.3 and 0.5, LSTM at 0.5, U-Net at 0.5) DTR's plan needs
  // an arena 3-17 % above its live bytes, and neither DTR for a tighter
  // target nor DTR in the arena comes within the tolerance.
  CHECK(laid_out_fits == 30);
  CHECK(laid_out_close == 23);
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
                       double above = 0, const planner_options& dtr_options = {}) {
  const device_spec titan_v = find_device("titan-v");
  const nlohmann::json data = test::regression_data();
  std::ptrdiff_t pinned = 0;  // cells of regression.json met
  for (const corpus_log& c : corpus) {
    const auto [log, p] = load(c.prefix);
    for (const double ratio : {0.3, 0.5, 0.7, 0.9}) {
      INFO(std::string(c.prefix), " at ", ratio);
      const auto budget = static_cast<bytes_t>(ratio * static_cast<double>(log.refcount_peak));
      const double dtr = ratio_of(p, find_planner("dtr").run(p, titan_v, budget, dtr_options), budget, titan_v);
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

TEST_CASE("dtr log: delta fits wherever dtr on the caching allocator does, at most 5 % above it") {
  // DELTA's setting: DTR inside PyTorch, on its caching allocator
  // (`--allocator caching`), as delta runs. Pinned: the cells where the
  // paper's Filter and §5.5 run out of memory (rematerialisation thrashing)
  // or land far above dtr, and where dtr fails. On InceptionV4 neither
  // fits (no gap between its segments holds the next one), and on
  // DenseNet-121 at 0.3 delta's offloads fragment it more than dtr's
  // evictions (1.072 against 1.045): 4.3 % above dtr.
  planner_options caching;
  caching.extra["allocator"] = "caching";
  check_against_dtr(find_planner("delta").run, "delta", true, 0.05, caching);
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
