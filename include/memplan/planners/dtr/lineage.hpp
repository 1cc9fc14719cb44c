#pragma once
/// \file
/// A tensor's lineage for the online runtimes (DTR, DELTA): its neighbours
/// in DTR's evicted neighbourhood (h_DTR^eq), and when it may go for good.

#include <algorithm>
#include <cstddef>
#include <vector>

#include "memplan/problem.hpp"

namespace memplan::detail::dtr {

/// DTR §4's neighbours of t at `step`: its producer's inputs (parents) and
/// the outputs of the steps that read it, up to `step` (children made so far).
template <class F>
void for_each_neighbour(const problem& p, index_t t, index_t step, F f) {
  const index_t made = p.producer[static_cast<std::size_t>(t)];
  if (made != no_index) {
    for (const index_t in : p.inputs(made)) f(in);
  }
  for (const index_t u : p.uses(t)) {
    if (u > step) break;
    for (const index_t out : p.outputs(u)) f(out);
  }
}

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
