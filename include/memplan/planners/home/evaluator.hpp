#pragma once
/// \file
/// HOME (He et al.) §3.3-3.4: the search space and the Policy Evaluator.
/// A placement gives each feature map one of retain (0), swap (1),
/// recompute (2); it becomes a plan (swap: offload after the forward pass
/// is done with it, prefetch with an in-trigger one op before the backward
/// pass needs it; recompute: free it then and recompute it on demand), and
/// the simulator judges the plan in place of HOME's Algo 2.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "memplan/cost/device.hpp"
#include "memplan/plan.hpp"
#include "memplan/planners/baselines/common.hpp"
#include "memplan/planners/home/fitness.hpp"
#include "memplan/planners/home/memo.hpp"
#include "memplan/problem.hpp"
#include "memplan/sim/simulator.hpp"

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

/// A timing-free proof that a placement does not fit (issue 29): while
/// the op of step s runs, every tensor live at s by DESIGN.md §4's rule is
/// on the device but the evicted feature maps after the forward pass is
/// done with them, and of those the ones the op reads are there too — the
/// plan frees or swaps out nothing else, and an evicted map stays until
/// its last forward reader has run. None of them can be freed before the
/// op starts (it or a later op holds each), so if their bytes exceed the
/// budget at some step, the op can never start and the simulation under
/// the budget would fail.
class residency_bound {
 public:
  residency_bound(const problem& p, const feature_maps& fm) : live_(p.baseline_memory()), read_begin_{0} {
    const baselines::forward_backward_uses uses(p);
    for (std::size_t j = 0; j < fm.size(); ++j) {
      const index_t t = fm.tensor[j];
      evicted_from_.push_back(uses.forward_done(p, t) + 1);
      evicted_to_.push_back(p.live_end(t) + 1);
      bytes_.push_back(p.bytes[static_cast<std::size_t>(t)]);
      for (const index_t s : p.uses(t)) {
        if (s >= evicted_from_.back() && s < evicted_to_.back()) read_at_.push_back(s);
      }
      read_begin_.push_back(static_cast<index_t>(read_at_.size()));
    }
  }

  /// The bytes on the device while some op of placement `x`'s plan runs,
  /// in any run of it: a floor under its peak with or without a budget.
  [[nodiscard]] bytes_t least_peak(std::span<const placement> x) {
    change_.assign(live_.size() + 1, 0);
    for (std::size_t j = 0; j < x.size(); ++j) {
      if (x[j] == placement::retain || evicted_from_[j] >= evicted_to_[j]) continue;
      change_[static_cast<std::size_t>(evicted_from_[j])] += bytes_[j];
      change_[static_cast<std::size_t>(evicted_to_[j])] -= bytes_[j];
      for (auto k = static_cast<std::size_t>(read_begin_[j]); k < static_cast<std::size_t>(read_begin_[j + 1]); ++k) {
        const auto s = static_cast<std::size_t>(read_at_[k]);  // back on the device while its reader runs
        change_[s] -= bytes_[j];
        change_[s + 1] += bytes_[j];
      }
    }
    bytes_t evicted = 0;
    bytes_t least = 0;
    for (std::size_t s = 0; s < live_.size(); ++s) {
      evicted += change_[s];
      least = std::max(least, live_[s] - evicted);
    }
    return least;
  }

  /// Whether placement `x` is proven not to fit `budget`.
  [[nodiscard]] bool exceeds(std::span<const placement> x, bytes_t budget) { return least_peak(x) > budget; }

 private:
  std::vector<bytes_t> live_;          ///< per step, with no planning
  std::vector<index_t> evicted_from_;  ///< per feature map: the first step it may be off the device
  std::vector<index_t> evicted_to_;    ///< per feature map: one past its last live step
  std::vector<bytes_t> bytes_;         ///< per feature map
  std::vector<index_t> read_begin_;    ///< per feature map, plus one: into read_at_
  std::vector<index_t> read_at_;       ///< the steps reading it while it may be off the device
  std::vector<bytes_t> change_;        ///< per step: bytes evicted from there on (a difference array)
};

