#pragma once
/// \file
/// A simulated run's device memory as pictures need it (io/svg.hpp,
/// io/ascii_chart.hpp): split by tensor kind, and squeezed into columns.
///
/// The split reads nothing the simulator does not already record: the
/// buffers the plan walk makes (runtime::layout_of), each live from the
/// start of its maker to the end of its last holder in the recorded
/// timeline — the lifetimes the simulator judges layouts by
/// (plan_layout.hpp) — so the bands add up to `report::memory_curve` and the
/// simulator's hot path stays as it is.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <string_view>
#include <vector>

#include "memplan/error.hpp"
#include "memplan/graph/vocabulary.hpp"
#include "memplan/plan.hpp"
#include "memplan/plan_layout.hpp"
#include "memplan/problem.hpp"
#include "memplan/runtime/layout.hpp"
#include "memplan/sim/report.hpp"

namespace memplan {

/// The bands of the memory picture: the tensor kinds, then the ops' workspace.
inline constexpr std::size_t memory_band_count = tensor_kind_names.size() + 1;
/// The workspace's band, after the tensor kinds' (band k < it: tensor_kind k).
inline constexpr std::size_t workspace_band = tensor_kind_names.size();

/// "activation", ..., "workspace".
[[nodiscard]] constexpr std::string_view memory_band_name(std::size_t band) noexcept {
  return band == workspace_band ? std::string_view("workspace") : tensor_kind_names[band];
}

/// Device memory per band from `time_us` until the next point.
struct kind_point {
  double time_us = 0;                              ///< when these bytes start to hold, µs into the run
  std::array<bytes_t, memory_band_count> bytes{};  ///< per band: the tensor kinds, then workspace_band
};

namespace detail::memory_view {

/// One buffer made (+) or freed (-) at an instant of the run.
struct change {
  plan_layout::instant at;
  std::size_t band = 0;
  bytes_t bytes = 0;
};

/// Per action its start, end and start order in `r`'s timeline; actions
/// that did not start begin and end at infinity (never).
struct run_times {
  std::vector<double> start;
  std::vector<double> end;
  std::vector<index_t> order;
};

inline run_times times_of(const plan& pl, const report& r) {
  const std::size_t n = pl.actions.size();
  constexpr double never = std::numeric_limits<double>::infinity();
  run_times t{std::vector<double>(n, never), std::vector<double>(n, never),
              std::vector<index_t>(n, static_cast<index_t>(n))};
  for (const action_interval& row : r.timeline) {
    MEMPLAN_EXPECTS(row.action >= 0 && static_cast<std::size_t>(row.action) < n, invalid_argument,
                    "memory_by_kind: the report names action ", row.action, ", but the plan has ", n);
    const auto a = static_cast<std::size_t>(row.action);
    t.start[a] = row.start_us;
    t.end[a] = row.end_us;
    t.order[a] = row.order;
  }
  return t;
}

/// The makes and frees of `l`'s device buffers. A micro-tensor split in
/// place takes its bytes from its whole buffer: the whole is made, its
/// micro-tensors are freed. Buffers no action holds come and go at time 0.
inline std::vector<change> changes_of(const problem& p, const runtime::layout& l, const run_times& t) {
  std::vector<bool> at_load(l.device.size(), false);
  for (const index_t i : l.released_at_load) at_load[static_cast<std::size_t>(i)] = true;
  std::vector<change> out;
  for (std::size_t i = 0; i < l.device.size(); ++i) {
    const runtime::buffer& b = l.device[i];
    if (at_load[i] || b.bytes == 0) continue;
    const std::size_t band =
        b.tensor == no_index ? workspace_band : static_cast<std::size_t>(p.kind[static_cast<std::size_t>(b.tensor)]);
    const plan_layout::span_of_life life = plan_layout::life_of(l, b, t.start, t.end, t.order);
    if (b.whole == no_index && std::isfinite(life.made.time)) out.push_back({life.made, band, b.bytes});
    if (b.split_into == no_index && !life.kept && std::isfinite(life.freed.time))
      out.push_back({life.freed, band, -b.bytes});
  }
  std::ranges::stable_sort(out, {}, &change::at);
  return out;
}

}  // namespace detail::memory_view

/// Device memory over the run of `r` split by what it holds: one point per
/// time at which some buffer is made or freed, after all its changes, time
/// ascending.
/// \param p the problem `pl` plans.
/// \param pl the plan, whose buffers (runtime::layout_of) are followed.
/// \param r a report of `pl` on `p` simulated with `record_timeline`; an
///          invalid plan's (no buffers to follow) gives no points.
/// \throws invalid_argument if the timeline names actions `pl` lacks.
[[nodiscard]] inline std::vector<kind_point> memory_by_kind(const problem& p, const plan& pl, const report& r) {
  using namespace detail::memory_view;
  if (r.kind == failure_kind::invalid_plan) return {};
  const std::vector<change> changes = changes_of(p, runtime::layout_of(p, pl), times_of(pl, r));
  std::vector<kind_point> out;
  kind_point level;
  for (std::size_t i = 0; i < changes.size(); ++i) {
    level.bytes[changes[i].band] += changes[i].bytes;
    // One point per time, as the simulator's curve ends each instant: frees at t before allocations at t.
    if (i + 1 < changes.size() && changes[i + 1].at.time == changes[i].at.time) continue;
    level.time_us = changes[i].at.time;
    out.push_back(level);
  }
  return out;
}

/// The highest level of a step curve in each of `columns` equal slices of
/// [0, `end_us`): `level(i)` holds from `time(i)` until `time(i + 1)` (the
/// last until `end_us`), so a spike shorter than a column still shows.
/// Columns no point reaches keep 0.
template <class Time, class Level>
[[nodiscard]] std::vector<bytes_t> column_peaks(std::size_t points, Time time, Level level, double end_us,
                                                std::size_t columns) {
  std::vector<bytes_t> peak(columns, 0);
  if (columns == 0 || !(end_us > 0)) return peak;
  const auto column = [&](double t) {
    const double c = std::floor(t / end_us * static_cast<double>(columns));
    return static_cast<std::size_t>(std::clamp(c, 0.0, static_cast<double>(columns - 1)));
  };
  for (std::size_t i = 0; i < points; ++i) {
    const double from = time(i);
    const double to = i + 1 < points ? time(i + 1) : end_us;
    const std::size_t last = to > from ? column(std::nextafter(to, from)) : column(from);
    for (std::size_t c = column(from); c <= last; ++c) peak[c] = std::max(peak[c], level(i));
  }
  return peak;
}

/// `column_peaks` of the total device memory of `r` (its `memory_curve`,
/// recorded with `record_memory`) over its iteration.
[[nodiscard]] inline std::vector<bytes_t> memory_columns(const report& r, std::size_t columns) {
  const auto& m = r.memory_curve;
  return column_peaks(
      m.size(), [&](std::size_t i) { return m[i].time_us; }, [&](std::size_t i) { return m[i].bytes; }, r.time_us,
      columns);
}

}  // namespace memplan
