#pragma once
/// \file
/// A simulated plan as a picture: one self-contained SVG document (no
/// script, fonts or style sheets from elsewhere) that any browser opens.
///
/// `write_svg` draws one plan: device memory over the iteration, stacked by
/// what it holds (tensor kinds and workspace, sim/memory_view.hpp), against
/// a line at the budget, and below it a Gantt chart of the streams (the
/// communication stream's where ops communicate) with a bar per action (hover one for its name and times).
/// `write_compare_svg` draws one memory curve per planner that fits,
/// against the budget. docs/pictures.md describes what they show.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <iomanip>
#include <ostream>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "memplan/error.hpp"
#include "memplan/format_bytes.hpp"
#include "memplan/plan.hpp"
#include "memplan/problem.hpp"
#include "memplan/sim/memory_view.hpp"
#include "memplan/sim/report.hpp"

namespace memplan::io {

namespace detail::svg {

/// Where things go, in SVG user units (pixels): the plot spans [left,
/// right] and [top, bottom]; the legend starts at `legend_x`.
struct frame {
  double left = 84;
  double right = 980;
  double top = 70;
  double bottom = 410;
  double legend_x = 1000;
  double width = 1200;
  double end_us = 1;     ///< the time at `right`
  double max_bytes = 1;  ///< the memory at `top`
  [[nodiscard]] double x(double time_us) const { return left + (right - left) * time_us / end_us; }
  [[nodiscard]] double y(double bytes) const { return bottom - (bottom - top) * bytes / max_bytes; }
};

/// The Gantt chart's lanes, one per stream, below the memory plot.
inline constexpr double lane_top = 430;
inline constexpr double lane_height = 22;
inline constexpr double lane_gap = 6;
[[nodiscard]] constexpr double lane_y(std::size_t stream) noexcept {
  return lane_top + static_cast<double>(stream) * (lane_height + lane_gap);
}
/// Where the Gantt chart's last lane (one per stream used) ends.
[[nodiscard]] inline double gantt_bottom(const problem& p) noexcept {
  return lane_y(streams_used(p) - 1) + lane_height;
}

inline constexpr std::array<std::string_view, memory_band_count> band_colours{
    "#8c564b", "#1f77b4", "#ff7f0e", "#2ca02c", "#98df8a", "#9467bd", "#7f7f7f", "#c7c7c7"};
/// Planners' curves: category10 without its red, which is the budget's.
inline constexpr std::array<std::string_view, 10> planner_colours{
    "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79"};
inline constexpr std::string_view budget_colour = "#d62728";
inline constexpr std::string_view font = R"(font-family="sans-serif")";

/// An action's bar colour: compute and recompute, lighter for micro-ops
/// (a part of a split op, TSPLIT §V-A); swaps; frees take no time.
struct bar_style {
  std::string_view label;
  std::string_view colour;
};
inline constexpr std::array<bar_style, 6> bar_styles{{{"compute", "#4e79a7"},
                                                      {"compute micro-op", "#9ecae9"},
                                                      {"recompute", "#e15759"},
                                                      {"recompute micro-op", "#ff9d9a"},
                                                      {"swap_out", "#f28e2b"},
                                                      {"swap_in", "#59a14f"}}};
[[nodiscard]] inline std::string_view bar_colour(const action& a) {
  const bool micro = a.part != no_index;
  switch (a.kind) {
    case action_kind::compute:
      return bar_styles[micro ? 1 : 0].colour;
    case action_kind::recompute:
      return bar_styles[micro ? 3 : 2].colour;
    case action_kind::swap_out:
      return bar_styles[4].colour;
    case action_kind::swap_in:
      return bar_styles[5].colour;
    default:
      return "#bab0ac";
  }
}

[[nodiscard]] inline std::string escape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

/// `v` with `digits` decimals; coordinates get one.
[[nodiscard]] inline std::string fixed(double v, int digits = 1) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << (std::abs(v) < 1e-9 ? 0.0 : v);
  return s.str();
}

/// The tick spacing for a range: 1, 2 or 5 times a power of ten, at most `ticks` steps.
[[nodiscard]] inline double nice_step(double range, int ticks) {
  if (!(range > 0)) return 1;
  const double raw = range / ticks;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 5.0}) {
    if (m * magnitude >= raw) return m * magnitude;
  }
  return 10 * magnitude;
}

