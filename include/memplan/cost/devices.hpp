#pragma once
/// \file
/// The named device specs of DESIGN.md §5: the GPUs the four papers ran on
/// (TSPLIT: Titan RTX and GTX 1080 Ti; Capuchin: P100; HOME: RTX 2080 Ti;
/// DELTA: A100) and their neighbours. Figures are the vendors' data-sheet
/// numbers; the host link is PCIe x16 at the *sustained* pinned-copy rate,
/// not the signalling rate. docs/devices.md lists the sources.

#include <array>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "memplan/cost/device.hpp"
#include "memplan/error.hpp"
#include "memplan/fwd.hpp"

namespace memplan {

namespace detail {

inline constexpr bytes_t gib = bytes_t{1} << 30;

/// Sustained pinned cudaMemcpyAsync rates on PCIe x16, each way. Gen3 moves
/// ~12-13 GB/s of its 15.75 GB/s (128b/130b coding, TLP headers); device to
/// host is a little faster, as Capuchin observes. Each generation doubles.
inline link_spec pcie_h2d(int gen) { return {gen >= 5 ? 48.0 : gen == 4 ? 24.0 : 12.0, 10.0}; }
inline link_spec pcie_d2h(int gen) { return {gen >= 5 ? 50.0 : gen == 4 ? 25.0 : 13.0, 10.0}; }

/// One spec: memory in GiB as the card has it, TFLOPS, GB/s, PCIe generation.
inline device_spec make_device(std::string name, bytes_t memory_gib, double fp32, double tf32, double half,
                               double bandwidth, int pcie_gen) {
  device_spec d;
  d.name = std::move(name);
  d.memory_bytes = memory_gib * gib;
  d.fp32_tflops = fp32;
  d.tf32_tflops = tf32;
  d.bf16_tflops = half;
  d.memory_bandwidth_gb_s = bandwidth;
  d.h2d = pcie_h2d(pcie_gen);
  d.d2h = pcie_d2h(pcie_gen);
  // Host-side cudaLaunchKernel cost plus the gap between dependent kernels;
  // 5 µs is the figure usually measured on PCIe cards (Fig. 5 of TSPLIT shows
  // small split ops dominated by it).
  d.launch_overhead_us = 5.0;
  return d;
}

inline const std::array<device_spec, 8>& device_table() {
  // name, GiB, FP32, TF32, FP16/BF16 dense tensor-core (FP32 accumulate), GB/s, PCIe gen.
  // Pascal has no tensor cores: P100 runs FP16 at twice FP32, GP102 at 1/64
  // (0 = use the FP32 rate). Turing has no TF32.
  static const std::array<device_spec, 8> table{
      make_device("titan-rtx", 24, 16.3, 0.0, 130.0, 672.0, 3),
      make_device("titan-v", 12, 14.9, 0.0, 110.0, 652.8, 3),
      make_device("gtx-1080ti", 11, 11.34, 0.0, 0.0, 484.0, 3),
      make_device("rtx-2080ti", 11, 13.45, 0.0, 53.8, 616.0, 3),
      make_device("p100", 16, 9.3, 0.0, 18.7, 732.0, 3),
      make_device("v100", 32, 15.7, 0.0, 125.0, 900.0, 3),
      make_device("a100", 80, 19.5, 156.0, 312.0, 2039.0, 4),
      make_device("h100", 80, 67.0, 494.7, 989.4, 3350.0, 5),
  };
  return table;
}

/// The entry of `table` named `name`.
/// \throws invalid_argument naming it (`what`: "device", ...) and listing the known ones.
template <class Table>
[[nodiscard]] const auto& find_named(const Table& table, std::string_view name, std::string_view what) {
  for (const auto& e : table) {
    if (e.name == name) return e;
  }
  std::string known;
  for (const auto& e : table) known += (known.empty() ? "" : ", ") + e.name;
  throw invalid_argument(concat("unknown ", what, " '", name, "'; known ", what, "s: ", known));
}

}  // namespace detail

/// Every named device spec, in a fixed order.
[[nodiscard]] inline std::span<const device_spec> devices() { return detail::device_table(); }

/// The spec named `name` (`titan-rtx`, `p100`, ...).
/// \throws invalid_argument naming the device and listing the known ones.
[[nodiscard]] inline const device_spec& find_device(std::string_view name) {
  return detail::find_named(devices(), name, "device");
}

}  // namespace memplan
