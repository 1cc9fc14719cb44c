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
  std::vector<index_t> map_of;               ///< per tensor: its feature map, or no_index
  std::vector<std::uint8_t> dead;            ///< per feature map: nothing reads it once the forward pass is done with it
  std::vector<index_t> dead_list;            ///< the feature maps that are `dead`, ascending
  std::vector<index_t> remakers_begin{0};    ///< per feature map, plus one: into remakers
  std::vector<index_t> remakers;             ///< the other maps whose makers read it or make it too

  explicit feature_maps(const problem& p) : done_begin(p.num_steps() + 1, 0), map_of(p.num_tensors(), no_index) {
    const baselines::forward_backward_uses uses(p);
    std::vector<index_t> done;
    for (std::size_t t = 0; t < p.num_tensors(); ++t) {
      const auto ti = static_cast<index_t>(t);
      const index_t made = p.producer[t];
      if (p.kind[t] != tensor_kind::activation && p.kind[t] != tensor_kind::input) continue;
      if (made != no_index && p.op_phase[static_cast<std::size_t>(made)] != phase::forward) continue;
      if (p.uses(ti).empty() || uses.forward_done(p, ti) == no_index) continue;
      map_of[t] = static_cast<index_t>(tensor.size());
      tensor.push_back(ti);
      can_recompute.push_back(made != no_index && p.recomputable[static_cast<std::size_t>(made)] != 0 ? 1 : 0);
      done.push_back(uses.forward_done(p, ti));
      ++done_begin[static_cast<std::size_t>(done.back()) + 1];
    }
    for (std::size_t s = 0; s < p.num_steps(); ++s) done_begin[s + 1] += done_begin[s];
    find_remakers(p, done);
    done_list.resize(tensor.size());
    std::vector<index_t> fill(done_begin.begin(), done_begin.end() - 1);
    for (std::size_t j = 0; j < tensor.size(); ++j) {
      done_list[static_cast<std::size_t>(fill[static_cast<std::size_t>(done[j])]++)] = static_cast<index_t>(j);
    }
  }

  [[nodiscard]] std::size_t size() const noexcept { return tensor.size(); }
  /// Whether placing map j recompute in `x` changes nothing: it is dead
  /// once the forward pass is done with it, and no map placed recompute
  /// has a maker that reads or makes it — nothing would recompute it. Its
  /// copy dies then anyway: `emit` frees nothing for it, so its plan is
  /// retain's, and the evaluator's memo files it as retain.
  [[nodiscard]] bool recompute_is_retain(std::span<const placement> x, std::size_t j) const {
    return x[j] == placement::recompute && dead[j] != 0 && !remade(x, j);
  }
  /// `x` with each map whose recompute is retain (`recompute_is_retain`)
  /// placed retain, in `out`: placements with the same plan, one key.
  void canonical(std::span<const placement> x, std::vector<placement>& out) const {
    out.assign(x.begin(), x.end());
    for (const index_t jj : dead_list) {  // without branches on the placements: they are data
      const auto j = static_cast<std::size_t>(jj);
      out[j] = x[j] == placement::recompute && !remade(x, j) ? placement::retain : x[j];
    }
  }
  /// Whether a map placed recompute in `x` has a maker that reads or makes map j.
  [[nodiscard]] bool remade(std::span<const placement> x, std::size_t j) const {
    bool any = false;
    for (auto k = static_cast<std::size_t>(remakers_begin[j]); k < static_cast<std::size_t>(remakers_begin[j + 1]); ++k) {
      any |= x[static_cast<std::size_t>(remakers[k])] == placement::recompute;
    }
    return any;
  }
  /// How many actions feature map j may take: retain and swap, and recompute where allowed.
  [[nodiscard]] int choices(std::size_t j) const noexcept { return can_recompute[j] != 0 ? 3 : 2; }
  [[nodiscard]] std::span<const index_t> done_after(index_t s) const {
    const auto b = static_cast<std::size_t>(done_begin[static_cast<std::size_t>(s)]);
    return {done_list.data() + b, static_cast<std::size_t>(done_begin[static_cast<std::size_t>(s) + 1]) - b};
  }

  /// `dead` and `remakers`, from the step after which the forward pass is
  /// done with each map.
  void find_remakers(const problem& p, std::span<const index_t> done) {
    for (std::size_t j = 0; j < tensor.size(); ++j) {
      const index_t t = tensor[j];
      dead.push_back(p.live_end(t) <= done[j] ? 1 : 0);
      if (dead.back() != 0) dead_list.push_back(static_cast<index_t>(j));
      const auto add_outputs = [&](index_t op) {
        for (const index_t o : p.outputs(op)) {
          const index_t k = map_of[static_cast<std::size_t>(o)];
          if (k != no_index && k != static_cast<index_t>(j)) remakers.push_back(k);
        }
      };
      for (const index_t s : p.uses(t)) add_outputs(s);
      if (p.producer[static_cast<std::size_t>(t)] != no_index) add_outputs(p.producer[static_cast<std::size_t>(t)]);
      remakers_begin.push_back(static_cast<index_t>(remakers.size()));
    }
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

/// `emit_evictions`' `evict` for placement `x`: after step s, the maps the
/// forward pass is done with are swapped out or freed as placed.
[[nodiscard]] inline auto evictions(const feature_maps& fm, std::span<const placement> x) {
  return [&fm, x](index_t s, auto& em) {
    for (const index_t j : fm.done_after(s)) {
      const auto ji = static_cast<std::size_t>(j);
      if (x[ji] == placement::swap) em.swap_out(fm.tensor[ji]);
      if (x[ji] == placement::recompute && !fm.recompute_is_retain(x, ji)) em.free(fm.tensor[ji]);
    }
  };
}

/// The plan of placement `x`. A feature map placed `recompute` is
/// recomputed when an op needs it, from its producer's inputs, recomputed
/// first where they are evicted too (HOME §2.2: FM1 -> FM2 -> FM3); those
/// are released again right after (Algo 2 charges the chain each time it
/// runs), so a retained map is where a chain starts, as in checkpointing.
/// One that nothing reads again or would recompute dies as if retained
/// (`recompute_is_retain`): freeing it would change nothing.
[[nodiscard]] inline baselines::emitter emit(const problem& p, const feature_maps& fm, std::span<const placement> x,
                                            bytes_t budget) {
  return baselines::emit_evictions(p, "home", budget, evictions(fm, x), /*release_chain_sources=*/true);
}

/// The emitters an evaluator keeps between plans (their buffers).
struct emission {
  baselines::emitter first;   ///< emit_evictions' first pass
  baselines::emitter second;  ///< and its second, which holds the plan
  emission(const problem& p, bytes_t budget) : first(p, "home", budget, /*record=*/false), second(p, "home", budget) {}
};

/// `emit(p, fm, x, budget)`'s plan, written into `e`'s buffers; valid
/// until the next call.
[[nodiscard]] inline const plan& emit(const problem& p, const feature_maps& fm, std::span<const placement> x,
                                      emission& e) {
  e.first.restart();
  e.second.restart();
  baselines::emit_evictions_into(p, e.first, e.second, evictions(fm, x), /*release_chain_sources=*/true);
  return e.second.emitted();
}

}  // namespace memplan::detail::home