/// Decimals that tell ticks `step` apart.
[[nodiscard]] inline int decimals_of(double step) {
  return std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
}

/// The binary unit the memory axis counts in: the largest that keeps `bytes` at least 1.
struct memory_unit {
  double bytes = 1;
  std::string_view name = "B";
};
[[nodiscard]] inline memory_unit unit_for(double bytes) {
  memory_unit u;
  for (const std::string_view name : {"KiB", "MiB", "GiB", "TiB"}) {
    if (bytes < u.bytes * 1024) break;
    u = {u.bytes * 1024, name};
  }
  return u;
}

/// The memory axis: ticks 1, 2 or 5 units apart (at most 8 steps) up to the first above 5 %
/// over the larger of `highest` and `budget`.
struct memory_axis {
  memory_unit unit;
  double step = 1;  ///< in units
  double max_bytes = 1;
};
[[nodiscard]] inline memory_axis memory_axis_for(bytes_t highest, bytes_t budget) {
  const double top = 1.05 * static_cast<double>(std::max({highest, budget, bytes_t{1}}));
  memory_axis a{unit_for(top), 1, 1};
  a.step = nice_step(top / a.unit.bytes, 8);
  a.max_bytes = std::ceil(top / a.unit.bytes / a.step) * a.step * a.unit.bytes;
  return a;
}

inline void begin_document(std::ostream& out, double width, double height, std::string_view title) {
  out << R"(<?xml version="1.0" encoding="UTF-8"?>)"
      << "\n"
      << R"(<svg xmlns="http://www.w3.org/2000/svg" width=")" << width << R"(" height=")" << height
      << R"(" viewBox="0 0 )" << width << ' ' << height << R"(" )" << font << R"( font-size="12">)"
      << "\n"
      << "<title>" << escape(title) << "</title>\n"
      << R"(<rect x="0" y="0" width=")" << width << R"(" height=")" << height << R"(" fill="white"/>)"
      << "\n";
}

inline void text(std::ostream& out, double x, double y, std::string_view s, std::string_view attributes = {}) {
  out << R"(<text x=")" << fixed(x) << R"(" y=")" << fixed(y) << '"' << (attributes.empty() ? "" : " ") << attributes
      << '>' << escape(s) << "</text>\n";
}

inline void line(std::ostream& out, double x1, double y1, double x2, double y2, std::string_view attributes) {
  out << R"(<line x1=")" << fixed(x1) << R"(" y1=")" << fixed(y1) << R"(" x2=")" << fixed(x2) << R"(" y2=")"
      << fixed(y2) << R"(" )" << attributes << "/>\n";
}

