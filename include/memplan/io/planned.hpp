#pragma once
/// \file
/// A planner's run as the command line reports it (DESIGN.md §8): plan,
/// simulate, check the host memory, and the JSON documents of `plan`,
/// `compare`, `simulate`, `validate` and `info`. The CLI and the Python
/// module both call these, so they print the same numbers.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "memplan/cost/device.hpp"
#include "memplan/error.hpp"
#include "memplan/failure.hpp"
#include "memplan/format_bytes.hpp"
#include "memplan/graph/graph.hpp"
#include "memplan/io/explain.hpp"
#include "memplan/io/report_json.hpp"
#include "memplan/io/size.hpp"
#include "memplan/model/options.hpp"
#include "memplan/plan.hpp"
#include "memplan/planners/registry.hpp"
#include "memplan/problem.hpp"
#include "memplan/runtime/placement.hpp"
#include "memplan/sim/assign_layout.hpp"
#include "memplan/sim/simulator.hpp"
#include "memplan/sim/validator.hpp"

namespace memplan::io {

/// A plan, its simulation and the host memory it needs.
struct planned {
  plan result;                 ///< the plan, as the planner returned it or as read
  report sim;                  ///< the simulator's verdict and numbers on `result`
  double planning_time_s = 0;  ///< wall time the planner took, s (0 for a plan read from a file)
  /// Host memory its host copies need at once, offloaded state included
  /// (the executor's pinned pool, runtime::pinned_bytes); 0 unless it fits.
  bytes_t host_bytes = 0;
  std::string host_failure;  ///< why it does not fit the host memory, or empty
};

/// Why `host` bytes of host copies do not fit `host_memory`, or empty.
[[nodiscard]] inline std::string host_memory_failure(bytes_t host, std::optional<bytes_t> host_memory) {
  if (!host_memory || host <= *host_memory) return {};
  return memplan::detail::concat("its host copies need ", format_bytes(host), " (", host,
                                 " bytes) of host memory at once; --host-memory is ", format_bytes(*host_memory), " (",
                                 *host_memory, " bytes)");
}

/// Runs `planner` and simulates its plan on `d` (`memplan plan`, each row of `compare`).
/// \param planner the planner, as the registry lists it.
/// \param p the problem to plan.
/// \param d the device the plan is simulated on.
/// \param budget the device memory the plan must fit, bytes.
/// \param options the planner's options.
/// \param timeline record the simulator's timeline and memory curve (for a trace).
/// \param host_memory the host memory its host copies may take at once; none: no limit.
/// \throws what the planner throws on malformed input.
[[nodiscard]] inline planned run_and_simulate(const planner_entry& planner, const problem& p, const device_spec& d,
                                              bytes_t budget, const planner_options& options, bool timeline,
                                              std::optional<bytes_t> host_memory) {
  const auto start = std::chrono::steady_clock::now();
  plan result = planner.run(p, d, budget, options);
  const double planning_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  simulate_options so;
  so.record_timeline = timeline;
  so.record_memory = timeline;
  report sim = simulate(p, result, d, budget, so);
  sim.planner = std::string(planner.name);
  const bytes_t host = result.feasible && sim.feasible ? runtime::pinned_bytes(p, result, &d) : 0;
  std::string host_failure = host_memory_failure(host, host_memory);
  return {std::move(result), std::move(sim), planning_time_s, host, std::move(host_failure)};
}

/// Simulates a plan read from a file (`memplan simulate`): one without a
/// layout gets the one its timeline gives in `budget` (plan_layout.hpp).
/// \throws invalid_graph if the plan names steps or tensors `p` lacks.
[[nodiscard]] inline planned simulate_plan(const problem& p, plan result, const device_spec& d, bytes_t budget,
                                           bool timeline) {
  if (result.offsets.empty()) {
    result.budget = budget;
    assign_layout(p, result, d);
  }
  simulate_options so;
  so.record_timeline = timeline;
  so.record_memory = timeline;
  report sim = simulate(p, result, d, budget, so);
  sim.planner = result.planner;
  const bytes_t host = sim.feasible ? runtime::pinned_bytes(p, result, &d) : 0;
  return {std::move(result), std::move(sim), 0.0, host, {}};
}

/// The verdict on `r`: the planner's own (a plan read from a file has
/// none), else the simulator's, else the host memory's (out of memory).
[[nodiscard]] inline failure_kind verdict_of(const planned& r) {
  if (r.result.kind != failure_kind::none) return r.result.kind;
  if (r.sim.kind != failure_kind::none) return r.sim.kind;
  return r.host_failure.empty() ? failure_kind::none : failure_kind::out_of_memory;
}

/// Whether `r` fits: its verdict (`verdict_of`) is `none`.
[[nodiscard]] inline bool succeeded(const planned& r) { return verdict_of(r) == failure_kind::none; }

/// Why `r` did not succeed, from the same source as `verdict_of`.
[[nodiscard]] inline const std::string& failure_of(const planned& r) {
  if (r.result.kind != failure_kind::none) return r.result.reason;
  return r.sim.kind != failure_kind::none ? r.sim.failure : r.host_failure;
}

/// The row `memplan plan --json` prints (and each `compare --json` row,
/// `simulate --json`): the report's keys (report_json.hpp), the verdict,
/// `planning_time_s`, the host memory and, for an online policy, its
/// allocator's arena and fragmentation. An infeasible plan's figures are
/// null: where a planner gave up says nothing about a plan.
[[nodiscard]] inline nlohmann::json to_json(const planned& r) {
  nlohmann::json j = to_json(r.sim);
  j["feasible"] = succeeded(r);
  if (!succeeded(r)) {
    j["failure_kind"] = std::string(to_string(verdict_of(r)));
    for (const char* figure : {"peak_bytes", "peak_live_bytes", "arena_bytes", "time_s", "overhead", "stall_s",
                               "recompute_s", "swapped_bytes", "swapped_in_bytes", "offloaded_state_bytes",
                               "recomputed_ops", "split_ops"}) {
      j[figure] = nullptr;
    }
  }
  if (!r.result.reason.empty()) j["reason"] = r.result.reason;  // infeasible: why; else a caveat (milp's gap)
  j["planning_time_s"] = r.planning_time_s;
  if (r.host_bytes > 0) j["host_bytes"] = r.host_bytes;
  if (!r.host_failure.empty()) j["failure"] = r.host_failure;
  // An online policy's allocator (runtime/caching_allocator.hpp): its
  // segments' high-water mark over the live peak; its driver time is allocator_s.
  if (r.result.allocator_us > 0 && r.sim.feasible && r.sim.peak_live_bytes > 0) {
    j["allocator_arena_bytes"] = r.result.arena_bytes;
    j["fragmentation"] = static_cast<double>(r.result.arena_bytes) / static_cast<double>(r.sim.peak_live_bytes);
  }
  if (!r.result.history.empty()) {
    nlohmann::json history = nlohmann::json::array();
    for (const search_point& h : r.result.history) {
      history.push_back({{"time_s", h.time_us / 1e6}, {"excess_bytes", h.excess_bytes}});
    }
    j["history"] = std::move(history);
  }
  return j;
}

/// The document `memplan compare --json` prints: one row per planner.
[[nodiscard]] inline nlohmann::json compare_json(const problem& p, const device_spec& d, bytes_t budget,
                                                 std::span<const planned> rows) {
  nlohmann::json j{{"name", p.name}, {"device", d.name}, {"budget_bytes", budget}, {"rows", nlohmann::json::array()}};
  for (const auto& r : rows) j["rows"].push_back(to_json(r));
  return j;
}

/// The document `memplan validate --json` prints.
[[nodiscard]] inline nlohmann::json to_json(const validation& v) {
  nlohmann::json j{{"valid", v.ok}, {"errors", v.errors}, {"peak_bytes", v.peak_bytes}, {"time_s", v.time_us / 1e6}};
  if (!v.ok) j["failure_kind"] = std::string(to_string(v.kind));
  return j;
}

/// The document `memplan info --json` prints: `g` compiled as `p`, on `d`.
[[nodiscard]] inline nlohmann::json info_json(const graph& g, const problem& p, const device_spec& d) {
  std::int64_t parameter_count = 0;
  bytes_t parameter_bytes = 0;
  for (std::size_t t = 0; t < g.num_tensors(); ++t) {
    const tensor_info& info = g.tensor(static_cast<index_t>(t));
    if (info.kind != tensor_kind::parameter) continue;
    parameter_bytes += info.bytes;
    parameter_count += element_count(info);
  }
  return {{"name", p.name},
          {"device", d.name},
          {"ops", p.num_steps()},
          {"tensors", p.num_tensors()},
          {"parameter_count", parameter_count},
          {"parameter_bytes", parameter_bytes},
          {"baseline_peak_bytes", p.baseline_peak()},
          {"baseline_time_s", p.baseline_time_us() / 1e6},
          {"peak", to_json(breakdown_of_peak(p), p)}};
}

/// The planners `compare` and `maxbatch` run when none are named: all but
/// the searches (home, milp), which take minutes where the others take
/// milliseconds.
[[nodiscard]] inline std::vector<std::string> default_planner_names() {
  std::vector<std::string> names;
  for (const auto& e : planners()) {
    if (!e.searches) names.emplace_back(e.name);
  }
  return names;
}

/// Sets the planner-specific option `name` (the CLI's `--NAME VALUE`) for
/// the planners called `chosen`.
/// \throws invalid_argument if no planner reads `name`, or none of `chosen` does.
inline void set_planner_option(planner_options& o, std::string_view name, std::string value,
                               std::span<const std::string> chosen) {
  std::string readers;
  bool read = false;
  for (const auto& f : planners()) {
    if (std::ranges::find(f.options, name, &planner_option::name) == f.options.end()) continue;
    readers.append(readers.empty() ? "" : ", ").append(f.name);
    read = read || std::ranges::find(chosen, f.name) != chosen.end();
  }
  MEMPLAN_EXPECTS(!readers.empty(), invalid_argument, "no planner reads an option '--", name, "'");
  MEMPLAN_EXPECTS(read, invalid_argument, "option '--", name, "' is read only by ", readers,
                  ", which is not among the planners chosen");
  o.extra.insert_or_assign(std::string(name), std::move(value));
}

/// The host memory a plan's host copies may take at once, as a SIZE in
/// bytes (`--host-memory`; a percent of a device peak means nothing here).
/// \param text the SIZE, as parse_size reads it ("256GiB", ...).
/// \param what how the caller names the setting, for the message.
/// \throws invalid_argument as parse_size, or if `text` is a percentage.
[[nodiscard]] inline bytes_t parse_host_memory(std::string_view text, std::string_view what = "--host-memory") {
  const size_spec s = parse_size(text);
  MEMPLAN_EXPECTS(!s.is_percent, invalid_argument, what, ": '", text,
                  "' is a percentage of the device's baseline peak; give the host's bytes (e.g. 256GiB)");
  return s.bytes;
}

/// A model's element type by name: fp32, fp16, bf16.
/// \throws invalid_argument naming the value and the accepted ones.
[[nodiscard]] inline model::dtype parse_dtype(std::string_view text) {
  if (text == "fp32") return model::dtype::fp32;
  if (text == "fp16") return model::dtype::fp16;
  if (text == "bf16") return model::dtype::bf16;
  throw invalid_argument(memplan::detail::concat("dtype: '", text, "' is not one of fp32, fp16, bf16"));
}

/// A model's optimizer by name: sgd (with momentum), adam.
/// \throws invalid_argument naming the value and the accepted ones.
[[nodiscard]] inline model::optimizer parse_optimizer(std::string_view text) {
  if (text == "sgd") return model::optimizer::sgd_momentum;
  if (text == "adam") return model::optimizer::adam;
  throw invalid_argument(memplan::detail::concat("optimizer: '", text, "' is not one of sgd, adam"));
}

}  // namespace memplan::io
