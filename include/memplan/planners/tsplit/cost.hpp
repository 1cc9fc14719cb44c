#pragma once
/// \file
/// TSPLIT (Nie et al., ICDE 2022) §IV-B, Eq. 3, and §V-B: the swap option's
/// cost, ΔT_i[s_j, swap], and the PCIe occupancy array Oc_u it reads,
/// simulated under the current plan and updated after every decision, and
/// the collectives that share the link with swaps (docs/distributed.md).
/// The recompute cost (Eq. 4) depends on the planner's decisions so far and
/// lives with Algo 2 in tsplit/algo2.hpp.

#include <algorithm>
#include <bit>
#include <cstddef>
#include <utility>
#include <vector>

#include "memplan/cost/device.hpp"
#include "memplan/fwd.hpp"
#include "memplan/problem.hpp"

namespace memplan::detail::tsplit {

/// Prefix sums of per-step values that change one at a time (a Fenwick tree).
class fenwick {
 public:
  explicit fenwick(std::size_t n) : tree_(n + 1, 0.0) {}
  void add(std::size_t i, double v) {
    for (++i; i < tree_.size(); i += i & (~i + 1)) tree_[i] += v;
  }
  /// Sum of the first `count` values.
  [[nodiscard]] double prefix(std::size_t count) const {
    double s = 0;
    for (; count > 0; count &= count - 1) s += tree_[count];
    return s;
  }
  /// The largest count whose prefix is at most `v` (the values are non-negative).
  [[nodiscard]] std::size_t count_within(double v) const {
    std::size_t pos = 0;
    for (std::size_t step = std::bit_floor(tree_.size() - 1); step > 0; step >>= 1) {
      if (pos + step < tree_.size() && tree_[pos + step] <= v) {
        pos += step;
        v -= tree_[pos];
      }
    }
    return pos;
  }

 private:
  std::vector<double> tree_;
};

/// Oc_u for one direction of the host link (TSPLIT Eq. 3): the share of op
/// u's time T_u during which the link already carries a planned copy. Our
/// simulator has separate d2h and h2d streams, so each direction keeps its
/// own array; the paper's single PCIe array is the case of one shared link.
class link_occupancy {
 public:
  explicit link_occupancy(std::vector<double> time_us)
      : time_(std::move(time_us)), busy_(time_.size(), 0.0), idle_(time_.size()), next_(time_.size() + 1) {
    for (std::size_t u = 0; u < time_.size(); ++u) {
      idle_.add(u, time_[u]);
      next_[u] = time_[u] > 0 ? static_cast<index_t>(u) : static_cast<index_t>(u + 1);
    }
    next_[time_.size()] = static_cast<index_t>(time_.size());
  }

  /// Σ_{u=from}^{to-1} (1 - Oc_u) T_u: link time left idle while ops from .. to-1 run.
  [[nodiscard]] double idle(index_t from, index_t to) const {
    if (from >= to) return 0;
    return idle_.prefix(static_cast<std::size_t>(to)) - idle_.prefix(static_cast<std::size_t>(from));
  }
  /// The latest step p in [lo, q] with idle(p, q) >= us: where a copy of
  /// `us` must start to be done by step q. Where even idle(lo, q) is less,
  /// the latest p with idle(p, q) = idle(lo, q): the copy stalls step q as
  /// little as from lo, and its tensor takes no memory while the link is
  /// busy with other copies before p.
  [[nodiscard]] index_t latest_start(index_t lo, index_t q, double us) const {
    if (us <= 0 || lo >= q) return std::max(lo, q);
    const double total = idle_.prefix(static_cast<std::size_t>(q));
    const double most = total - idle_.prefix(static_cast<std::size_t>(lo));  // idle(lo, q)
    const auto p = static_cast<index_t>(idle_.count_within(total - std::min(us, most)));
    return std::clamp(p, lo, q);
  }
  /// A copy of `us` starts at step `from` and takes the link's idle time
  /// from there on, op by op (TSPLIT §V-B: simulate the PCIe occupancy).
  void occupy(index_t from, double us) {
    for (index_t u = find(from); us > 0 && static_cast<std::size_t>(u) < time_.size(); u = find(u + 1)) {
      const auto ui = static_cast<std::size_t>(u);
      const double take = std::min(time_[ui] - busy_[ui], us);
      busy_[ui] += take;
      idle_.add(ui, -take);
      us -= take;
      if (busy_[ui] >= time_[ui]) next_[ui] = u + 1;
    }
  }
  /// Oc_u.
  [[nodiscard]] double occupancy(index_t u) const {
    const auto ui = static_cast<std::size_t>(u);
    return time_[ui] > 0 ? busy_[ui] / time_[ui] : 1.0;
  }

