// Inputs that once broke a fuzz target (fuzz/regressions/TARGET/*), replayed
// through the same one-input checks (fuzz/fuzz_inputs.hpp) in every build,
// so that CI catches a regression without Clang or libFuzzer (issue 5).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include "../fuzz/fuzz_inputs.hpp"

TEST_CASE("fuzz regressions replay cleanly") {
  const std::filesystem::path root = std::filesystem::path(MEMPLAN_SOURCE_DIR) / "fuzz/regressions";
  const std::pair<const char*, std::function<void(std::string_view)>> targets[] = {
      {"graph_json", memplan::fuzz::graph_json},
      {"plan_json", memplan::fuzz::plan_json},
      {"size_text", memplan::fuzz::size_text},
  };
  int replayed = 0;
  for (const auto& [name, check] : targets) {
    if (!std::filesystem::exists(root / name)) continue;
    for (const auto& file : std::filesystem::directory_iterator(root / name)) {
      CAPTURE(file.path().string());
      std::ifstream in(file.path(), std::ios::binary);
      std::ostringstream text;
      text << in.rdbuf();
      check(text.str());  // aborts the test program on a broken property
      ++replayed;
    }
  }
  CHECK(replayed >= 1);
}

TEST_CASE("unread inputs: keep-all fits the baseline peak, which counts them during step 0") {
  // fuzz/regressions/graph_json/unread-inputs.json: tensors without a
  // producer that no op reads (125 MB of them) count toward step 0 in the
  // baseline (DESIGN §4) but the simulator releases them at time 0, before
  // layer0 allocates its 78.6 MB output. Step 3 (layer1.backward) is then
  // the simulated peak, 284,253,959 B, below the baseline's 343,704,359 B.
  std::ifstream in(std::filesystem::path(MEMPLAN_SOURCE_DIR) / "fuzz/regressions/graph_json/unread-inputs.json");
  std::ostringstream text;
  text << in.rdbuf();
  const auto doc = memplan::io::read_graph(text.str());
  const memplan::problem p = memplan::compile(doc.graph, doc.schedule);
  CHECK(p.baseline_peak() == 343'704'359);
  const auto r = memplan::simulate(p, memplan::keep_all_plan(p, p.baseline_peak()), memplan::fuzz::fuzz_device(),
                                   p.baseline_peak());
  CHECK(r.feasible);
  CHECK(r.peak_bytes == 284'253'959);
}
