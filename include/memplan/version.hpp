#pragma once
/// \file
/// memplan's version, for code that must know which one it builds against.
/// CMakeLists.txt reads the project's version from these lines (one place).

#include <string_view>

/// MEMPLAN_VERSION's first number, for `#if`.
#define MEMPLAN_VERSION_MAJOR 0
/// MEMPLAN_VERSION's second number; the installed CMake package accepts a
/// request for the same major and minor version only (SameMinorVersion).
#define MEMPLAN_VERSION_MINOR 1
/// MEMPLAN_VERSION's third number.
#define MEMPLAN_VERSION_PATCH 0
/// "MAJOR.MINOR.PATCH".
#define MEMPLAN_VERSION "0.1.0"

namespace memplan {
/// MEMPLAN_VERSION at run time.
inline constexpr std::string_view version = MEMPLAN_VERSION;
}  // namespace memplan
