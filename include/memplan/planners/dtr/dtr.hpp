#pragma once
/// \file
/// `dtr`: DTR (Kirisame et al., "Dynamic Tensor Rematerialization", ICLR
/// 2021), as DELTA §2 and §4.1 describe it: online, recompute only.
/// Whenever an allocation would exceed the budget, evict the resident
/// tensor with the smallest h(t) = c(t) / (m(t) · s(t)) — c the recompute
/// cost of t and its evicted neighbourhood (h_DTR^eq, equivalence classes;
/// see planners/dtr/online_state.hpp), m its size, s its staleness — and
/// recompute evicted tensors, recursively, when an op reads them.

#include <string>

#include "memplan/planners/verdict.hpp"
#include "memplan/planners/planner.hpp"
#include "memplan/planners/dtr/online.hpp"

namespace memplan {

/// DTR's eviction policy.
struct dtr_policy {
  static constexpr bool offloads = false;  ///< recompute only

  /// h_DTR(t) = c(t) / (m(t) · s(t)).
  [[nodiscard]] static float score(float cost_us, float bytes, float staleness_us) noexcept {
    return cost_us / (bytes * staleness_us);
  }
  [[nodiscard]] detail::dtr::release choose(const detail::dtr::online_state& s) const {
    return {s.best_candidate([](float c, float m, float st) { return score(c, m, st); }), detail::dtr::release_kind::evict};
  }
};
static_assert(detail::dtr::eviction_policy<dtr_policy>);

struct dtr_planner {
  static constexpr bool lays_out = true;  ///< its allocator's layout (dtr/online.hpp)
  plan operator()(const problem& p, const device_spec& dev, bytes_t budget, const planner_options& o) const {
    dtr_policy policy;
    plan pl = detail::dtr::run_online(p, dev, budget, policy, "dtr", o.time_limit_s).result;
    if (pl.feasible) detail::judge(p, pl, dev);
    return pl;
  }
};
static_assert(planner<dtr_planner>);

}  // namespace memplan
