#pragma once
/// \file
/// Roofline op-time model (Williams, Waterman, Patterson 2009): an op that
/// performs `flops` floating-point operations and moves `bytes` through
/// device memory takes
///
///     time = launch + max(flops / (peak * compute_eff), bytes / (bandwidth * memory_eff))
///
/// The efficiency factors say how much of the data-sheet peak real kernels
/// reach; docs/devices.md gives their sources.

#include <algorithm>

#include "memplan/cost/device.hpp"
#include "memplan/error.hpp"

namespace memplan {

/// Which arithmetic units an op's multiply-adds run on.
enum class math_mode : unsigned char {
  fp32,  ///< CUDA cores, FP32
  tf32,  ///< TF32 tensor cores (Ampere+); FP32 where the device has none
  half,  ///< FP16/BF16 tensor cores; FP32 rate where the device has none
};

/// Fractions of the peak an op class reaches.
struct roofline_efficiency {
  double compute = 1.0;  ///< of peak FLOP/s
  double memory = 1.0;   ///< of peak device-memory bandwidth
};

/// Convolutions and GEMMs: cuDNN/cuBLAS typically reach 60-75 % of peak on
/// the large layers of ResNet/VGG/BERT (NVIDIA's deep-learning performance
/// guide), and streaming kernels roughly 80-90 % of peak DRAM bandwidth
/// (BabelStream, Deakin et al. 2018). We take 0.65 and 0.85: middle values,
/// to be replaced by a measured device profile where one exists.
inline constexpr roofline_efficiency gemm_efficiency{0.65, 0.85};
/// Element-wise ops, reductions, normalisation, pooling, optimizer updates:
/// memory bound; they reach the same 85 % of bandwidth, and their few FLOPs
/// run on CUDA cores at a quarter of peak (transcendentals, no FMA pairing).
inline constexpr roofline_efficiency elementwise_efficiency{0.25, 0.85};

/// Peak TFLOP/s of `d` in `mode`, falling back to FP32 where the device
/// lacks the units.
[[nodiscard]] inline double peak_tflops(const device_spec& d, math_mode mode) noexcept {
  switch (mode) {
    case math_mode::tf32:
      return d.tf32_tflops > 0 ? d.tf32_tflops : d.fp32_tflops;
    case math_mode::half:
      return d.bf16_tflops > 0 ? d.bf16_tflops : d.fp32_tflops;
    case math_mode::fp32:
      break;
  }
  return d.fp32_tflops;
}

/// Time in µs of one kernel doing `flops` FLOPs over `bytes` of device memory.
/// \throws invalid_argument if a count is negative or the device has no
///         positive peak or bandwidth.
[[nodiscard]] inline double roofline_time_us(const device_spec& d, double flops, double bytes,
                                             math_mode mode = math_mode::fp32,
                                             roofline_efficiency eff = gemm_efficiency) {
  MEMPLAN_EXPECTS(flops >= 0 && bytes >= 0, invalid_argument, "roofline: negative work (flops ", flops, ", bytes ",
                  bytes, ")");
  const double peak = peak_tflops(d, mode);
  MEMPLAN_EXPECTS(peak > 0 && d.memory_bandwidth_gb_s > 0, invalid_argument, "device '", d.name,
                  "': roofline needs positive peak TFLOPS and memory bandwidth");
  const double compute_us = flops / (peak * 1e6 * eff.compute);                 // TFLOP/s = 1e6 FLOP/µs
  const double memory_us = bytes / (d.memory_bandwidth_gb_s * 1e3 * eff.memory);  // GB/s = 1e3 B/µs
  return d.launch_overhead_us + std::max(compute_us, memory_us);
}

}  // namespace memplan