/// The two title lines.
inline void titles(std::ostream& out, const frame& f, std::string_view first, std::string_view second) {
  text(out, f.left, 26, first, R"(font-size="16" font-weight="bold")");
  text(out, f.left, 48, second, R"(fill="#333")");
}

/// Horizontal grid lines and labels at each tick, and the axis title.
inline void draw_memory_axis(std::ostream& out, const frame& f, const memory_axis& a) {
  const int digits = decimals_of(a.step);
  const auto ticks = static_cast<int>(std::lround(a.max_bytes / a.unit.bytes / a.step));
  for (int k = 0; k <= ticks; ++k) {
    const double y = f.y(k * a.step * a.unit.bytes);
    line(out, f.left, y, f.right, y, R"(stroke="#e0e0e0")");
    text(out, f.left - 6, y + 4, fixed(k * a.step, digits), R"(text-anchor="end")");
  }
  const double mid = (f.top + f.bottom) / 2;
  text(out, 22, mid, "device memory (" + std::string(a.unit.name) + ")",
       "text-anchor=\"middle\" transform=\"rotate(-90 22 " + fixed(mid) + ")\"");
  line(out, f.left, f.top, f.left, f.bottom, R"(stroke="#333")");
  line(out, f.left, f.bottom, f.right, f.bottom, R"(stroke="#333")");
}

/// Vertical grid lines from the plot's top to `bottom`, with tick labels in
/// milliseconds under it.
inline void draw_time_axis(std::ostream& out, const frame& f, double bottom) {
  const double end_ms = f.end_us / 1e3;
  const double step = nice_step(end_ms, 10);
  const int digits = decimals_of(step);
  for (int k = 0; k * step <= end_ms * (1 + 1e-9); ++k) {
    const double x = f.x(k * step * 1e3);
    line(out, x, f.top, x, bottom, R"(stroke="#e0e0e0")");
    line(out, x, bottom, x, bottom + 5, R"(stroke="#333")");
    text(out, x, bottom + 18, fixed(k * step, digits), R"(text-anchor="middle")");
  }
  line(out, f.left, bottom, f.right, bottom, R"(stroke="#333")");
  text(out, (f.left + f.right) / 2, bottom + 36, "time (ms)", R"(text-anchor="middle")");
}

/// The budget: a dashed line across the plot, labelled at its right end.
inline void draw_budget(std::ostream& out, const frame& f, bytes_t budget) {
  const double y = f.y(static_cast<double>(budget));
  out << R"(<line class="budget" x1=")" << fixed(f.left) << R"(" y1=")" << fixed(y) << R"(" x2=")" << fixed(f.right)
      << R"(" y2=")" << fixed(y) << R"(" stroke=")" << budget_colour
      << R"(" stroke-width="1.5" stroke-dasharray="6 4"/>)"
      << "\n";
  text(out, f.right - 4, y - 5, "budget " + format_bytes(budget),
       R"(text-anchor="end" fill="#d62728" stroke="white" stroke-width="3" paint-order="stroke")");
}

/// "x,y x,y ..." of a step curve over columns one unit wide from `f.left`,
/// closed down to the axis when `area`.
[[nodiscard]] inline std::string step_points(const frame& f, std::span<const bytes_t> columns, bool area) {
  std::string s;
  const auto add = [&](double x, double b) { s.append(fixed(x)).append(",").append(fixed(f.y(b))).append(" "); };
  if (area) add(f.left, 0);
  for (std::size_t c = 0; c < columns.size(); ++c) {
    const auto v = static_cast<double>(columns[c]);
    if (c > 0 && columns[c] == columns[c - 1]) continue;
    if (c > 0) add(f.left + static_cast<double>(c), static_cast<double>(columns[c - 1]));
    add(f.left + static_cast<double>(c), v);
  }
  if (!columns.empty()) add(f.left + static_cast<double>(columns.size()), static_cast<double>(columns.back()));
  if (area) add(f.left + static_cast<double>(columns.size()), 0);
  if (!s.empty()) s.pop_back();
  return s;
}

/// Per band, the column peaks of the memory held by it and the bands below:
/// drawn top band first, each covers the ones above it but for their share.
[[nodiscard]] inline std::vector<std::vector<bytes_t>> stacked_columns(std::span<const kind_point> points,
                                                                       double end_us, std::size_t columns) {
  std::vector<std::vector<bytes_t>> out;
  for (std::size_t band = 0; band < memory_band_count; ++band) {
    const auto level = [&](std::size_t i) {
      bytes_t sum = 0;
      for (std::size_t k = 0; k <= band; ++k) sum += points[i].bytes[k];
      return sum;
    };
    out.push_back(column_peaks(
        points.size(), [&](std::size_t i) { return points[i].time_us; }, level, end_us, columns));
  }
  return out;
}

/// The memory stacked by band; bands that never hold a byte are left out.
inline void draw_bands(std::ostream& out, const frame& f, std::span<const kind_point> points) {
  const auto columns = static_cast<std::size_t>(std::lround(f.right - f.left));
  const auto stacked = stacked_columns(points, f.end_us, columns);
  for (std::size_t band = memory_band_count; band-- > 0;) {
    const bool empty = std::ranges::all_of(points, [&](const kind_point& k) { return k.bytes[band] == 0; });
    if (empty) continue;
    out << R"(<polygon class="band" data-band=")" << memory_band_name(band) << R"(" fill=")" << band_colours[band]
        << R"(" points=")" << step_points(f, stacked[band], true) << R"("/>)"
        << "\n";
  }
}

/// A legend: a swatch and a label per entry, from (x, y) down.
struct legend_entry {
  std::string label;
  std::string_view colour;
  bool is_line = false;
};
inline void draw_legend(std::ostream& out, double x, double y, std::span<const legend_entry> entries,
                        double spacing = 18) {
  for (const legend_entry& e : entries) {
    if (e.is_line) {
      line(out, x, y - 4, x + 14, y - 4, "stroke=\"" + std::string(e.colour) + R"(" stroke-width="2")");
    } else {
      out << R"(<rect x=")" << fixed(x) << R"(" y=")" << fixed(y - 10) << R"(" width="12" height="12" fill=")"
          << e.colour << R"("/>)"
          << "\n";
    }
    text(out, x + 20, y, e.label, R"(class="legend")");
    y += spacing;
  }
}

/// The bands' legend and the budget's.
inline void band_legend(std::ostream& out, const frame& f) {
  std::vector<legend_entry> entries;
  for (std::size_t band = memory_band_count; band-- > 0;) {
    entries.push_back({std::string(memory_band_name(band)), band_colours[band]});
  }
  entries.push_back({"budget", budget_colour, true});
  draw_legend(out, f.legend_x, f.top + 10, entries);
}

/// "compute conv1: 1.200-1.450 ms" (part 1 of 4 for a micro-op).
[[nodiscard]] inline std::string bar_title(const problem& p, const action& a, const action_interval& row) {
  const bool runs_op = a.kind == action_kind::compute || a.kind == action_kind::recompute;
  const auto subject = static_cast<std::size_t>(runs_op ? a.step : a.tensor);
  std::string s = std::string(to_string(a.kind)) + " " + (runs_op ? p.op_name[subject] : p.tensor_name[subject]);
  if (a.part != no_index) s += " (part " + std::to_string(a.part) + " of " + std::to_string(a.parts) + ")";
  return s + ": " + fixed(row.start_us / 1e3, 3) + "-" + fixed(row.end_us / 1e3, 3) + " ms";
}

/// The Gantt chart: a lane per stream, a bar per action that started.
/// \throws invalid_argument if the timeline names an action or subject the plan or problem lacks.
inline void draw_gantt(std::ostream& out, const frame& f, const problem& p, const plan& pl, const report& r) {
  for (std::size_t s = 0; s < streams_used(p); ++s) {
    out << R"(<rect x=")" << fixed(f.left) << R"(" y=")" << fixed(lane_y(s)) << R"(" width=")"
        << fixed(f.right - f.left) << R"(" height=")" << fixed(lane_height) << R"(" fill="#f4f4f4"/>)"
        << "\n";
    text(out, f.left - 6, lane_y(s) + lane_height / 2 + 4, stream_names[s], R"(text-anchor="end")");
  }
  for (const action_interval& row : r.timeline) {
    MEMPLAN_EXPECTS(row.action >= 0 && static_cast<std::size_t>(row.action) < pl.actions.size(), invalid_argument,
                    "svg: the report names action ", row.action, ", but the plan has ", pl.actions.size());
    const action& a = pl.actions[static_cast<std::size_t>(row.action)];
    const bool runs_op = a.kind == action_kind::compute || a.kind == action_kind::recompute;
    const index_t subject = runs_op ? a.step : a.tensor;
    MEMPLAN_EXPECTS(subject >= 0 && static_cast<std::size_t>(subject) < (runs_op ? p.num_steps() : p.num_tensors()),
                    invalid_argument, "svg: action ", row.action, " names a step or tensor the problem lacks");
    const double x = f.x(row.start_us);
    // A short copy or op stays visible; a free takes no time and draws nothing.
    const double width = row.end_us > row.start_us ? std::max(1.0, f.x(row.end_us) - x) : 0.0;
    out << R"(<rect class="action" x=")" << fixed(x, 2) << R"(" y=")"
        << fixed(lane_y(static_cast<std::size_t>(row.stream)) + 2) << R"(" width=")" << fixed(width, 2)
        << R"(" height=")" << fixed(lane_height - 4) << R"(" fill=")" << bar_colour(a) << R"("><title>)"
        << escape(bar_title(p, a, row)) << "</title></rect>\n";
  }
  std::vector<legend_entry> entries;
  for (const bar_style& b : bar_styles) entries.push_back({std::string(b.label), b.colour});
  draw_legend(out, f.legend_x, lane_top + 8, entries, 14);
}

