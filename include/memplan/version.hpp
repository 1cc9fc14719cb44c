#pragma once
/// \file
/// memplan's version, for code that must know which one it builds against.
/// CMakeLists.txt reads the project's version from these lines (one place).

#include <string_view>

#define MEMPLAN_VERSION_MAJOR 0
#define MEMPLAN_VERSION_MINOR 1
#define MEMPLAN_VERSION_PATCH 0
/// "MAJOR.MINOR.PATCH".
#define MEMPLAN_VERSION "0.1.0"

namespace memplan {
/// MEMPLAN_VERSION at run time.
inline constexpr std::string_view version = MEMPLAN_VERSION;
}  // namespace memplan
