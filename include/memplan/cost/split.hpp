#pragma once
/// \file
/// Split cost model: the time of an op cut into `parts` micro-batches
/// (TSPLIT §III-C, Fig. 5). Each extra part pays a kernel launch, and parts
/// too small to fill the device run at reduced efficiency.

#include <cmath>

#include "memplan/cost/device.hpp"
#include "memplan/fwd.hpp"

namespace memplan {

/// Below this much work (µs at full speed) a kernel cannot fill the device;
/// a part of `w` µs then takes `min_efficient_kernel_us` µs of device time
/// scaled by sqrt(w / min) — under-utilisation grows as parts shrink.
inline constexpr double min_efficient_kernel_us = 20.0;

/// Total time of an op of `time_us` run as `parts` equal micro-ops.
[[nodiscard]] inline double split_time_us(const device_spec& d, double time_us, index_t parts) {
  if (parts <= 1) return time_us;
  const double part = time_us / parts;
  const double effective =
      part >= min_efficient_kernel_us ? part : std::sqrt(part * min_efficient_kernel_us);
  return parts * effective + (parts - 1) * d.launch_overhead_us;
}

}  // namespace memplan