/// "iteration 412.35 ms (+3.2 % over the unplanned run)".
[[nodiscard]] inline std::string iteration_text(const report& r) {
  std::string s = "iteration " + fixed(r.time_us / 1e3, 2) + " ms";
  if (r.feasible && r.baseline_time_us > 0) s += " (+" + fixed(100 * r.overhead, 1) + " % over the unplanned run)";
  return s;
}

/// "peak 1.64 GiB", or where a layout's arena is visibly more than the live
/// bytes' peak (alignment, fragmentation) "arena 10.00 KiB (live peak 9.67 KiB)":
/// the bands show the live bytes.
[[nodiscard]] inline std::string peak_text(const report& r) {
  const std::string arena = format_bytes(r.arena_bytes);
  const std::string live = format_bytes(r.peak_live_bytes);
  if (r.arena_bytes == 0 || arena == live) return "peak " + format_bytes(r.peak_bytes);
  return "arena " + arena + " (live peak " + live + ")";
}

/// The highest level of `r`'s memory curve.
[[nodiscard]] inline bytes_t highest(const report& r) {
  bytes_t h = 0;
  for (const memory_point& m : r.memory_curve) h = std::max(h, m.bytes);
  return h;
}

/// The indices of the feasible reports in `runs`.
[[nodiscard]] inline std::vector<std::size_t> feasible_runs(std::span<const report> runs) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].feasible) out.push_back(i);
  }
  return out;
}

