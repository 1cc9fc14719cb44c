#pragma once
/// \file
/// Memory sizes as the command line spells them (DESIGN.md §8, SIZE) and as
/// tables print them.
///
/// SIZE := DIGITS [UNIT] | DIGITS['.'DIGITS] SCALED_UNIT | DIGITS['.'DIGITS] '%'
/// UNIT := 'B' | SCALED_UNIT;  SCALED_UNIT := KiB MiB GiB TiB (1024-based) | kB KB MB GB TB (1000-based)

#include <array>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <system_error>

#include "memplan/error.hpp"
#include "memplan/format_bytes.hpp"
#include "memplan/fwd.hpp"

namespace memplan::io {

/// A parsed SIZE: a byte count, or a percent of the baseline peak.
struct size_spec {
  bytes_t bytes = 0;        ///< the size, when `!is_percent`
  double percent = 0;       ///< percent of the baseline peak (> 0), when `is_percent`
  bool is_percent = false;  ///< which of the two it is
  /// Memberwise: the same `bytes`, `percent` and `is_percent`.
  friend bool operator==(const size_spec&, const size_spec&) = default;
};

namespace detail {

using memplan::detail::concat;

struct size_unit {
  std::string_view name;
  bytes_t factor;
};
inline constexpr std::array<size_unit, 11> size_units{{{"", 1},
                                                       {"B", 1},
                                                       {"KiB", bytes_t{1} << 10},
                                                       {"MiB", bytes_t{1} << 20},
                                                       {"GiB", bytes_t{1} << 30},
                                                       {"TiB", bytes_t{1} << 40},
                                                       {"kB", 1'000},
                                                       {"KB", 1'000},
                                                       {"MB", 1'000'000},
                                                       {"GB", 1'000'000'000},
                                                       {"TB", 1'000'000'000'000}}};

/// The error for a SIZE that cannot be parsed: quotes it, says why and lists
/// the accepted forms.
[[nodiscard]] inline invalid_argument bad_size(std::string_view text, std::string_view why) {
  return invalid_argument(concat(
      "invalid size '", text, "': ", why,
      "; accepted forms: a byte count (1073741824 or 512B), a number with a binary unit KiB/MiB/GiB/TiB "
      "(1024-based, e.g. 1.5GiB) or a decimal unit kB/KB/MB/GB/TB (1000-based, e.g. 11GB), or a percent of the "
      "baseline peak (60%), at most 2^63 - 1 bytes"));
}

[[nodiscard]] constexpr bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

}  // namespace detail

/// Parses a SIZE: `1073741824`, `512B`, `1.5GiB` (binary units, 1024-based),
/// `11GB` (decimal units, 1000-based), `60%` (of the baseline peak; above 100
/// allowed). A fractional size in a unit is rounded to the nearest byte.
/// \param text the size, without spaces.
/// \returns the byte count, or the percent.
/// \throws invalid_argument quoting `text` and the accepted forms if it is
///         empty, negative, lacks digits, has an unknown unit, a fraction of a
///         byte, a percent of 0, or exceeds 2^63 - 1 bytes.
[[nodiscard]] inline size_spec parse_size(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size() && detail::is_digit(text[i])) ++i;
  const std::string_view whole = text.substr(0, i);
  if (whole.empty()) throw detail::bad_size(text, "it must start with a digit");
  std::string_view fraction;
  if (i < text.size() && text[i] == '.') {
    const std::size_t first = ++i;
    while (i < text.size() && detail::is_digit(text[i])) ++i;
    fraction = text.substr(first, i - first);
    if (fraction.empty()) throw detail::bad_size(text, "a '.' must be followed by digits");
  }
  const std::string_view number = text.substr(0, i);
  const std::string_view unit = text.substr(i);

  if (unit == "%") {
    size_spec spec{0, 0, true};
    const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), spec.percent);
    if (ec != std::errc{} || end != number.data() + number.size() || !std::isfinite(spec.percent)) {
      throw detail::bad_size(text, "the percent is out of range");
    }
    if (spec.percent <= 0) throw detail::bad_size(text, "a percent must be above 0");
    return spec;
  }

  bytes_t factor = 0;
  for (const auto& u : detail::size_units) {
    if (u.name == unit) factor = u.factor;
  }
  if (factor == 0) throw detail::bad_size(text, detail::concat("unknown unit '", unit, "'"));
  if (!fraction.empty() && factor == 1) throw detail::bad_size(text, "a byte count must be a whole number");

  bytes_t bytes = 0;
  const auto [end, ec] = std::from_chars(whole.data(), whole.data() + whole.size(), bytes);
  if (ec != std::errc{} || __builtin_mul_overflow(bytes, factor, &bytes)) {
    throw detail::bad_size(text, "it exceeds 2^63 - 1 bytes");
  }
  // The fraction's first 18 digits, exact to far below a byte for factors up to 2^40.
  double part = 0;
  double scale = 0.1;
  for (std::size_t d = 0; d < fraction.size() && d < 18; ++d, scale /= 10) part += (fraction[d] - '0') * scale;
  if (__builtin_add_overflow(bytes, std::llround(part * static_cast<double>(factor)), &bytes)) {
    throw detail::bad_size(text, "it exceeds 2^63 - 1 bytes");
  }
  return {bytes, 0, false};
}

/// The byte count `spec` stands for: its bytes, or its percent of
/// `baseline_peak` rounded down to a whole byte.
/// \throws invalid_argument if a percent of the baseline exceeds 2^63 - 1 bytes.
[[nodiscard]] inline bytes_t resolve(const size_spec& spec, bytes_t baseline_peak) {
  if (!spec.is_percent) return spec.bytes;
  const double bytes = std::floor(spec.percent * static_cast<double>(baseline_peak) / 100.0);
  MEMPLAN_EXPECTS(bytes < 0x1p63, invalid_argument, "size ", spec.percent, "% of the baseline peak (", baseline_peak,
                  " bytes) exceeds 2^63 - 1 bytes");
  return static_cast<bytes_t>(bytes);
}

}  // namespace memplan::io
