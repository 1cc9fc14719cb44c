#pragma once
/// \file
/// The `planner` concept and the options every planner accepts
/// (DESIGN.md §6): problem + device + budget + options -> plan, pure and
/// deterministic for a given seed.

#include <concepts>
#include <cstdint>
#include <map>
#include <string>

#include "memplan/cost/device.hpp"
#include "memplan/plan.hpp"
#include "memplan/problem.hpp"

namespace memplan {

struct planner_options {
  std::uint64_t seed = 1;    ///< for randomised planners; same seed, same plan
  double time_limit_s = 0;   ///< 0: none; otherwise return the best plan so far when it hits
  int threads = 0;           ///< 0: all cores
  /// Planner-specific settings by name (`--filter lru`, `--seed-with a,b`).
  std::map<std::string, std::string, std::less<>> extra;
};

/// A planner. A budget it cannot meet is an ordinary outcome: the plan says
/// `feasible == false`, why, and the smallest peak it reached.
template <class P>
concept planner = requires(const P& p, const problem& pr, const device_spec& d, bytes_t budget,
                           const planner_options& o) {
  { p(pr, d, budget, o) } -> std::same_as<plan>;
};

}  // namespace memplan
