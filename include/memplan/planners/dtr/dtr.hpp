#pragma once
/// \file
/// `dtr`: DTR (Kirisame et al., "Dynamic Tensor Rematerialization", ICLR
/// 2021): online, recompute only. Whenever an allocation would exceed the
/// budget, evict the resident tensor with the smallest h(t) = c(t) / (m(t) ·
/// s(t)) — c the recompute cost of t and its evicted neighbourhood (h_DTR^eq,
/// equivalence classes), m its size, s its staleness — and recompute
/// evicted tensors, recursively, when an op reads them.
///
/// Two accountings (`--allocator`):
/// - `none` (default): DTR's own simulator (planners/dtr/dtr_runtime.hpp):
///   the budget bounds the bytes in use; the plan is then laid out like a
///   static planner's (verdict.hpp's with_layout). DTR keeps memory at the
///   budget, so its evictions can leave the bytes free but scattered: where
///   that layout overflows the arena, DTR also runs in the arena itself
///   (best fit, the cheapest contiguous window evicted where nothing
///   holds an allocation), and the faster of that plan and with_layout's
///   (DTR for a tighter target) is the result.
/// - `caching`: DTR's policy inside a framework on PyTorch's caching
///   allocator (planners/dtr/online.hpp), as DELTA §5.2-5.3 measured it:
///   fragmentation is paid for with evictions, driver calls with time.

#include <array>
#include <string>
#include <string_view>

#include "memplan/error.hpp"
#include "memplan/planners/verdict.hpp"
#include "memplan/planners/planner.hpp"
#include "memplan/planners/dtr/dtr_runtime.hpp"
#include "memplan/planners/dtr/online.hpp"

namespace memplan {

/// DTR's eviction policy in the online runtime (`--allocator caching`; DELTA builds on it).
struct dtr_policy {
  static constexpr bool offloads = false;  ///< recompute only

  /// h_DTR(t) = c(t) / (m(t) · s(t)).
  [[nodiscard]] static float score(float cost_us, float bytes, float staleness_us) noexcept {
    return cost_us / (bytes * staleness_us);
  }
  /// Evicts the candidate with the smallest h_DTR, or nothing (no_index)
  /// when no tensor can be released.
  [[nodiscard]] detail::dtr::release choose(const detail::dtr::online_state& s) const {
    return {s.best_candidate([](float c, float m, float st) { return score(c, m, st); }), detail::dtr::release_kind::evict};
  }
};
static_assert(detail::dtr::eviction_policy<dtr_policy>);

/// The `dtr` planner: DTR online, in its own simulator or on the caching
/// allocator (see the file comment).
struct dtr_planner {
  /// Lays out its own plans: with_layout over DTR's simulator, or the caching allocator's layout.
  static constexpr bool lays_out = true;
  /// `--allocator`.
  static constexpr std::array<planner_option, 1> cli_options{
      {{"allocator", "A", "none (default: DTR's simulator, the budget bounds the bytes in use) or caching "
                          "(PyTorch's caching allocator, as DELTA measured DTR)"}}};

  /// `--allocator caching`.
  /// \throws invalid_argument for another value than none or caching.
  [[nodiscard]] static bool caching(const planner_options& o) {
    const std::string_view a = option_text(o, "allocator", "none");
    MEMPLAN_EXPECTS(a == "none" || a == "caching", invalid_argument, "option '--allocator' takes none or caching, got '",
                    a, "'");
    return a == "caching";
  }

  /// Runs DTR on `p` within `budget` under the accounting `--allocator`
  /// names; the plan is infeasible (cut at that step) where an op cannot be
  /// made room for or past `o.time_limit_s`, or where its layout overflows.
  /// \throws invalid_argument for a malformed `--allocator`.
  plan operator()(const problem& p, const device_spec& dev, bytes_t budget, const planner_options& o) const {
    if (caching(o)) {
      dtr_policy policy;
      plan pl = detail::dtr::run_online(p, dev, budget, policy, "dtr", o.time_limit_s).result;
      if (pl.feasible) detail::judge(p, pl, dev);
      return pl;
    }
    int runs = 0;
    bool counted_fits = false;  // DTR's plan for the budget itself fits by its count
    plan laid = detail::with_layout(
        [&](bytes_t target) {
          plan pl = detail::dtr::run_dtr(p, target, o.time_limit_s).pl;
          if (pl.feasible) detail::judge(p, pl, dev);
          if (runs++ == 0) counted_fits = pl.feasible;
          return pl;
        },
        p, dev, budget);
    // DTR's own plan fits as laid out, or does not fit even by count.
    if ((laid.feasible && runs == 1) || !counted_fits) return laid;
    plan arena = in_arena(p, dev, budget, o);
    if (!arena.feasible) return laid;  // its reason names the layout's overflow
    if (!laid.feasible) return arena;
    simulator sim;
    return sim.run(p, arena, dev, budget).time_us < sim.run(p, laid, dev, budget).time_us ? arena : laid;
  }

 private:
  /// DTR run in an arena of `budget` (dtr_runtime's arena), with its layout.
  static plan in_arena(const problem& p, const device_spec& dev, bytes_t budget, const planner_options& o) {
    plan pl = detail::dtr::run_dtr(p, budget, o.time_limit_s, dev.alignment).pl;
    pl.budget = budget;
    if (!pl.feasible) return pl;
    detail::judge(p, pl, dev);
    if (pl.feasible) pl.best_peak = pl.arena_bytes;  // as with_layout reports a laid-out plan
    return pl;
  }
};
static_assert(planner<dtr_planner>);

}  // namespace memplan
