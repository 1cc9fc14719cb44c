#pragma once
/// \file
/// `cheapest_window`: where DTR run in an arena (dtr_runtime.hpp) makes
/// room for an allocation that no hole holds — the run of neighbouring
/// blocks of least total cost, holes and evictable tensors only, that spans
/// at least the bytes wanted. A sliding window over the arena in offset
/// order: O(n) for n blocks.

#include <cstddef>
#include <limits>
#include <span>
#include <utility>

#include "memplan/fwd.hpp"

namespace memplan::detail::dtr {

/// A block of the arena, in offset order: [lo, hi), free or taken.
struct arena_block {
  bytes_t lo = 0;
  bytes_t hi = 0;
  index_t tensor = no_index;  ///< the tensor in it; no_index: a hole (or a block that is not a tensor's)
  long double cost = 0;       ///< what evicting it costs (0 for a hole); < 0: it cannot go
};

/// The blocks [first, last) of `line` (contiguous, in offset order) that
/// span at least `size` bytes from `line[first].lo`, hold no block that
/// cannot go, and have the least sum of costs (the lowest such window on
/// ties); {0, 0} if there is none.
[[nodiscard]] inline std::pair<std::size_t, std::size_t> cheapest_window(std::span<const arena_block> line,
                                                                         bytes_t size) {
  long double best = std::numeric_limits<long double>::infinity();
  std::pair<std::size_t, std::size_t> window{0, 0};
  long double sum = 0;  // the costs of line[i, j]
  std::size_t i = 0;
  for (std::size_t j = 0; j < line.size(); ++j) {
    if (line[j].cost < 0) {  // no window spans it
      i = j + 1;
      sum = 0;
      continue;
    }
    sum += line[j].cost;
    while (i < j && line[j].hi - line[i + 1].lo >= size) sum -= line[i++].cost;
    if (line[j].hi - line[i].lo >= size && sum < best) {
      best = sum;
      window = {i, j + 1};
    }
  }
  return window;
}

}  // namespace memplan::detail::dtr
