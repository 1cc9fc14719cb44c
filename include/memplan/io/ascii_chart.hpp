#pragma once
/// \file
/// A simulated run's device memory as text, for a terminal without a
/// browser (`memplan plan --ascii`): the highest level in each column of
/// the iteration as a bar of '#', the budget as a row of '-' ('#' where the
/// memory reaches it), and the axes' ends labelled.
///
///     7.88 GiB |
///              |          #
///       budget |----#########------
///              |   ##############
///              |#################
///            0 +-------------------
///               0 ms        412.35 ms

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "memplan/format_bytes.hpp"
#include "memplan/sim/memory_view.hpp"
#include "memplan/sim/report.hpp"

namespace memplan::io {

namespace detail::ascii_chart {
inline constexpr std::size_t label_width = 10;

/// The row (0 at the top) of `rows` whose band holds `bytes` of a chart up to `top` bytes.
[[nodiscard]] inline std::size_t row_of(double bytes, double top, std::size_t rows) {
  const double from_bottom = std::floor(bytes / top * static_cast<double>(rows));
  return rows - 1 - static_cast<std::size_t>(std::clamp(from_bottom, 0.0, static_cast<double>(rows - 1)));
}

[[nodiscard]] inline std::string label(const std::string& s) {
  return std::string(label_width > s.size() ? label_width - s.size() : 0, ' ') + s + " ";
}
}  // namespace detail::ascii_chart

/// Writes `r`'s memory curve (simulated with `record_memory`) as a chart of
/// `columns` x `rows` characters plus labels: a column is filled up to the
/// row that holds its highest level; the budget's row shows '-' elsewhere.
inline void write_ascii_memory(std::ostream& out, const report& r, std::size_t columns = 72, std::size_t rows = 16) {
  using namespace detail::ascii_chart;
  if (columns == 0 || rows == 0) return;
  const std::vector<bytes_t> peaks = memory_columns(r, columns);
  bytes_t highest = r.budget_bytes;
  for (const bytes_t b : peaks) highest = std::max(highest, b);
  // Headroom, so that the budget's row is not the top one, whose label is the scale.
  const double top = 1.15 * static_cast<double>(std::max<bytes_t>(highest, 1));
  const std::size_t budget_row = row_of(static_cast<double>(r.budget_bytes), top, rows);
  for (std::size_t row = 0; row < rows; ++row) {
    std::string cells(columns, row == budget_row ? '-' : ' ');
    for (std::size_t c = 0; c < columns; ++c) {
      if (peaks[c] > 0 && row_of(static_cast<double>(peaks[c]), top, rows) <= row) cells[c] = '#';
    }
    const std::string name = row == 0 ? format_bytes(static_cast<bytes_t>(top)) : row == budget_row ? "budget" : "";
    out << label(name) << '|' << cells << "\n";
  }
  std::ostringstream end;
  end << std::fixed << std::setprecision(2) << r.time_us / 1e3 << " ms";
  out << label("0") << '+' << std::string(columns, '-') << "\n"
      << std::string(label_width + 2, ' ') << "0 ms"
      << std::string(columns > 4 + end.str().size() ? columns - 4 - end.str().size() : 1, ' ') << end.str() << "\n"
      << std::string(label_width + 2, ' ') << "device memory over one iteration; budget "
      << format_bytes(r.budget_bytes) << "\n";
}

}  // namespace memplan::io
