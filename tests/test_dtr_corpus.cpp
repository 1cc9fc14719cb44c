// Tests of the DTR operator-log reader (io/dtr_log.hpp): a log written by
// hand with every instruction, malformed lines, and the real logs of
// ../shared/corpus/dtr-logs (skipped where the corpus is absent) against the
// DTR simulator's no-eviction peaks and its h_DTR^eq overheads, and delta,
// tsplit and capuchin against dtr on them (issue 4's acceptance).
#include <doctest/doctest.h>

#include <filesystem>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include "memplan/cost/devices.hpp"
#include "memplan/io/dtr_log.hpp"
#include "memplan/planners/capuchin.hpp"
#include "memplan/planners/dtr.hpp"
#include "memplan/planners/tsplit.hpp"
#include "memplan/problem.hpp"
#include "memplan/sim/simulator.hpp"
#include "memplan/sim/validator.hpp"

namespace {

using namespace memplan;

io::dtr_log read(const std::string& text) {
  std::istringstream in(text);
  return io::read_dtr_log(in, "test");
}

// A warm-up op (ignored), then: w (constant, 40 B) kept to the end; x (100
// B) read by conv (2 ms) -> y (300 B); relu_ (1 ms) mutates y in place;
// view (0.5 ms) aliases y as v; COPY z = w; after BACKWARD, conv_backward
// (3 ms) reads v and w -> g (200 B); releases drop x, y, v and g.
const char* hand_log = R"({"INSTRUCTION":"CONSTANT","NAME":"old"}
{"INSTRUCTION":"MEMORY","MEMORY":"999","NAME":"old"}
{"ANNOTATION":"START","INSTRUCTION":"ANNOTATE"}
{"INSTRUCTION":"CONSTANT","NAME":"w"}
{"INSTRUCTION":"MEMORY","MEMORY":"40","NAME":"w"}
{"INSTRUCTION":"CONSTANT","NAME":"x"}
{"INSTRUCTION":"MEMORY","MEMORY":"100","NAME":"x"}
{"ARGS":["x","w"],"INSTRUCTION":"CALL","NAME":"conv","RESULT":["y"],"TIME":"2000000"}
{"INSTRUCTION":"MEMORY","MEMORY":"300","NAME":"y"}
{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"y"}
{"ARGS":["y"],"INSTRUCTION":"MUTATE","MUTATE":[0],"NAME":"relu_","TIME":"1000000"}
{"ARGS":["y"],"INSTRUCTION":"CALL","NAME":"view","RESULT":["v"],"TIME":"500000"}
{"INSTRUCTION":"MEMORY","MEMORY":"300","NAME":"v"}
{"ALIAS":"0","INSTRUCTION":"ALIAS","NAME":"v"}
{"DST":"z","INSTRUCTION":"COPY","SRC":"w"}
{"INSTRUCTION":"RELEASE","NAME":"x"}
{"INSTRUCTION":"RELEASE","NAME":"y"}
{"ANNOTATION":"BACKWARD","INSTRUCTION":"ANNOTATE"}
{"ARGS":["v","z"],"INSTRUCTION":"CALL","NAME":"conv_backward","RESULT":["g"],"TIME":"3000000"}
{"INSTRUCTION":"MEMORY","MEMORY":"200","NAME":"g"}
{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"g"}
{"INSTRUCTION":"RELEASE","NAME":"v"}
{"INSTRUCTION":"RELEASE","NAME":"g"}
)";

