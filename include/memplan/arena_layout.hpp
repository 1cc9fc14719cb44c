#pragma once
/// \file
/// Provisional greedy-by-size placement (replaced by the layout-algo branch).

#include <algorithm>
#include <limits>
#include <numeric>
#include <span>
#include <vector>

#include "memplan/fwd.hpp"

namespace memplan {

inline constexpr index_t never_freed = std::numeric_limits<index_t>::max();

struct segment {
  bytes_t bytes = 0;
  index_t end = 0;
};
struct lifetime {
  index_t begin = 0;
  index_t first_segment = 0;
  index_t segment_count = 1;
};
struct arena_layout {
  std::vector<bytes_t> offsets;
  bytes_t arena_bytes = 0;
  bytes_t peak_live_bytes = 0;
};

inline arena_layout place(std::span<const lifetime> lifetimes, std::span<const segment> segments, bytes_t alignment) {
  const std::size_t n = lifetimes.size();
  std::vector<bytes_t> size(n, 0);
  std::vector<index_t> end(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    for (index_t k = 0; k < lifetimes[i].segment_count; ++k) {
      const segment& s = segments[static_cast<std::size_t>(lifetimes[i].first_segment + k)];
      size[i] += s.bytes;
      end[i] = std::max(end[i], s.end);
    }
    size[i] = (size[i] + alignment - 1) / alignment * alignment;
  }
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::ranges::stable_sort(order, [&](std::size_t a, std::size_t b) { return size[a] > size[b]; });
  arena_layout out;
  out.offsets.assign(n, 0);
  std::vector<std::size_t> placed;
  for (const std::size_t i : order) {
    if (size[i] == 0) continue;
    std::vector<std::pair<bytes_t, bytes_t>> taken;
    for (const std::size_t j : placed) {
      if (lifetimes[j].begin < end[i] && lifetimes[i].begin < end[j]) taken.emplace_back(out.offsets[j], out.offsets[j] + size[j]);
    }
    std::ranges::sort(taken);
    bytes_t at = 0;
    for (const auto& [from, to] : taken) {
      if (from >= at + size[i]) break;
      at = std::max(at, to);
    }
    out.offsets[i] = at;
    out.arena_bytes = std::max(out.arena_bytes, at + size[i]);
    placed.push_back(i);
  }
  return out;
}

}  // namespace memplan
