#pragma once
/// \file
/// What the simulator and the cost model need to know about a device
/// (DESIGN.md §5). Named specs and profile files live in cost/devices.hpp.

#include <string>

#include "memplan/cost/allocator_spec.hpp"
#include "memplan/fwd.hpp"

namespace memplan {

/// One direction of the host link.
struct link_spec {
  double bandwidth_gb_s = 12.0;  ///< sustained, GB/s (10^9 bytes per second)
  double latency_us = 10.0;      ///< fixed cost of one copy
  /// Time of one copy of `bytes`: latency + bytes / bandwidth (DESIGN.md §5).
  [[nodiscard]] double transfer_us(bytes_t bytes) const noexcept {
    return latency_us + static_cast<double>(bytes) / (bandwidth_gb_s * 1e3);
  }
};

/// A GPU as the cost model sees it: its memory, its throughput and its host
/// link. The simulator prices ops with cost/roofline.hpp from these numbers
/// where a graph has no measured times.
struct device_spec {
  std::string name;                  ///< as the CLI and profile files name it ("titan-rtx", ...)
  bytes_t memory_bytes = 0;          ///< device memory, the budget a plan must fit
  double fp32_tflops = 0;            ///< dense FP32 throughput (CUDA cores)
  double tf32_tflops = 0;            ///< 0 where the device has no TF32 tensor cores
  double bf16_tflops = 0;            ///< dense FP16/BF16 tensor-core throughput
  double memory_bandwidth_gb_s = 0;  ///< device memory, GB/s
  link_spec h2d;                     ///< host to device
  link_spec d2h;                     ///< device to host
  double launch_overhead_us = 5.0;   ///< per kernel launch
  /// Every device allocation starts at a multiple of this and takes its
  /// bytes rounded up to it (256: what cudaMalloc guarantees). A power of two.
  bytes_t alignment = 256;
  /// The allocator model of the online policies (runtime/caching_allocator.hpp).
  allocator_spec allocator;
  /// A rank's collectives and transfers cross the host link (the GPU's PCIe
  /// link to the switch its network card hangs off, as between DGX nodes:
  /// cost/cluster.hpp), so they share it with swaps: the simulator runs
  /// copies and communication in issue order on it (DESIGN.md §5).
  bool collectives_share_host_link = false;
};

}  // namespace memplan
