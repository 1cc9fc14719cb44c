#pragma once
/// \file
/// HOME (He et al.) §3.3: the search space. A placement gives each feature
/// map one of retain (0), swap (1), recompute (2); it becomes a plan (swap:
/// offload after the forward pass is done with it, prefetch with an
/// in-trigger one op before the backward pass needs it; recompute: free it
/// then and recompute it on demand).

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "memplan/plan.hpp"
#include "memplan/planners/baselines/common.hpp"
#include "memplan/planners/home/fitness.hpp"
#include "memplan/problem.hpp"

namespace memplan::detail::home {

/// The dimensions of a particle: the feature maps, i.e. the outputs of the
/// forward layers and the input batch (HOME §3.3: "each layer of the DNN
/// model has one feature map") that something reads. Those the backward
/// pass reads are the ones that matter most, but the others count too: a
/// recomputed feature map's producer reads them again in the backward pass,
/// so they stay on the device unless they are evicted as well.
struct feature_maps {
  std::vector<index_t> tensor;               ///< per feature map
  std::vector<std::uint8_t> can_recompute;   ///< per feature map: its producer may run again
  std::vector<index_t> done_begin;           ///< CSR by step: feature maps the forward pass is done with after it
  std::vector<index_t> done_list;            ///< feature map indices, ascending within a step

  explicit feature_maps(const problem& p) : done_begin(p.num_steps() + 1, 0) {
    const baselines::forward_backward_uses uses(p);
    std::vector<index_t> done;
    for (std::size_t t = 0; t < p.num_tensors(); ++t) {
      const auto ti = static_cast<index_t>(t);
      const index_t made = p.producer[t];
      if (p.kind[t] != tensor_kind::activation && p.kind[t] != tensor_kind::input) continue;
      if (made != no_index && p.op_phase[static_cast<std::size_t>(made)] != phase::forward) continue;
      if (p.uses(ti).empty() || uses.forward_done(p, ti) == no_index) continue;
      tensor.push_back(ti);
      can_recompute.push_back(made != no_index && p.recomputable[static_cast<std::size_t>(made)] != 0 ? 1 : 0);
      done.push_back(uses.forward_done(p, ti));
      ++done_begin[static_cast<std::size_t>(done.back()) + 1];
    }
    for (std::size_t s = 0; s < p.num_steps(); ++s) done_begin[s + 1] += done_begin[s];
    done_list.resize(tensor.size());
    std::vector<index_t> fill(done_begin.begin(), done_begin.end() - 1);
    for (std::size_t j = 0; j < tensor.size(); ++j) {
      done_list[static_cast<std::size_t>(fill[static_cast<std::size_t>(done[j])]++)] = static_cast<index_t>(j);
    }
  }

  [[nodiscard]] std::size_t size() const noexcept { return tensor.size(); }
  /// How many actions feature map j may take: retain and swap, and recompute where allowed.
  [[nodiscard]] int choices(std::size_t j) const noexcept { return can_recompute[j] != 0 ? 3 : 2; }
  [[nodiscard]] std::span<const index_t> done_after(index_t s) const {
    const auto b = static_cast<std::size_t>(done_begin[static_cast<std::size_t>(s)]);
    return {done_list.data() + b, static_cast<std::size_t>(done_begin[static_cast<std::size_t>(s) + 1]) - b};
  }

  /// The placement a plan made (for seeding the swarm with another
  /// planner's plan): its swap and recompute decisions; keep, split, and
  /// recompute where HOME may not recompute become retain.
  [[nodiscard]] std::vector<placement> placement_of(const plan& pl) const {
    std::vector<placement> x(size(), placement::retain);
    for (std::size_t j = 0; j < size(); ++j) {
      const auto t = static_cast<std::size_t>(tensor[j]);
      if (t >= pl.decisions.size()) continue;
      if (pl.decisions[t] == decision::swap) x[j] = placement::swap;
      if (pl.decisions[t] == decision::recompute && can_recompute[j] != 0) x[j] = placement::recompute;
    }
    return x;
  }
};

/// The plan of placement `x`. A feature map placed `recompute` is
/// recomputed when an op needs it, from its producer's inputs, recomputed
/// first where they are evicted too (HOME §2.2: FM1 -> FM2 -> FM3); those
/// are released again right after (Algo 2 charges the chain each time it
/// runs), so a retained map is where a chain starts, as in checkpointing.
[[nodiscard]] inline baselines::emitter emit(const problem& p, const feature_maps& fm, std::span<const placement> x,
                                            bytes_t budget) {
  return baselines::emit_evictions(p, "home", budget, [&](index_t s, auto& em) {
    for (const index_t j : fm.done_after(s)) {
      const auto ji = static_cast<std::size_t>(j);
      if (x[ji] == placement::swap) em.swap_out(fm.tensor[ji]);
      if (x[ji] == placement::recompute) em.free(fm.tensor[ji]);
    }
  }, /*release_chain_sources=*/true);
}

}  // namespace memplan::detail::home
