#pragma once
/// \file
/// A simulator report as JSON: the row `memplan plan --json` and each
/// `compare --json` row print (DESIGN.md §8). The CLI adds `planning_time_s`.

#include <string>

#include <nlohmann/json.hpp>

#include "memplan/sim/report.hpp"

namespace memplan::io {

/// The DESIGN.md §8 keys of `r`, times in seconds. `swapped_bytes` counts
/// bytes swapped out (each swapped tensor once, as the papers count it);
/// `swapped_in_bytes` counts the way back; `offloaded_state_bytes` is the
/// state the plan keeps in host memory between iterations (plan.hpp).
/// `failure_kind` (`to_string(r.kind)`) and `failure` only when infeasible.
[[nodiscard]] inline nlohmann::json to_json(const report& r) {
  constexpr double us_per_s = 1e6;
  nlohmann::json j = {
      {"planner", r.planner},
      {"feasible", r.feasible},
      {"budget_bytes", r.budget_bytes},
      {"baseline_peak_bytes", r.baseline_peak_bytes},
      {"peak_bytes", r.peak_bytes},
      {"peak_live_bytes", r.peak_live_bytes},
      {"arena_bytes", r.arena_bytes},
      {"baseline_time_s", r.baseline_time_us / us_per_s},
      {"time_s", r.time_us / us_per_s},
      {"overhead", r.feasible ? nlohmann::json(r.overhead) : nlohmann::json(nullptr)},
      {"swapped_bytes", r.swapped_out_bytes},
      {"swapped_in_bytes", r.swapped_in_bytes},
      {"offloaded_state_bytes", r.offloaded_state_bytes},
      {"recomputed_ops", r.recomputed_ops},
      {"split_ops", r.split_ops},
      {"stall_s", r.stall_us / us_per_s},
      {"recompute_s", r.recompute_us / us_per_s},
  };
  if (r.allocator_us > 0) j["allocator_s"] = r.allocator_us / us_per_s;
  if (!r.feasible) {
    j["failure_kind"] = std::string(to_string(r.kind));
    j["failure"] = r.failure;
  }
  return j;
}

}  // namespace memplan::io