TEST_CASE("dtr log: every instruction, by hand") {
  const io::dtr_log log = read(hand_log);
  const graph& g = log.graph;
  // Tensors: w, x, y, y' (relu_'s version), g. The warm-up's 'old' is gone.
  REQUIRE(g.num_tensors() == 5);
  REQUIRE(g.num_ops() == 4);
  CHECK(g.tensor(0).name == "w");
  CHECK(g.tensor(0).kind == tensor_kind::parameter);  // still named (by z) at the end
  CHECK(g.tensor(1).kind == tensor_kind::input);      // released: not persistent
  CHECK(g.tensor(2).bytes == 300);
  CHECK(g.tensor(3).bytes == 300);                    // the mutated version, same bytes
  CHECK(g.tensor(4).kind == tensor_kind::gradient);
  CHECK(g.op(0).time_us == doctest::Approx(2000));
  CHECK(g.op(0).inputs == std::vector<index_t>{1, 0});
  CHECK(g.op(1).type == "relu_");
  CHECK(g.op(1).outputs == std::vector<index_t>{3});
  CHECK(g.op(2).outputs.empty());                    // a view makes no tensor
  CHECK(g.op(2).inputs == std::vector<index_t>{3});  // ... and reads the current version
  CHECK(g.op(3).phase == phase::backward);
  CHECK(g.op(3).inputs == std::vector<index_t>{3, 0});
  CHECK(g.op(1).recomputable);
  // DTR's count: w 40 + x 100 + y 300 (relu_ in place) = 440; then x and y's
  // last handle... y is still named by v: 340 + g 200 = 540 at the peak.
  CHECK(log.refcount_peak == 540);
  // memplan's: x dies after conv, y after relu_, y' after conv_backward:
  // conv_backward holds w, y' and g = 540; relu_ holds w, y and y' = 640.
  const problem p = compile(log.graph, log.schedule);
  CHECK(p.baseline_peak() == 640);
  CHECK(p.baseline_time_us() == doctest::Approx(6500));
}

TEST_CASE("dtr log: malformed lines name the line") {
  CHECK_THROWS_WITH_AS(read("{\"INSTRUCTION\":\"CONSTANT\",\"NAME\":\"a\"}\n{\"INSTRUCTION\":\"MEMORY\"}\n"),
                       "DTR log 'test' line 2: missing string field 'NAME'", invalid_graph);
  CHECK_THROWS_WITH_AS(read("{\"INSTRUCTION\":\"RELEASE\",\"NAME\":\"nobody\"}\n"),
                       "DTR log 'test' line 1: handle 'nobody' is not defined (or was released)", invalid_graph);
  CHECK_THROWS_WITH_AS(read("{\"INSTRUCTION\":\"JUMP\"}\n"), "DTR log 'test' line 1: unknown INSTRUCTION 'JUMP'",
                       invalid_graph);
  CHECK_THROWS_AS(read("\n\nnot json\n"), invalid_graph);
  CHECK_THROWS_WITH_AS(read("{\"INSTRUCTION\":\"CONSTANT\",\"NAME\":\"a\"}\n"
                            "{\"INSTRUCTION\":\"MEMORY\",\"MEMORY\":\"-5\",\"NAME\":\"a\"}\n"),
                       "DTR log 'test' line 2: field 'MEMORY' must be an integer >= 0, got '-5'", invalid_graph);
  CHECK_THROWS_WITH_AS(read("{\"INSTRUCTION\":\"CONSTANT\",\"NAME\":\"a\"}\n"
                            "{\"INSTRUCTION\":\"MEMORY\",\"MEMORY\":\"8\",\"NAME\":\"a\"}\n"
                            "{\"ARGS\":[\"a\"],\"INSTRUCTION\":\"CALL\",\"NAME\":\"f\",\"RESULT\":[\"b\"],\"TIME\":\"1\"}\n"
                            "{\"INSTRUCTION\":\"RELEASE\",\"NAME\":\"a\"}\n"),
                       "DTR log 'test' line 4: expected the MEMORY/ALIAS of 'b'", invalid_graph);
}

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

std::filesystem::path corpus_dir() { return std::filesystem::path(MEMPLAN_SHARED_DIR) / "corpus" / "dtr-logs"; }

