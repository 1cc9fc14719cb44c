#pragma once
// The main of a test program that needs what a machine may lack (the DTR-log
// corpus, a CUDA device). Without it the program says what is missing on
// stderr and exits with `skip_code`, which CTest reports as skipped
// (SKIP_RETURN_CODE in tests/CMakeLists.txt); with it, doctest runs the
// program's cases. The program's own file defines DOCTEST_CONFIG_IMPLEMENT.

#include <doctest/doctest.h>

#include <iostream>
#include <string>

namespace memplan::test {

/// The exit status CTest reads as "skipped" (automake's convention).
inline constexpr int skip_code = 77;

/// Runs the program's test cases, or, when `missing` names something, says
/// "skipped: <missing>" on stderr and returns `skip_code`.
inline int main_or_skip(int argc, char** argv, const std::string& missing) {
  if (!missing.empty()) {
    std::cerr << "skipped: " << missing << "\n";
    return skip_code;
  }
  doctest::Context context(argc, argv);
  return context.run();
}

}  // namespace memplan::test
