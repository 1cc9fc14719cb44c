#pragma once
/// \file
/// The `planner` concept and the options every planner accepts
/// (DESIGN.md §6): problem + device + budget + options -> plan, pure and
/// deterministic for a given seed.

#include <charconv>
#include <concepts>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "memplan/cost/device.hpp"
#include "memplan/error.hpp"
#include "memplan/plan.hpp"
#include "memplan/problem.hpp"

namespace memplan {

/// A planner-specific setting (`planner_options::extra`; the CLI's `--NAME
/// VALUE`), as a planner declares it: `static constexpr
/// std::array<planner_option, N> cli_options`, listed by `memplan CMD --help`.
struct planner_option {
  std::string_view name;   ///< the key in `planner_options::extra`, the CLI's `--NAME`
  std::string_view value;  ///< what it takes ("N", "a,b")
  std::string_view help;   ///< one line for `--help`, with the default
};

/// What every planner takes besides the problem, device and budget: a seed,
/// limits, the planner-specific settings, and a progress callback.
struct planner_options {
  std::uint64_t seed = 1;    ///< for randomised planners; same seed, same plan
  double time_limit_s = 0;   ///< 0: none; otherwise return the best plan so far when it hits
  int threads = 0;           ///< 0: all cores
  /// Planner-specific settings by name (`--filter lru`, `--seed-with a,b`).
  std::map<std::string, std::string, std::less<>> extra;
  /// Long searches (HOME) report one status line per iteration here; the
  /// CLI prints them on stderr when it is a terminal. Empty: silent.
  std::function<void(std::string_view status)> progress;
};

/// The planner-specific setting `name` (`--name VALUE` on the CLI), or
/// `fallback` when it is not given.
[[nodiscard]] inline std::string_view option_text(const planner_options& o, std::string_view name,
                                                  std::string_view fallback) {
  const auto it = o.extra.find(name);
  return it == o.extra.end() ? fallback : std::string_view(it->second);
}

/// The planner-specific number `name` in [lo, hi], or `fallback` when absent.
/// \throws invalid_argument naming the option, the value and the range.
[[nodiscard]] inline double option_number(const planner_options& o, std::string_view name, double fallback,
                                          double lo, double hi) {
  const auto it = o.extra.find(name);
  if (it == o.extra.end()) return fallback;
  const std::string& text = it->second;
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  MEMPLAN_EXPECTS(ec == std::errc{} && end == text.data() + text.size() && v >= lo && v <= hi, invalid_argument,
                  "option '--", name, "' takes a number from ", lo, " to ", hi, ", got '", text, "'");
  return v;
}

/// The planner names in `list`, the comma-separated value of planner
/// `who`'s option `--option` (`--seed-with capuchin,tsplit`).
/// \throws invalid_argument when a name is empty or `who` itself.
[[nodiscard]] inline std::vector<std::string_view> planner_names(std::string_view list, std::string_view who,
                                                                 std::string_view option) {
  std::vector<std::string_view> names;
  for (std::string_view rest = list; !rest.empty();) {
    const std::size_t comma = rest.find(',');
    names.push_back(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    MEMPLAN_EXPECTS(!names.back().empty() && names.back() != who && (comma == std::string_view::npos || !rest.empty()),
                    invalid_argument, who, ": --", option, " takes a comma-separated list of other planners, got '",
                    list, "'");
  }
  return names;
}

/// Runs a registered planner by name (the registry supplies it to the
/// planners that run others: `auto`, and `home` and `milp` with `--seed-with`).
using planner_lookup = plan (*)(std::string_view name, const problem&, const device_spec&, bytes_t,
                                const planner_options&);

/// The plans of the planners that planner `who`'s option `--seed-with`
/// names, each run with the common options only (not `who`'s own, no progress).
/// \throws invalid_argument when the list is malformed or no `lookup` is given.
[[nodiscard]] inline std::vector<plan> seed_plans(planner_lookup lookup, std::string_view who, const problem& p,
                                                  const device_spec& dev, bytes_t budget, const planner_options& o) {
  std::vector<plan> seeds;
  planner_options plain = o;
  plain.extra.clear();
  plain.progress = nullptr;
  for (const std::string_view name : planner_names(option_text(o, "seed-with", ""), who, "seed-with")) {
    MEMPLAN_EXPECTS(lookup != nullptr, invalid_argument, who, ": --seed-with '", name,
                    "' needs the planner registry (use the registered '", who, "')");
    seeds.push_back(lookup(name, p, dev, budget, plain));
  }
  return seeds;
}

/// A planner. A budget it cannot meet is an ordinary outcome: the plan says
/// `feasible == false`, why, and the smallest peak it reached.
template <class P>
concept planner = requires(const P& p, const problem& pr, const device_spec& d, bytes_t budget,
                           const planner_options& o) {
  { p(pr, d, budget, o) } -> std::same_as<plan>;
};

}  // namespace memplan