/// Whether the corpus is there; a test without it says so and skips.
bool corpus_present() {
  if (std::filesystem::is_directory(corpus_dir())) return true;
  MESSAGE("skipped: no DTR logs at " << corpus_dir().string());
  return false;
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
  if (!corpus_present()) return;
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
      // dtr lands within 5 % of the DTR simulator's compute-time ratio.
      CHECK(r.time_us / p.baseline_time_us() == doctest::Approx(c.ratio[i]).epsilon(0.05));
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

/// A cell of the DTR-log table and the ratio a planner is pinned to there.
struct pinned_cell {
  const char* prefix;
  double ratio;
  double expected;
};

/// `run` on every corpus log at 0.3, 0.5, 0.7 and 0.9 of its peak: it fits
/// on every cell where `dtr` does (and on `dtr`'s failures too unless
/// `only_where_dtr_fits`), its ratio is at most `dtr`'s there, its feasible
/// plans pass the validator (logs under 500 ops), and `pinned` cells have their
/// ratio.
template <class Planner>
void check_against_dtr(const Planner& run, std::span<const pinned_cell> pinned, bool only_where_dtr_fits = false) {
  const device_spec titan_v = find_device("titan-v");
  for (const corpus_log& c : corpus) {
    const auto [log, p] = load(c.prefix);
    for (const double ratio : {0.3, 0.5, 0.7, 0.9}) {
      INFO(std::string(c.prefix), " at ", ratio);
      const auto budget = static_cast<bytes_t>(ratio * static_cast<double>(log.refcount_peak));
      const double dtr = ratio_of(p, dtr_planner{}(p, titan_v, budget, planner_options{}), budget, titan_v);
      const plan pl = run(p, titan_v, budget, planner_options{});
      const double mine = ratio_of(p, pl, budget, titan_v);
      if (dtr > 0 || !only_where_dtr_fits) CHECK_MESSAGE(mine > 0, pl.reason);
      if (dtr > 0) CHECK(mine <= dtr);
      if (mine > 0 && p.num_steps() < 500) {
        const validation v = validate(p, pl, titan_v, budget);
        CHECK_MESSAGE(v.ok, (v.errors.empty() ? std::string() : v.errors.front()));
      }
      for (const pinned_cell& f : pinned) {
        if (std::string_view(c.prefix) == f.prefix && ratio == f.ratio) {
          CHECK(mine == doctest::Approx(f.expected).epsilon(0.002));
        }
      }
    }
  }
}

TEST_CASE("dtr log: delta fits wherever dtr does, at or below it") {
  if (!corpus_present()) return;
  // delta's compute-time ratio where the paper's Filter and §5.5 failed:
  // out of memory (rematerialisation thrashing: 1,258 to 6,825 recomputes
  // in one step) or far above dtr (ResNet-32 0.3 2.449 vs 1.180, DenseNet
  // 0.3 2.392 vs 1.465, U-Net 0.5 2.086 vs 1.205), and where dtr fails.
  constexpr pinned_cell pinned[] = {
      {"inceptionv4", 0.3, 1.160}, {"treelstm", 0.3, 1.049}, {"unroll_gan", 0.5, 1.051},
      {"resnet32", 0.3, 1.181},    {"tv_densenet121", 0.3, 1.417}, {"unet", 0.5, 1.191},
      {"unet", 0.3, 1.706},        {"unroll_gan", 0.3, 1.305},
  };
  check_against_dtr(delta_planner{}, pinned);
}

TEST_CASE("dtr log: tsplit fits wherever dtr does, at or below it") {
  if (!corpus_present()) return;
  // tsplit's ratio where it was above dtr before guarded checkpoints and
  // swap-ins in the order they are due (1.255, 1.108, 1.307 against dtr's
  // 1.181, 1.106, 1.171; docs/results.md), and where dtr fails.
  constexpr pinned_cell pinned[] = {
      {"resnet32", 0.3, 1.158}, {"resnet32", 0.5, 1.073}, {"inceptionv4", 0.3, 1.153},
      {"unet", 0.3, 1.400},     {"unroll_gan", 0.3, 1.000},
  };
  check_against_dtr(tsplit_planner{}, pinned);
}

TEST_CASE("dtr log: capuchin at or below dtr wherever dtr fits") {
  if (!corpus_present()) return;
  // capuchin's ratio where it was above dtr while a candidate past its last
  // access counted as a recomputation source (1.213, 1.367, 1.551, 1.259,
  // 1.177 against dtr's 1.181, 1.123, 1.465, 1.194, 1.171; msps.hpp), and
  // on the Unrolled GAN at 0.3, where dtr fails. On U-Net at 0.3 neither fits.
  constexpr pinned_cell pinned[] = {
      {"resnet32", 0.3, 1.163},       {"transformer", 0.3, 1.075}, {"tv_densenet121", 0.3, 1.264},
      {"tv_densenet121", 0.5, 1.145}, {"inceptionv4", 0.3, 1.161}, {"unroll_gan", 0.3, 1.000},
  };
  check_against_dtr(capuchin_planner{}, pinned, true);
}

}  // namespace
