#pragma once
/// \file
/// Device profiles: a JSON object that overrides any figure of a named spec,
/// as written by the CUDA profiler or by hand. Keys (docs/devices.md):
///
///     {"name": "my-a100", "memory_bytes": 85899345920,
///      "fp32_tflops": 19.5, "tf32_tflops": 156, "bf16_tflops": 312,
///      "memory_bandwidth_gb_s": 2039, "launch_overhead_us": 4.2,
///      "h2d": {"bandwidth_gb_s": 24.1, "latency_us": 9.0},
///      "d2h": {"bandwidth_gb_s": 25.3, "latency_us": 9.0}}
///
/// Every key is optional; unknown keys are ignored (as the graph format does).

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "memplan/cost/device.hpp"
#include "memplan/error.hpp"

namespace memplan {

namespace detail {

/// Overwrites `out` with `j[key]` if present: a finite number >= 0 (> 0 where
/// `positive`).
inline void read_profile_number(const nlohmann::json& j, std::string_view path, const char* key, double& out,
                                bool positive) {
  const auto it = j.find(key);
  if (it == j.end()) return;
  MEMPLAN_EXPECTS(it->is_number(), invalid_graph, "device profile: field '", path, key, "' must be a number, got ",
                  it->dump());
  const double v = it->get<double>();
  MEMPLAN_EXPECTS(std::isfinite(v) && (positive ? v > 0 : v >= 0), invalid_graph, "device profile: field '", path,
                  key, "' must be ", positive ? "positive" : "non-negative", ", got ", it->dump());
  out = v;
}

inline void read_profile_link(const nlohmann::json& j, const char* key, link_spec& link) {
  const auto it = j.find(key);
  if (it == j.end()) return;
  MEMPLAN_EXPECTS(it->is_object(), invalid_graph, "device profile: field '", key, "' must be an object, got ",
                  it->dump());
  const std::string path = std::string(key) + ".";
  read_profile_number(*it, path, "bandwidth_gb_s", link.bandwidth_gb_s, true);
  read_profile_number(*it, path, "latency_us", link.latency_us, false);
}

}  // namespace detail

/// `base` with every figure that `profile` names replaced.
/// \throws invalid_graph naming the field if the profile is not an object, a
///         figure is not a number, is negative, or is zero where it divides.
[[nodiscard]] inline device_spec read_device_profile(const nlohmann::json& profile, device_spec base) {
  MEMPLAN_EXPECTS(profile.is_object(), invalid_graph, "device profile: must be a JSON object, got ", profile.dump());
  if (const auto it = profile.find("name"); it != profile.end()) {
    MEMPLAN_EXPECTS(it->is_string(), invalid_graph, "device profile: field 'name' must be a string, got ",
                    it->dump());
    base.name = it->get<std::string>();
  }
  if (const auto it = profile.find("memory_bytes"); it != profile.end()) {
    MEMPLAN_EXPECTS(it->is_number_integer() && it->get<std::int64_t>() > 0, invalid_graph,
                    "device profile: field 'memory_bytes' must be a positive integer, got ", it->dump());
    base.memory_bytes = it->get<std::int64_t>();
  }
  detail::read_profile_number(profile, "", "fp32_tflops", base.fp32_tflops, true);
  detail::read_profile_number(profile, "", "tf32_tflops", base.tf32_tflops, false);
  detail::read_profile_number(profile, "", "bf16_tflops", base.bf16_tflops, false);
  detail::read_profile_number(profile, "", "memory_bandwidth_gb_s", base.memory_bandwidth_gb_s, true);
  detail::read_profile_number(profile, "", "launch_overhead_us", base.launch_overhead_us, false);
  if (const auto it = profile.find("alignment_bytes"); it != profile.end()) {
    const bool power_of_two = it->is_number_integer() && it->get<std::int64_t>() > 0 &&
                              (it->get<std::int64_t>() & (it->get<std::int64_t>() - 1)) == 0;
    MEMPLAN_EXPECTS(power_of_two, invalid_graph,
                    "device profile: field 'alignment_bytes' must be a positive power of two, got ", it->dump());
    base.alignment = it->get<std::int64_t>();
  }
  detail::read_profile_link(profile, "h2d", base.h2d);
  detail::read_profile_link(profile, "d2h", base.d2h);
  return base;
}

}  // namespace memplan
