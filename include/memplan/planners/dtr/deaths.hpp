#pragma once
/// \file
/// When an online runtime (DTR, DELTA) may let a tensor go for good.

#include <algorithm>
#include <cstddef>
#include <vector>

#include "memplan/problem.hpp"

namespace memplan::detail::dtr {

/// The last step at which each tensor may be read: its last use, or, for a
/// tensor nothing can recompute (no producer, or one that may not run
/// again), the last step at which rematerialising a tensor made from it may
/// still need it. Persistent tensors never die (num_steps).
/// \param remakes_state whether the runtime may evict persistent tensors its
///        ops make and make them again at the end (dtr_runtime): then what
///        they are made from is needed to the end.
[[nodiscard]] inline std::vector<index_t> death_steps(const problem& p, bool remakes_state = false) {
  const auto n = static_cast<index_t>(p.num_steps());
  std::vector<index_t> horizon(p.num_tensors(), 0);  // last step a remat may need t
  const auto reach = [&](index_t t) {
    index_t h = p.live_end(t);
    for (const index_t u : p.uses(t)) {
      if (p.recomputable[static_cast<std::size_t>(u)] == 0) continue;
      for (const index_t out : p.outputs(u)) {
        if (remakes_state || !p.persistent(out)) h = std::max(h, horizon[static_cast<std::size_t>(out)]);
      }
    }
    horizon[static_cast<std::size_t>(t)] = h;
  };
  for (index_t s = n - 1; s >= 0; --s) {  // consumers' outputs first
    for (const index_t t : p.outputs(s)) reach(t);
  }
  std::vector<index_t> death(p.num_tensors(), n);
  for (std::size_t t = 0; t < p.num_tensors(); ++t) {
    const auto ti = static_cast<index_t>(t);
    if (p.persistent(ti)) continue;
    if (p.producer[t] == no_index) reach(ti);
    const index_t made = p.producer[t];
    const bool remat = made != no_index && p.recomputable[static_cast<std::size_t>(made)] != 0;
    death[t] = remat ? p.live_end(ti) : horizon[t];
  }
  return death;
}

}  // namespace memplan::detail::dtr
