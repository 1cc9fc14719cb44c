#pragma once
/// \file
/// Capuchin (Peng et al., ASPLOS 2020) §4.3-4.5, Eq. 1: the eviction
/// candidates, pairs {evicted-access, back-access} of consecutive accesses,
/// their free time FT and the in-trigger chosen backwards from the
/// back-access.
///
/// Times come from the measured access list. A step k as in-trigger means
/// "when the op of step k ends": that is the time of its output accesses
/// and of the next op's input accesses, so walking the access list
/// backwards for the first access earlier than SwapInStartTime finds the
/// latest such step.

#include <algorithm>
#include <cstddef>
#include <limits>
#include <utility>
#include <vector>

#include "memplan/cost/device.hpp"
#include "memplan/planners/capuchin/measured.hpp"
#include "memplan/planners/capuchin/memory_estimate.hpp"
#include "memplan/problem.hpp"

namespace memplan::detail::capuchin {

/// A tensor that may be evicted between two consecutive accesses (§4.2).
struct candidate {
  index_t tensor = no_index;
  index_t evicted_access = no_index;  ///< step after whose access the tensor leaves the device
  index_t back_access = no_index;     ///< step of the next access, which needs it back
  double evicted_us = 0;              ///< time of the evicted-access
  double back_us = 0;                 ///< time of the back-access
  double ideal_free_time_us = 0;      ///< FT with the ideal SwapInStartTime (the ranking key, §4.5)
};

/// What swapping a candidate costs, with its in-trigger (§4.3, §4.4).
struct swap_estimate {
  index_t in_trigger = no_index;  ///< the swap-in starts when this step's op ends
  double swap_out_end_us = 0;     ///< SwapOutEndTime: the evicted-access (or a free link) + SwapTime
  double swap_in_start_us = 0;    ///< SwapInStartTime: when the prefetch starts
  double free_time_us = 0;        ///< FT = SwapInStartTime - SwapOutEndTime (Eq. 1)
  double overhead_us = 0;         ///< how late the tensor is back for its back-access
  index_t released_from = 0;      ///< first step that starts after the swap-out ends
};

/// One direction of the host link as the policy books it: pinned copies
/// occupy it exclusively, one at a time (§4.3, §4.4).
class link_bookings {
 public:
  /// The start of the earliest free gap of `length` from `ready` on.
  [[nodiscard]] double earliest(double ready, double length) const {
    double t = ready;
    for (const auto& [s, e] : busy_) {
      if (e <= t) continue;
      if (s - t >= length) break;
      t = e;
    }
    return t;
  }
  /// The start of the latest free gap of `length` inside [ready, deadline],
  /// or -infinity if there is none.
  [[nodiscard]] double latest(double ready, double deadline, double length) const {
    double end = deadline;
    for (auto it = busy_.rbegin(); it != busy_.rend(); ++it) {
      if (it->first >= end) continue;
      if (it->second <= end - length) break;
      end = it->first;
    }
    return end - length >= ready ? end - length : -std::numeric_limits<double>::infinity();
  }
  void book(double start, double length) {
    const std::pair<double, double> slot{start, start + length};
    busy_.insert(std::ranges::upper_bound(busy_, slot), slot);
  }

