#pragma once
/// \file
/// HOME (He et al.) §3.4: the Policy Evaluator. The simulator judges the
/// plan of a placement (feature_maps.hpp) in place of HOME's Algo 2.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>

#include "memplan/cost/device.hpp"
#include "memplan/error.hpp"
#include "memplan/plan.hpp"
#include "memplan/planners/home/added_work.hpp"
#include "memplan/planners/home/feature_maps.hpp"
#include "memplan/planners/home/fitness.hpp"
#include "memplan/planners/home/memo.hpp"
#include "memplan/planners/home/residency_bound.hpp"
#include "memplan/problem.hpp"
#include "memplan/sim/simulator.hpp"

namespace memplan::detail::home {

/// HOME's Policy Evaluator (§3.4) with the simulator as the cost model.
/// Keeps the emitters' and the simulator's buffers between calls; one per
/// thread. With a memo (memo.hpp, shared by the threads), a placement
/// simulated before — or one with the same plan — is answered from it,
/// with the fitness its simulation gave.
class evaluator {
 public:
  evaluator(const problem& p, const device_spec& dev, const feature_maps& fm, bytes_t budget,
            placement_memo* memo = nullptr)
      : p_(&p), dev_(&dev), fm_(&fm), budget_(budget), memo_(memo), bound_(p, fm, dev), added_(p, fm),
        emission_(p, budget) {}

  /// The fitness of placement `x`: one full simulation (which, when it does
  /// not fit, also finds how much it needs without a budget), or the one
  /// remembered from simulating the same placement. `known`: `floor(x)`,
  /// where the caller has it (the bound is then not counted again, nor the
  /// memo asked again: an inexact floor is one it did not hold).
  [[nodiscard]] fitness operator()(std::span<const placement> x, const estimate* known = nullptr) {
    ++evaluations_;
    if (memo_ == nullptr) return simulate(x, known);
    assign_key(x);
    if (known == nullptr || known->exact) {
      if (const std::optional<fitness> remembered = memo_->find(key_)) return *remembered;
    }
    const fitness f = simulate(x, known);
    memo_->insert(key_, f);
    return f;
  }
  /// A fitness no greater than `x`'s, without simulating it: the memo's
  /// (exact) where it holds `x`; else, where the residency bound proves it
  /// does not fit (its excess is then its peak without a budget less the
  /// budget), the excess of the bound's floor under that peak, and time 0;
  /// else 0. Algo 3 needs a candidate's exact fitness only where the floor
  /// does not already decide its comparison (update_particle).
  [[nodiscard]] estimate floor(std::span<const placement> x) {
    if (memo_ != nullptr) {
      assign_key(x);
      if (const std::optional<fitness> known = memo_->find(key_)) {
        ++evaluations_;
        return {*known, true};
      }
    }
    const residency_bound::floors f = bound_.floors_of(x);
    if (f.any_run <= budget_) return {{0, 0.0}, false};
    return {{f.unbounded - budget_, 0.0}, false};
  }
  /// `floor(x)`, where x is one move from a placement of known fitness:
  /// map j, retained there (fitness `before`), is placed x[j]. A move that
  /// only adds work (added_work.hpp) to a placement that does not fit, to
  /// one the bound proves does not fit either, makes its run without a
  /// budget — each one's time — no faster, so the floor's time is `before`'s.
  [[nodiscard]] estimate floor(std::span<const placement> x, std::size_t j, placement was, const fitness& before) {
    estimate f = floor(x);
    if (!f.exact && f.value.excess_bytes > 0 && before.excess_bytes > 0 && was == placement::retain &&
        added_.only_adds(x, j)) {
      f.value.time_us = before.time_us;
    }
    return f;
  }
  /// Algo 3 found a candidate's floor already loses: it was not evaluated.
  void decided_by_floor() noexcept { ++floor_decisions_; }
  /// Placements evaluated so far (their exact fitness: simulated or remembered).
  [[nodiscard]] std::int64_t evaluations() const noexcept { return evaluations_; }
  /// Candidates whose comparison a floor decided without evaluating them.
  [[nodiscard]] std::int64_t floor_decisions() const noexcept { return floor_decisions_; }
  /// Of those, the ones simulated (not found in the memo).
  [[nodiscard]] std::int64_t simulations() const noexcept { return simulations_; }
  /// Of those, the ones `residency_bound` proved not to fit: simulated
  /// without the budget only.
  [[nodiscard]] std::int64_t bound_hits() const noexcept { return bound_hits_; }

 private:
  /// The fitness a simulation gives: under the budget and, where the plan
  /// does not fit, without one. Where the bound proves it does not fit,
  /// the run without a budget is all that is needed. A floor with an excess
  /// is one the bound proved over budget (`floor`: any_run > budget, so
  /// unbounded - budget > 0).
  [[nodiscard]] fitness simulate(std::span<const placement> x, const estimate* known) {
    ++simulations_;
    const plan& pl = emit(*p_, *fm_, x, emission_);
    if (known != nullptr ? known->value.excess_bytes > 0 : bound_.floors_of(x).any_run > budget_) {
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

  /// `key_` for placement x: that of x's canonical placement, which has
  /// the same plan (feature_maps::canonical).
  void assign_key(std::span<const placement> x) {
    fm_->canonical(x, canonical_);
    key_.assign(canonical_);
  }

  /// The fitness needs the run's time and peak: no messages, no baselines.
  static constexpr simulate_options numbers_only{.describe_failure = false, .baselines = false};

  const problem* p_;
  const device_spec* dev_;
  const feature_maps* fm_;
  bytes_t budget_;
  placement_memo* memo_;
  residency_bound bound_;
  added_work added_;
  simulator sim_;
  emission emission_;  ///< the emitters' buffers
  std::vector<placement> canonical_;  ///< assign_key's
  placement_key key_;
  std::int64_t evaluations_ = 0;
  std::int64_t simulations_ = 0;
  std::int64_t bound_hits_ = 0;
  std::int64_t floor_decisions_ = 0;
};

}  // namespace memplan::detail::home
