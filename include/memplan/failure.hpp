#pragma once
/// \file
/// `memplan::failure_kind`: why a plan does not run within its budget, as a
/// type that callers switch on. The messages beside it (`report::failure`,
/// `plan::reason`, `validation::errors`, an exception's `what()`) are for
/// people and may change; the kind is the verdict.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace memplan {

/// The verdict on a plan, or on a planner's search for one.
enum class failure_kind : std::uint8_t {
  none,             ///< it runs within the budget
  out_of_memory,    ///< a valid plan that does not fit the budget; the planner found none that fits
  invalid_plan,     ///< the action list breaks plan.hpp's rules
  planner_gave_up,  ///< the planner refuses the input (a size limit, not a chain) and makes no claim on the budget
  time_limit,       ///< the planner's time limit ran out before it found a plan that fits
};

/// Failure kinds as files and the CLI spell them.
inline constexpr std::array<std::string_view, 5> failure_kind_names{"none", "out_of_memory", "invalid_plan",
                                                                    "planner_gave_up", "time_limit"};

/// `k` as files and the CLI spell it (`failure_kind_names`).
[[nodiscard]] constexpr std::string_view to_string(failure_kind k) noexcept {
  return failure_kind_names[static_cast<std::size_t>(k)];
}

}  // namespace memplan