 private:
  /// The first step at or after u whose link time is not all taken.
  index_t find(index_t u) {
    index_t root = u;
    while (next_[static_cast<std::size_t>(root)] != root) root = next_[static_cast<std::size_t>(root)];
    while (next_[static_cast<std::size_t>(u)] != root) u = std::exchange(next_[static_cast<std::size_t>(u)], root);
    return root;
  }

  std::vector<double> time_;  ///< T_u
  std::vector<double> busy_;   ///< Oc_u T_u
  fenwick idle_;               ///< (1 - Oc_u) T_u
  std::vector<index_t> next_;  ///< union-find over steps whose link time is all taken
};

/// Oc_u of one direction of p's host link before any swap is planned.
/// `collectives`: Eq. 3's timeline is the compute stream's, one op after
/// another; a communication op runs on its own stream (plan.hpp's
/// stream_of) and adds no time to it (T_u = 0). Where collectives share
/// the host link (`device_spec::collectives_share_host_link`), each one
/// takes the link in both directions from its step on, for its time: the
/// simulator serves a swap issued after a collective only once the
/// collective has ended. Otherwise every op's T_u, the paper's model.
[[nodiscard]] inline link_occupancy host_link(const problem& p, const device_spec& dev, bool collectives = true) {
  std::vector<double> time(p.time_us);
  if (p.comm.empty() || !collectives) return link_occupancy(std::move(time));
  for (std::size_t u = 0; u < time.size(); ++u) {
    if (p.communicates(static_cast<index_t>(u))) time[u] = 0;
  }
  link_occupancy link(std::move(time));
  if (!dev.collectives_share_host_link) return link;
  for (std::size_t u = 0; u < p.time_us.size(); ++u) {
    if (p.communicates(static_cast<index_t>(u))) link.occupy(static_cast<index_t>(u), p.time_us[u]);
  }
  return link;
}

/// ΔT_i[s_j, swap] of TSPLIT Eq. 3, split in its two terms, and the step p
/// at which the swap-in starts.
struct swap_cost {
  double forward_us = 0;   ///< stall of the swap-out
  double backward_us = 0;  ///< stall of the swap-in
  index_t prefetch = no_index;  ///< p: the swap-in is issued when op p starts
  [[nodiscard]] double total_us() const noexcept { return forward_us + backward_us; }
};

/// TSPLIT Eq. 3 for a tensor of `bytes` whose device copy is made by step
/// `made` (j), evicted for the bottleneck at step i and read again at step
/// q: the swap-out overlaps ops j+1 .. i-1, the swap-in ops p .. q-1, each
/// only in the link time they leave idle. p is the latest step after i
/// from which the swap-in is hidden (Eq. 3's M_k condition is what later
/// bottlenecks of Algo 2 enforce).
[[nodiscard]] inline swap_cost swap_cost_of(const link_occupancy& out, const link_occupancy& in,
                                            const device_spec& dev, bytes_t bytes, index_t made, index_t i,
                                            index_t q) {
  swap_cost c;
  const double to_host = dev.d2h.transfer_us(bytes);
  const double to_device = dev.h2d.transfer_us(bytes);
  c.forward_us = std::max(to_host - out.idle(made + 1, i), 0.0);
  c.prefetch = in.latest_start(i + 1, q, to_device);
  c.backward_us = std::max(to_device - in.idle(c.prefetch, q), 0.0);
  return c;
}

}  // namespace memplan::detail::tsplit
