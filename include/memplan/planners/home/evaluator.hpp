#pragma once
/// \file
/// HOME (He et al.) §3.3-3.4: the search space and the Policy Evaluator.
/// A placement gives each feature map one of retain (0), swap (1),
/// recompute (2); it becomes a plan (swap: offload after the forward pass
/// is done with it, prefetch with an in-trigger one op before the backward
/// pass needs it; recompute: free it then and recompute it on demand), and
/// the simulator judges the plan in place of HOME's Algo 2.

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <vector>

#include "memplan/cost/device.hpp"
#include "memplan/plan.hpp"
#include "memplan/planners/baselines/common.hpp"
#include "memplan/problem.hpp"
#include "memplan/sim/simulator.hpp"

namespace memplan::detail::home {

/// HOME §3.3's numbering of the actions a feature map may take.
enum class placement : std::uint8_t { retain = 0, swap = 1, recompute = 2 };

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
  return baselines::emit_evictions(p, "home", budget, [&](index_t s, baselines::emitter& em) {
    for (const index_t j : fm.done_after(s)) {
      const auto ji = static_cast<std::size_t>(j);
      if (x[ji] == placement::swap) em.swap_out(fm.tensor[ji]);
      if (x[ji] == placement::recompute) em.free(fm.tensor[ji]);
    }
  }, /*release_chain_sources=*/true);
}

/// splitmix64's finaliser (Steele et al. 2014): every output bit depends
/// on every input bit. It keys the evaluator's table, whose slot index
/// must depend on every feature map, or placements that differ elsewhere
/// collide and are simulated again.
[[nodiscard]] inline std::uint64_t mix64(std::uint64_t z) noexcept {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/// What the swarm minimises: the simulated iteration time of a placement
/// that fits, and for one that does not, how far its peak exceeds the
/// budget first, so that the swarm moves towards feasibility (any plan that
/// fits beats every plan that does not; among those, the smaller excess).
struct fitness {
  bytes_t excess_bytes = 0;
  double time_us = 0;
  auto operator<=>(const fitness&) const = default;
};

/// HOME's Policy Evaluator (§3.4) with the simulator as the cost model.
/// Keeps the simulator's buffers between calls; one per thread.
///
/// It remembers the fitness of the placements it simulated last in a
/// direct-mapped table keyed by the whole placement (two bits a feature
/// map): a swarm that converges proposes the same placements again and
/// again, and a placement found in the table gets exactly the fitness its
/// simulation gave, so the answers are those of a full simulation.
class evaluator {
 public:
  /// `memo_bytes`: the table's size (0: no table); it holds a power of two of placements.
  evaluator(const problem& p, const device_spec& dev, const feature_maps& fm, bytes_t budget,
            std::size_t memo_bytes = std::size_t{32} << 20)
      : p_(&p), dev_(&dev), fm_(&fm), budget_(budget), words_((fm.size() + 31) / 32) {
    const std::size_t slots = std::bit_floor(memo_bytes / (words_ * sizeof(std::uint64_t) + sizeof(fitness)));
    memo_keys_.assign(slots * words_, 0);
    memo_.assign(slots, {no_fitness, 0});
  }

  /// The fitness of placement `x`: one full simulation (which, when it does
  /// not fit, also finds how much it needs without a budget), or the one
  /// remembered from simulating the same placement.
  [[nodiscard]] fitness operator()(std::span<const placement> x) {
    ++evaluations_;
    key_.assign(words_, 0);
    for (std::size_t j = 0; j < x.size(); ++j) key_[j / 32] |= static_cast<std::uint64_t>(x[j]) << (2 * (j % 32));
    if (memo_.empty()) return simulate(x);
    std::uint64_t h = 0;
    for (const std::uint64_t w : key_) h = mix64(h ^ w);
    const std::size_t slot = static_cast<std::size_t>(h) & (memo_.size() - 1);
    const auto stored = std::span(memo_keys_).subspan(slot * words_, words_);
    if (memo_[slot].excess_bytes != no_fitness && std::ranges::equal(stored, key_)) return memo_[slot];
    const fitness f = simulate(x);
    std::ranges::copy(key_, stored.begin());
    memo_[slot] = f;
    return f;
  }
  /// Placements evaluated so far.
  [[nodiscard]] std::int64_t evaluations() const noexcept { return evaluations_; }
  /// Of those, the ones simulated (not found in the table).
  [[nodiscard]] std::int64_t simulations() const noexcept { return simulations_; }

 private:
  static constexpr bytes_t no_fitness = -1;  ///< an empty slot

  [[nodiscard]] fitness simulate(std::span<const placement> x) {
    ++simulations_;
    const plan pl = emit(*p_, *fm_, x, budget_).take();
    unbounded_need need;
    const report r = sim_.run(*p_, pl, *dev_, budget_, need);
    if (r.feasible) return {0, r.time_us};
    MEMPLAN_EXPECTS(need.feasible, error, "home: an emitted plan is invalid: ", r.failure);
    return {std::max<bytes_t>(need.peak_bytes - budget_, 1), need.time_us};
  }

  const problem* p_;
  const device_spec* dev_;
  const feature_maps* fm_;
  bytes_t budget_;
  simulator sim_;
  std::size_t words_;
  std::vector<std::uint64_t> key_;
  std::vector<std::uint64_t> memo_keys_;  ///< per slot, `words_` words
  std::vector<fitness> memo_;             ///< per slot
  std::int64_t evaluations_ = 0;
  std::int64_t simulations_ = 0;
};

}  // namespace memplan::detail::home