/// HOME's Policy Evaluator (§3.4) with the simulator as the cost model.
/// Keeps the simulator's buffers between calls; one per thread. With a
/// memo (memo.hpp, shared by the threads), a placement simulated before is
/// answered from it, with the fitness its simulation gave.
class evaluator {
 public:
  evaluator(const problem& p, const device_spec& dev, const feature_maps& fm, bytes_t budget,
            placement_memo* memo = nullptr)
      : p_(&p), dev_(&dev), fm_(&fm), budget_(budget), memo_(memo), bound_(p, fm) {}

  /// The fitness of placement `x`: one full simulation (which, when it does
  /// not fit, also finds how much it needs without a budget), or the one
  /// remembered from simulating the same placement.
  [[nodiscard]] fitness operator()(std::span<const placement> x) {
    ++evaluations_;
    if (memo_ == nullptr) return simulate(x);
    key_.assign(x);
    if (const std::optional<fitness> known = memo_->find(key_)) return *known;
    const fitness f = simulate(x);
    memo_->insert(key_, f);
    return f;
  }
  /// A fitness no greater than `x`'s, without simulating it: the memo's
  /// where it holds `x`, else how far the residency bound puts it over the
  /// budget (excess only: its time is at least 0), else 0. Algo 3 needs a
  /// candidate's exact fitness only where the floor does not already
  /// decide its comparison (update_particle).
  [[nodiscard]] fitness floor(std::span<const placement> x) {
    if (memo_ != nullptr) {
      key_.assign(x);
      if (const std::optional<fitness> known = memo_->find(key_)) return *known;
    }
    const bytes_t least = bound_.least_peak(x);
    return {least > budget_ ? least - budget_ : 0, 0.0};
  }
  /// Placements evaluated so far.
  [[nodiscard]] std::int64_t evaluations() const noexcept { return evaluations_; }
  /// Of those, the ones simulated (not found in the memo).
  [[nodiscard]] std::int64_t simulations() const noexcept { return simulations_; }
  /// Of those, the ones `residency_bound` proved not to fit: simulated
  /// without the budget only.
  [[nodiscard]] std::int64_t bound_hits() const noexcept { return bound_hits_; }

 private:
  /// The fitness a simulation gives: under the budget and, where the plan
  /// does not fit, without one. Where the bound proves it does not fit,
  /// the run without a budget is all that is needed.
  [[nodiscard]] fitness simulate(std::span<const placement> x) {
    ++simulations_;
    const plan pl = emit(*p_, *fm_, x, budget_).take();
    if (bound_.least_peak(x) > budget_) {
      ++bound_hits_;
      const report free_run = sim_.run(*p_, pl, *dev_, simulator::unlimited, numbers_only);
      MEMPLAN_EXPECTS(free_run.feasible, error, "home: an emitted plan is invalid: ", free_run.failure);
      return {std::max<bytes_t>(free_run.peak_bytes - budget_, 1), free_run.time_us};
    }
    unbounded_need need;
    const report r = sim_.run(*p_, pl, *dev_, budget_, need, numbers_only);
    if (r.feasible) return {0, r.time_us};
    MEMPLAN_EXPECTS(need.feasible, error, "home: an emitted plan is invalid: ", r.failure);
    return {std::max<bytes_t>(need.peak_bytes - budget_, 1), need.time_us};
  }

  /// The fitness needs the run's time and peak: no messages, no baseline.
  static constexpr simulate_options numbers_only{.describe_failure = false, .baseline_peak = false};

  const problem* p_;
  const device_spec* dev_;
  const feature_maps* fm_;
  bytes_t budget_;
  placement_memo* memo_;
  residency_bound bound_;
  simulator sim_;
  placement_key key_;
  std::int64_t evaluations_ = 0;
  std::int64_t simulations_ = 0;
  std::int64_t bound_hits_ = 0;
};

}  // namespace memplan::detail::home
