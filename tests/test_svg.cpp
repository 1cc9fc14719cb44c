// Pictures of a simulated run (io/svg.hpp, io/ascii_chart.hpp) and the
// memory by tensor kind they draw (sim/memory_view.hpp), on the hand-worked
// chain of sim_fixtures.hpp.

#include <doctest/doctest.h>

#include <cstddef>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "memplan/io/ascii_chart.hpp"
#include "memplan/io/svg.hpp"
#include "memplan/sim/memory_view.hpp"
#include "memplan/sim/simulator.hpp"
#include "sim_fixtures.hpp"

namespace {

using namespace memplan;
namespace chain = memplan::test::chain;

using memplan::test::dev;
using memplan::test::record_all;
constexpr auto input = static_cast<std::size_t>(tensor_kind::input);
constexpr auto activation = static_cast<std::size_t>(tensor_kind::activation);
constexpr auto gradient = static_cast<std::size_t>(tensor_kind::gradient);

std::size_t count(std::string_view text, std::string_view what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string_view::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

/// Whether every tag of `xml` is closed in order (after the declaration),
/// with attribute values quoted: enough to catch what a browser refuses.
bool well_formed(std::string_view xml) {
  std::vector<std::string> open;
  std::size_t at = xml.find("<svg");
  while (at != std::string_view::npos && at < xml.size()) {
    const std::size_t end = xml.find('>', at);
    if (end == std::string_view::npos) return false;
    const std::string_view tag = xml.substr(at + 1, end - at - 1);
    if (count(tag, "\"") % 2 != 0 || tag.find('<') != std::string_view::npos) return false;
    const std::string name(tag.substr(tag[0] == '/' ? 1 : 0, tag.find_first_of(" />", 1) - (tag[0] == '/' ? 1 : 0)));
    if (tag[0] == '/') {
      if (open.empty() || open.back() != name) return false;
      open.pop_back();
    } else if (tag.back() != '/') {
      open.push_back(name);
    }
    const std::size_t next = xml.find('<', end);
    if (xml.substr(end + 1, next == std::string_view::npos ? std::string_view::npos : next - end - 1).find('>') !=
        std::string_view::npos) {
      return false;
    }
    at = next;
  }
  return open.empty();
}

std::string svg_of(const problem& p, const plan& pl, const report& r) {
  std::ostringstream out;
  io::write_svg(out, p, pl, r, dev.name);
  return out.str();
}

}  // namespace

TEST_CASE("memory by kind: the chain kept whole, by hand") {
  // f1 [0,100) f2 [100,400) f3 [400,700) b3 [700,1000) b2 [1000,1100); x is
  // freed at f1's end, a1 at b2's, a2 and a3 at b3's, g2 and g1 at b2's.
  const problem p = chain::make();
  const plan pl = keep_all_plan(p, 400);
  const report r = simulate(p, pl, dev, 400, record_all);
  REQUIRE(r.feasible);
  const std::vector<kind_point> k = memory_by_kind(p, pl, r);
  REQUIRE(k.size() == 6);
  const double times[] = {0, 100, 400, 700, 1000, 1100};
  const bytes_t inputs[] = {10, 0, 0, 0, 0, 0};
  const bytes_t activations[] = {100, 200, 300, 300, 100, 0};
  const bytes_t gradients[] = {0, 0, 0, 100, 200, 0};
  for (std::size_t i = 0; i < k.size(); ++i) {
    CAPTURE(i);
    CHECK(k[i].time_us == times[i]);
    CHECK(k[i].bytes[input] == inputs[i]);
    CHECK(k[i].bytes[activation] == activations[i]);
    CHECK(k[i].bytes[gradient] == gradients[i]);
  }
}

TEST_CASE("memory by kind adds up to the simulator's curve: swaps, recomputes, split ops") {
  const problem p = chain::make();
  for (const plan& pl : {chain::swap_a1(p, chain::f3, 300), chain::recompute_a1(p, 300), chain::split_f2(p, 4, true)}) {
    CAPTURE(pl.planner);
    const report r = simulate(p, pl, dev, 400, record_all);
    REQUIRE(r.feasible);
    bytes_t highest = 0;
    for (const kind_point& k : memory_by_kind(p, pl, r)) {
      bytes_t sum = 0;
      for (const bytes_t b : k.bytes) sum += b;
      highest = std::max(highest, sum);
      bytes_t curve = 0;  // the simulator's level once every change at that time is made
      for (const memory_point& m : r.memory_curve) {
        if (m.time_us <= k.time_us) curve = m.bytes;
      }
      CHECK(sum == curve);
    }
    CHECK(highest == r.peak_live_bytes);
  }
}

TEST_CASE("column peaks keep a spike shorter than a column") {
  // Levels 5 on [0, 10), 9 on [10, 11), 2 on [11, 40): four columns of 10.
  const double t[] = {0, 10, 11};
  const bytes_t v[] = {5, 9, 2};
  const auto c = column_peaks(
      3, [&](std::size_t i) { return t[i]; }, [&](std::size_t i) { return v[i]; }, 40, 4);
  CHECK(c == std::vector<bytes_t>{5, 9, 2, 2});
}

TEST_CASE("SVG of one plan: budget line, a bar per action, legends, well-formed") {
  const problem p = chain::make();
  const plan pl = chain::swap_a1(p, chain::f3, 300);
  const report r = simulate(p, pl, dev, 400, record_all);
  REQUIRE(r.feasible);
  const std::string svg = svg_of(p, pl, r);
  // Memory axis up to the first 100 B tick above 1.05 x 400 B: 500 B over
  // y in [70, 410], so the 400 B budget is at 410 - 340 x 400 / 500 = 138.
  CHECK(svg.find(R"(<line class="budget" x1="84.0" y1="138.0" x2="980.0" y2="138.0")") != std::string::npos);
  CHECK(svg.find(">budget 400 B</text>") != std::string::npos);
  CHECK(count(svg, R"(<rect class="action")") == pl.actions.size());
  CHECK(count(svg, "<title>swap_in a1: ") == 1);
  for (const std::string_view kind : tensor_kind_names) {
    CHECK(svg.find(R"(class="legend">)" + std::string(kind) + "</text>") != std::string::npos);
  }
  for (const std::string_view bar : {"compute", "compute micro-op", "recompute", "swap_out", "swap_in", "workspace"}) {
    CHECK(svg.find(R"(class="legend">)" + std::string(bar) + "</text>") != std::string::npos);
  }
  // Bands only for the kinds the chain has: input, activation, gradient.
  CHECK(count(svg, R"(<polygon class="band")") == 3);
  CHECK(svg.find("test on byte-per-us: swap-a1") != std::string::npos);
  CHECK(well_formed(svg));
  CHECK_FALSE(well_formed("<svg><g></svg>"));
  std::ofstream("test_svg_plan.svg") << svg;  // for xmllint (tests/CMakeLists.txt)
}

TEST_CASE("SVG of one plan: micro-ops get their own colour") {
  const problem p = chain::make();
  const plan pl = chain::split_f2(p, 4, true);
  const report r = simulate(p, pl, dev, 400, record_all);
  const std::string svg = svg_of(p, pl, r);
  CHECK(count(svg, R"(fill="#9ecae9"><title>compute f2 (part )") == 4);
}

TEST_CASE("SVG of a comparison: a curve per feasible planner, the budget, well-formed") {
  const problem p = chain::make();
  std::vector<report> runs{simulate(p, keep_all_plan(p, 350), dev, 350, record_all),
                           simulate(p, chain::recompute_a1(p, 350), dev, 350, record_all),
                           simulate(p, chain::swap_a1(p, chain::f3, 350), dev, 350, record_all)};
  REQUIRE_FALSE(runs[0].feasible);
  REQUIRE(runs[1].feasible);
  std::ostringstream out;
  io::write_compare_svg(out, p, dev.name, 350, runs);
  const std::string svg = out.str();
  CHECK(count(svg, R"(<polyline class="curve")") == 2);
  // keep-all needs 400 B: it does not fit, so the axis tops the 350 B budget
  // x 1.05 = 367.5 B at 400 B (ticks 100 B apart): y = 410 - 340 x 350 / 400 = 112.5.
  CHECK(svg.find(R"(y1="112.5" x2="980.0" y2="112.5")") != std::string::npos);
  CHECK(svg.find("2 of 3 planners fit") != std::string::npos);
  CHECK(svg.find(">" + runs[1].planner + " " + io::detail::svg::fixed(runs[1].time_us / 1e3, 2) + " ms</text>") !=
        std::string::npos);
  CHECK(well_formed(svg));
  std::ofstream("test_svg_compare.svg") << svg;
}

TEST_CASE("ASCII chart: 16 rows of 72 columns, the budget row, the peak column filled") {
  const problem p = chain::make();
  const report r = simulate(p, keep_all_plan(p, 400), dev, 400, record_all);
  std::ostringstream out;
  io::write_ascii_memory(out, r);
  std::vector<std::string> lines;
  std::istringstream in(out.str());
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  REQUIRE(lines.size() == 16 + 3);
  for (std::size_t row = 0; row < 16; ++row) CHECK(lines[row].size() == 11 + 1 + 72);
  // Top 1.15 x 400 B = 460 B; 400 B is in row 15 - floor(400 / 460 x 16) = 2.
  CHECK(lines[2].starts_with("    budget |"));
  // b3 runs over [700, 1000) of 1100 us: columns 45 to 65 are at the peak.
  CHECK(lines[2][12 + 50] == '#');
  CHECK(lines[2][12 + 10] == '-');
  CHECK(lines[15][12 + 10] == '#');
}