/// The longest of the `fit` runs, but at most twice the fastest (see write_compare_svg).
[[nodiscard]] inline double time_axis_end(std::span<const report> runs, std::span<const std::size_t> fit) {
  double longest = 0;
  double fastest = 0;
  for (const std::size_t i : fit) {
    longest = std::max(longest, runs[i].time_us);
    fastest = fastest == 0 ? runs[i].time_us : std::min(fastest, runs[i].time_us);
  }
  const double end = fastest > 0 ? std::min(longest, 2 * fastest) : longest;
  return end > 0 ? end : 1;
}

/// One planner's memory curve, cut at the plot's right edge.
inline void draw_curve(std::ostream& out, const frame& f, const report& r, std::string_view colour) {
  const auto width = static_cast<std::size_t>(std::lround(f.right - f.left));
  const auto columns = static_cast<std::size_t>(std::lround((f.right - f.left) * r.time_us / f.end_us));
  std::vector<bytes_t> levels = memory_columns(r, columns);
  levels.resize(std::min(levels.size(), width));
  out << R"(<polyline class="curve" fill="none" stroke-width="1.5" stroke=")" << colour << R"(" points=")"
      << step_points(f, levels, false) << R"("><title>)" << escape(r.planner) << "</title></polyline>\n";
}

[[nodiscard]] inline bool same_curve(const report& a, const report& b) {
  return a.time_us == b.time_us &&
         std::ranges::equal(a.memory_curve, b.memory_curve, [](const memory_point& x, const memory_point& y) {
           return x.time_us == y.time_us && x.bytes == y.bytes;
         });
}

/// "tsplit 115.47 ms", "= tsplit-nosplit" when an earlier one drew the same
/// curve (it hides under this one), "→" when it runs past the right edge.
[[nodiscard]] inline std::string curve_label(std::span<const report> runs, std::span<const std::size_t> fit,
                                             std::size_t k, double end_us) {
  const report& r = runs[fit[k]];
  std::string s = r.planner + " " + fixed(r.time_us / 1e3, 2) + " ms";
  for (std::size_t j = 0; j < k; ++j) {
    if (same_curve(runs[fit[j]], r)) return s + " (= " + runs[fit[j]].planner + ")";
  }
  return r.time_us > end_us ? s + " \xe2\x86\x92" : s;
}

}  // namespace detail::svg

