#pragma once
/// \file
/// `auto`: memplan's portfolio (DESIGN.md §6). It runs several planners on
/// the same problem, judges every plan with the simulator, and returns the
/// fastest plan that fits (the first of the list on a tie); where none
/// fits, the plan with the smallest peak, with every planner's verdict in
/// its reason. The plan keeps the name of the planner that made it; its
/// `reason` says which one `auto` chose and among how many.
///
/// Option `portfolio` (`--portfolio a,b,...`): the planners, by default
/// those that plan a large model in milliseconds (`home` and `milp` search
/// for seconds to minutes; name them to include them). The members get the
/// common options (seed, threads, time limit) and not the planner-specific
/// ones. With a time limit each member gets what is left of it, and the
/// members not started when it runs out are skipped (the first always runs).

#include <array>
#include <chrono>
#include <string>
#include <string_view>
#include <utility>

#include "memplan/error.hpp"
#include "memplan/format_bytes.hpp"
#include "memplan/planners/planner.hpp"
#include "memplan/sim/simulator.hpp"

namespace memplan {

/// The `auto` planner. Its `members` runs the planners `--portfolio` names;
/// the registry supplies it.
struct portfolio_planner {
  /// `--portfolio`.
  static constexpr std::array<planner_option, 1> cli_options{
      {{"portfolio", "a,b,...", "the planners tried (default: every planner that plans in milliseconds)"}}};
  /// Its members are registered planners: their plans come laid out (the
  /// online policies' by their allocator), so the registry keeps the layout.
  static constexpr bool lays_out = true;
  /// The members without `--portfolio`: every registered planner that plans in milliseconds.
  static constexpr std::string_view default_portfolio =
      "none,capuchin,tsplit,dtr,delta,checkpoint,superneurons,vdnn-conv,vdnn-all,revolve";

  /// Runs a member by name; null: operator() throws.
  planner_lookup members = nullptr;

  /// Runs every member on `p` and returns the fastest plan that fits, else
  /// the one with the lowest peak (see the file comment).
  /// \throws invalid_argument without `members` or for a malformed `--portfolio`.
  plan operator()(const problem& p, const device_spec& dev, bytes_t budget, const planner_options& o) const {
    MEMPLAN_EXPECTS(members != nullptr, invalid_argument, "auto: needs the planner registry (use the registered 'auto')");
    const auto names = planner_names(option_text(o, "portfolio", default_portfolio), "auto", "portfolio");
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    planner_options common = o;
    common.extra.clear();
    common.progress = nullptr;
    simulator sim;
    plan fastest;
    plan closest;
    double fastest_us = 0;
    std::string_view fastest_name;
    std::string_view closest_name;
    std::string verdicts;  // per member, for the reason when none fits
    int fit = 0;
    int ran = 0;
    for (const std::string_view name : names) {
      if (ran > 0 && o.time_limit_s > 0) {
        common.time_limit_s = o.time_limit_s - std::chrono::duration<double>(clock::now() - start).count();
        if (common.time_limit_s <= 0) break;
      }
      plan pl = members(name, p, dev, budget, common);
      ++ran;
      // Every planner reports the simulator's verdict; the portfolio checks
      // it rather than trusting it.
      const report r = sim.run(p, pl, dev, budget);
      if (pl.feasible && r.feasible) {
        if (fit++ == 0 || r.time_us < fastest_us) {
          fastest = std::move(pl);
          fastest_us = r.time_us;
          fastest_name = name;
        }
        continue;
      }
      verdicts.append(verdicts.empty() ? "" : "; ").append(pl.feasible ? r.failure : pl.reason);
      if (closest_name.empty() || pl.best_peak < closest.best_peak) {
        closest = std::move(pl);
        closest_name = name;
      }
    }
    const std::string skipped =
        ran < static_cast<int>(names.size())
            ? detail::concat(" (the time limit of ", o.time_limit_s, " s ran out before ", names.size() - ran, " more)")
            : std::string();
    if (fit > 0) {
      const std::string caveat = fastest.reason.empty() ? std::string() : "; " + fastest.reason;
      fastest.reason = detail::concat("auto: ", fastest_name, "'s plan, the fastest of the ", fit, " of ", ran,
                                      " planners whose plans fit", skipped, caveat);
      return fastest;
    }
    closest.feasible = false;
    closest.kind = ran < static_cast<int>(names.size()) ? failure_kind::time_limit : failure_kind::out_of_memory;
    closest.reason = detail::concat("auto: none of the ", ran, " planners' plans fits", skipped, "; the lowest peak, ",
                                    format_bytes(closest.best_peak), ", is ", closest_name, "'s: ", verdicts);
    return closest;
  }
};
static_assert(planner<portfolio_planner>);

}  // namespace memplan
