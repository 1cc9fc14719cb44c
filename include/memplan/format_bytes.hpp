#pragma once
/// \file
/// `format_bytes`: sizes as tables and messages print them.

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "memplan/error.hpp"
#include "memplan/fwd.hpp"

namespace memplan {

/// A size for people: "512 B" below 1 KiB, else two decimals in the largest
/// binary unit that keeps the number at least 1 ("1.50 GiB", "800.00 MiB").
[[nodiscard]] inline std::string format_bytes(bytes_t bytes) {
  static constexpr std::array<const char*, 6> units{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  const char* sign = bytes < 0 ? "-" : "";
  // Magnitude in unsigned arithmetic, so that INT64_MIN has one too.
  const std::uint64_t magnitude =
      bytes < 0 ? std::uint64_t{0} - static_cast<std::uint64_t>(bytes) : static_cast<std::uint64_t>(bytes);
  if (magnitude < 1024) return detail::concat(sign, magnitude, " B");
  double value = static_cast<double>(magnitude) / 1024;
  std::size_t unit = 0;
  // Move up when two decimals would print 1024.00.
  while (value >= 1023.995 && unit + 1 < units.size()) {
    value /= 1024;
    ++unit;
  }
  std::array<char, 32> text{};
  std::snprintf(text.data(), text.size(), "%s%.2f %s", sign, value, units[unit]);
  return text.data();
}

}  // namespace memplan
