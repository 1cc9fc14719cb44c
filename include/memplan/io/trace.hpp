#pragma once
/// \file
/// A simulated plan in the Chrome trace event format (DESIGN.md §4, last
/// bullet), which Perfetto and chrome://tracing open: one track per stream
/// with an "X" (complete) event per action, and device memory as a "C"
/// (counter) series, with the budget as a second, constant one so that the
/// limit shows beside it. Format: "Trace Event Format", Google, 2016.

#include <array>
#include <cstddef>
#include <ostream>
#include <string_view>

#include <nlohmann/json.hpp>

#include "memplan/error.hpp"
#include "memplan/plan.hpp"
#include "memplan/problem.hpp"
#include "memplan/sim/report.hpp"

namespace memplan::io {

/// Writes the timeline, memory curve and budget of `r` (simulate with
/// `record_timeline` and `record_memory`) as one trace JSON document.
/// Timestamps are microseconds, the format's unit.
/// \throws invalid_argument if the timeline names an action or step `pl`
///         or `p` does not have (a report of another plan).
inline void write_chrome_trace(std::ostream& out, const problem& p, const plan& pl, const report& r) {
  using nlohmann::json;
  constexpr int pid = 1;
  json events = json::array();
  events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"args", {{"name", "memplan " + r.planner}}}});
  for (std::size_t s = 0; s < streams_used(p); ++s) {
    events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", s}, {"args", {{"name", stream_names[s]}}}});
    // Keep the tracks in stream order rather than by name.
    events.push_back({{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", pid}, {"tid", s}, {"args", {{"sort_index", s}}}});
  }
  for (const action_interval& row : r.timeline) {
    MEMPLAN_EXPECTS(row.action >= 0 && static_cast<std::size_t>(row.action) < pl.actions.size(), invalid_argument,
                    "trace: the report names action ", row.action, ", but the plan has ", pl.actions.size());
    const action& act = pl.actions[static_cast<std::size_t>(row.action)];
    const bool runs_op = act.kind == action_kind::compute || act.kind == action_kind::recompute;
    const index_t subject = runs_op ? act.step : act.tensor;
    const std::size_t limit = runs_op ? p.num_steps() : p.num_tensors();
    MEMPLAN_EXPECTS(subject >= 0 && static_cast<std::size_t>(subject) < limit, invalid_argument, "trace: action ",
                    row.action, " names ", runs_op ? "step " : "tensor ", subject, ", which the problem lacks");
    const auto i = static_cast<std::size_t>(subject);
    const std::string_view kind = to_string(act.kind);
    json args = {{"action", row.action}};
    if (runs_op) {
      args["op_type"] = p.op_type[i];
    } else {
      args["bytes"] = act.part == no_index ? p.bytes[i] : micro_bytes(p.bytes[i], act.parts, act.part);
    }
    if (act.parts > 1) args["parts"] = act.parts;
    if (act.part != no_index) args["part"] = act.part;
    const std::string& name = runs_op ? p.op_name[i] : p.tensor_name[i];
    events.push_back({{"ph", "X"},
                      {"name", act.kind == action_kind::compute ? name : std::string(kind) + " " + name},
                      {"cat", kind},
                      {"pid", pid},
                      {"tid", static_cast<int>(row.stream)},
                      {"ts", row.start_us},
                      {"dur", row.end_us - row.start_us},
                      {"args", std::move(args)}});
  }
  for (const memory_point& m : r.memory_curve) {
    events.push_back({{"ph", "C"}, {"name", "device memory"}, {"pid", pid}, {"ts", m.time_us}, {"args", {{"bytes", m.bytes}}}});
  }
  for (const double ts : {0.0, r.time_us}) {
    events.push_back({{"ph", "C"}, {"name", "budget"}, {"pid", pid}, {"ts", ts}, {"args", {{"bytes", r.budget_bytes}}}});
  }
  out << json{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}}.dump() << '\n';
}

}  // namespace memplan::io