/// Writes one plan's simulated run as an SVG picture: memory by tensor kind
/// against the budget, and a Gantt chart of the compute, d2h and h2d
/// streams (see the file comment).
/// \param r `pl`'s report on `p`, simulated with `record_timeline` and `record_memory`.
/// \param device the device's name, for the title.
/// \throws invalid_argument if `r`'s timeline names actions, steps or tensors
///         `pl` or `p` lacks (a report of another plan).
inline void write_svg(std::ostream& out, const problem& p, const plan& pl, const report& r, std::string_view device) {
  using namespace detail::svg;
  const std::vector<kind_point> points = memory_by_kind(p, pl, r);
  const memory_axis axis = memory_axis_for(highest(r), r.budget_bytes);
  frame f;
  f.end_us = r.time_us > 0 ? r.time_us : 1;
  f.max_bytes = axis.max_bytes;
  const std::string first = p.name + " on " + std::string(device) + ": " + r.planner;
  std::string second = "budget " + format_bytes(r.budget_bytes) + " | " + peak_text(r) + " | " + iteration_text(r);
  if (!r.feasible) {
    second = "infeasible (" + std::string(to_string(r.kind)) + ") | budget " + format_bytes(r.budget_bytes);
  }
  begin_document(out, f.width, gantt_bottom(p) + 50, first);
  titles(out, f, first, second);
  draw_memory_axis(out, f, axis);
  draw_time_axis(out, f, gantt_bottom(p));
  draw_bands(out, f, points);
  draw_budget(out, f, r.budget_bytes);
  band_legend(out, f);
  draw_gantt(out, f, p, pl, r);
  out << "</svg>\n";
}

/// Writes the memory curves of several planners' plans for one problem as
/// an SVG picture: a line per feasible report against the budget, the
/// legend naming each planner and its iteration time. Infeasible reports
/// are left out; the subtitle counts them. The time axis ends at the
/// longest run, or at twice the fastest where one runs longer: an outlier
/// (vDNN's layer-synchronous swaps) would squeeze the others into a corner;
/// its curve runs past the edge and its legend entry says so.
/// \param runs reports simulated with `record_memory`, under `budget`.
/// \param device the device's name, for the title.
inline void write_compare_svg(std::ostream& out, const problem& p, std::string_view device, bytes_t budget,
                              std::span<const report> runs) {
  using namespace detail::svg;
  frame f;
  f.width = 1260;
  const std::vector<std::size_t> fit = feasible_runs(runs);
  f.end_us = time_axis_end(runs, fit);
  bytes_t top = 0;
  for (const std::size_t i : fit) top = std::max(top, highest(runs[i]));
  const memory_axis axis = memory_axis_for(top, budget);
  f.max_bytes = axis.max_bytes;
  const std::string first = p.name + " on " + std::string(device) + ": planners compared";
  begin_document(out, f.width, f.bottom + 50, first);
  titles(out, f, first,
         "budget " + format_bytes(budget) + " | " + std::to_string(fit.size()) + " of " + std::to_string(runs.size()) +
             " planners fit");
  draw_memory_axis(out, f, axis);
  draw_time_axis(out, f, f.bottom);
  std::vector<legend_entry> entries;
  for (std::size_t k = 0; k < fit.size(); ++k) {
    const std::string_view colour = planner_colours[k % planner_colours.size()];
    draw_curve(out, f, runs[fit[k]], colour);
    entries.push_back({curve_label(runs, fit, k, f.end_us), colour, true});
  }
  draw_budget(out, f, budget);
  entries.push_back({"budget", budget_colour, true});
  draw_legend(out, f.legend_x, f.top + 10, entries);
  out << "</svg>\n";
}

}  // namespace memplan::io