 private:
  std::vector<std::pair<double, double>> busy_;  ///< sorted, disjoint
};

/// The latest step k <= last whose op ends by `time` (the in-trigger for a
/// swap-in that must start by `time`), or no_index.
[[nodiscard]] inline index_t latest_step_ending_by(const measured_execution& m, double time, index_t last) {
  const auto end = m.end_us.begin() + last + 1;
  const auto it = std::upper_bound(m.end_us.begin(), end, time);
  return static_cast<index_t>(it - m.end_us.begin()) - 1;
}

/// Swapping `c` out after its evicted-access and back in for its
/// back-access, with the in-trigger no earlier than `earliest_trigger`
/// (§4.4: not inside the peak period), on links already carrying the
/// copies booked in `d2h` and `h2d`.
[[nodiscard]] inline swap_estimate estimate_swap(const measured_execution& m, const device_spec& dev, bytes_t bytes,
                                                 const candidate& c, index_t earliest_trigger,
                                                 const link_bookings& d2h, const link_bookings& h2d) {
  swap_estimate s;
  const double out_time = dev.d2h.transfer_us(bytes);
  const double in_time = dev.h2d.transfer_us(bytes);
  s.swap_out_end_us = d2h.earliest(c.evicted_us, out_time) + out_time;
  // §4.4: the latest time to prefetch is the back-access time minus the
  // SwapTime; walking back from the back-access, the in-trigger is the first
  // access before it. It cannot come before the swap-out ends or inside the peak.
  const index_t lowest = std::max(earliest_trigger, c.evicted_access);
  const double ready = std::max(s.swap_out_end_us, m.end_us[static_cast<std::size_t>(lowest)]);
  s.swap_in_start_us = h2d.latest(ready, c.back_us, in_time);
  if (s.swap_in_start_us < ready) s.swap_in_start_us = h2d.earliest(ready, in_time);  // it will be late
  s.in_trigger = std::max(lowest, latest_step_ending_by(m, s.swap_in_start_us, c.back_access - 1));
  s.free_time_us = s.swap_in_start_us - s.swap_out_end_us;
  s.overhead_us = std::max(0.0, s.swap_in_start_us + in_time - c.back_us);
  const auto first = m.start_us.begin() + c.evicted_access + 1;
  s.released_from = static_cast<index_t>(std::lower_bound(first, m.start_us.end(), s.swap_out_end_us) -
                                         m.start_us.begin());
  return s;
}

/// The in-trigger bound of §4.4 for `c`: walking back from the back-access,
/// the first step where the tensor, once back, would not fit (the peak).
[[nodiscard]] inline index_t peak_bound(const memory_estimate& mem, const candidate& c) {
  // The curve still counts the tensor as resident between its accesses.
  return mem.last_over(c.evicted_access + 1, c.back_access - 1, 0);
}

/// Algo 1 line 1, IdentifyAndSortCandidates: tensors accessed more than
/// once whose eviction would span the peak period (§4.5 (i), (ii)), each
/// with its pair of consecutive accesses of longest FT, sorted by FT,
/// longest first.
[[nodiscard]] inline std::vector<candidate> identify_candidates(const problem& p, const measured_execution& m,
                                                                const device_spec& dev,
                                                                const memory_estimate& mem) {
  std::vector<candidate> out;
  for (std::size_t t = 0; t < p.num_tensors(); ++t) {
    const auto ti = static_cast<index_t>(t);
    const auto list = m.accesses_of(ti);
    if (p.persistent(ti) || p.bytes[t] == 0 || list.size() < 2) continue;
    const double swap_time = dev.d2h.transfer_us(p.bytes[t]) + dev.h2d.transfer_us(p.bytes[t]);
    candidate best;
    for (std::size_t i = 0; i + 1 < list.size(); ++i) {
      const tensor_access& from = m.accesses[static_cast<std::size_t>(list[i])];
      const tensor_access& to = m.accesses[static_cast<std::size_t>(list[i + 1])];
      if (from.step == no_index || to.step <= from.step + 1) continue;
      if (!mem.covers_peak(from.step + 1, to.step - 1)) continue;
      const double ft = to.time_us - from.time_us - swap_time;
      if (best.tensor == no_index || ft > best.ideal_free_time_us) {
        best = {ti, from.step, to.step, from.time_us, to.time_us, ft};
      }
    }
    if (best.tensor != no_index) out.push_back(best);
  }
  std::ranges::stable_sort(out, [](const candidate& a, const candidate& b) {
    return a.ideal_free_time_us > b.ideal_free_time_us;
  });
  return out;
}

}  // namespace memplan::detail::capuchin
