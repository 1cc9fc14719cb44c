#pragma once
/// \file
/// The CUDA profiler (DESIGN.md §7): measures the host link each way and the
/// device's copy bandwidth with cudaEvents, times each op of a problem as
/// the framework runs it, and writes the device-profile JSON that
/// `read_device_profile` (cost/profile.hpp) reads. Op times go under
/// "op_times_us" (op name -> µs), a key the cost model ignores and that a
/// graph exporter can use for `time_us`.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <nlohmann/json.hpp>

#include "memplan/cost/device.hpp"
#include "memplan/cuda/device.hpp"
#include "memplan/cuda/error.hpp"
#include "memplan/cuda/stream.hpp"
#include "memplan/problem.hpp"

namespace memplan::cuda {

/// How the link is measured: copies of `small_bytes` and `large_bytes`,
/// each timed `repeats` times; the fastest of each is kept.
struct link_probe {
  bytes_t small_bytes = 4 << 10;   ///< a copy short enough that its time is mostly the latency
  bytes_t large_bytes = 64 << 20;  ///< a copy long enough that its time is mostly bytes / bandwidth
  int repeats = 10;                ///< timings of each size; the fastest counts
};

namespace detail {

/// The fastest of `repeats` timings of `body(stream)`, in µs, between two
/// timing events on `s`.
template <class Body>
double fastest_us(stream& s, int repeats, Body&& body) {
  event start(true), stop(true);
  float best_ms = -1;
  for (int i = 0; i < repeats; ++i) {
    MEMPLAN_CUDA_TRY(cudaEventRecord(start.value(), s.value()));
    body(s.view());
    MEMPLAN_CUDA_TRY(cudaEventRecord(stop.value(), s.value()));
    MEMPLAN_CUDA_TRY(cudaEventSynchronize(stop.value()));
    float ms = 0;
    MEMPLAN_CUDA_TRY(cudaEventElapsedTime(&ms, start.value(), stop.value()));
    if (best_ms < 0 || ms < best_ms) best_ms = ms;
  }
  return static_cast<double>(best_ms) * 1e3;
}

/// Fits `transfer_us = latency + bytes / (bandwidth_gb_s * 1e3)` (link_spec)
/// through the two measured points.
inline link_spec fit_link(bytes_t small, double small_us, bytes_t large, double large_us) {
  link_spec link;
  const double bytes_per_us = static_cast<double>(large - small) / std::max(large_us - small_us, 1e-3);
  link.bandwidth_gb_s = bytes_per_us / 1e3;
  link.latency_us = std::max(0.0, small_us - static_cast<double>(small) / bytes_per_us);
  return link;
}

}  // namespace detail

/// Measures one direction of the host link (pinned host memory <-> device
/// memory) on GPU `ordinal`. `kind`: device_to_host or host_to_device;
/// device_to_device measures the device's memory bandwidth (the copy reads
/// and writes each byte: bandwidth counts both).
/// \throws cuda_error if a call fails (no GPU, out of memory).
[[nodiscard]] inline link_spec measure_link(copy_kind kind, const link_probe& probe = {}, int ordinal = 0) {
  MEMPLAN_CUDA_TRY(cudaSetDevice(ordinal));
  const bool d2d = kind == copy_kind::device_to_device;
  device dev({.ordinal = ordinal,
              .arena_bytes = d2d ? 2 * probe.large_bytes : probe.large_bytes,
              .pinned_bytes = d2d ? 0 : probe.large_bytes});
  stream s;
  std::byte* const on_device = dev.device_memory();
  std::byte* const other = d2d ? on_device + probe.large_bytes : dev.pinned_memory();
  std::byte* const dst = kind == copy_kind::host_to_device ? on_device : other;
  const std::byte* const src = kind == copy_kind::host_to_device ? other : on_device;
  const auto time = [&](bytes_t n) {
    return detail::fastest_us(s, probe.repeats,
                              [&](stream_view v) { dev.copy(dst, src, static_cast<std::size_t>(n), kind, v); });
  };
  const double small_us = time(probe.small_bytes);
  const double large_us = time(probe.large_bytes);
  link_spec link = detail::fit_link(probe.small_bytes, small_us, probe.large_bytes, large_us);
  if (d2d) link.bandwidth_gb_s *= 2;
  return link;
}

/// Times every step of `p` as `run_op(step, view)` runs it on a fresh
/// stream: the fastest of `repeats` runs per step, in µs (cudaEvent pairs
/// around the op's work on the stream).
template <class RunOp>
[[nodiscard]] std::vector<double> time_ops(const problem& p, RunOp&& run_op, int repeats = 5) {
  stream s;
  std::vector<double> times(p.num_steps());
  for (std::size_t step = 0; step < p.num_steps(); ++step) {
    times[step] = detail::fastest_us(s, repeats, [&](stream_view v) { run_op(static_cast<index_t>(step), v); });
  }
  return times;
}

/// The device-profile JSON of GPU `ordinal`: its name and memory, the host
/// link measured each way, the device's copy bandwidth, and (if given) the
/// op times of `p` under "op_times_us".
[[nodiscard]] inline nlohmann::json device_profile(int ordinal = 0, const link_probe& probe = {},
                                                   const problem* p = nullptr, const std::vector<double>& op_times = {}) {
  cudaDeviceProp props{};
  MEMPLAN_CUDA_TRY(cudaGetDeviceProperties(&props, ordinal));
  const link_spec h2d = measure_link(copy_kind::host_to_device, probe, ordinal);
  const link_spec d2h = measure_link(copy_kind::device_to_host, probe, ordinal);
  const link_spec d2d = measure_link(copy_kind::device_to_device, probe, ordinal);
  nlohmann::json j{{"name", std::string(props.name)},
                   {"memory_bytes", static_cast<std::int64_t>(props.totalGlobalMem)},
                   {"memory_bandwidth_gb_s", d2d.bandwidth_gb_s},
                   {"h2d", {{"bandwidth_gb_s", h2d.bandwidth_gb_s}, {"latency_us", h2d.latency_us}}},
                   {"d2h", {{"bandwidth_gb_s", d2h.bandwidth_gb_s}, {"latency_us", d2h.latency_us}}}};
  if (p != nullptr) {
    MEMPLAN_EXPECTS(op_times.size() == p->num_steps(), invalid_argument, "device_profile: ", op_times.size(),
                    " op times for ", p->num_steps(), " steps");
    nlohmann::json ops = nlohmann::json::object();
    for (std::size_t s = 0; s < op_times.size(); ++s) ops[p->op_name[s]] = op_times[s];
    j["op_times_us"] = std::move(ops);
  }
  return j;
}

}  // namespace memplan::cuda
