#pragma once
// What the tests of the registered planners share.
#include <string_view>

#include "memplan/planners/registry.hpp"

namespace memplan::test {

/// Planner `planner`'s plan with default options.
inline plan run(std::string_view planner, const problem& p, const device_spec& d, bytes_t budget) {
  return find_planner(planner).run(p, d, budget, planner_options{});
}

}  // namespace memplan::test
