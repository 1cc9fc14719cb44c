#pragma once
/// \file
/// The error hierarchy and the MEMPLAN_EXPECTS macro (after rmm's detail/error.hpp).

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace memplan {

/// Base of every exception memplan throws.
struct error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A graph, plan or other document is malformed; the message names the field
/// and the op or tensor.
struct invalid_graph : error {
  using error::error;
};

/// A command-line value or option is malformed (a size, a planner name, ...).
struct invalid_argument : error {
  using error::error;
};

/// A budget cannot be met at all (thrown only where a caller demands a
/// feasible plan; planners report infeasibility in the plan instead).
struct infeasible_budget : error {
  using error::error;
};

/// A CUDA runtime call failed.
struct cuda_error : error {
  using error::error;
};

namespace detail {

/// Concatenates streamable values into one message.
template <class... Parts>
[[nodiscard]] std::string concat(Parts&&... parts) {
  std::ostringstream out;
  (out << ... << std::forward<Parts>(parts));
  return out.str();
}

}  // namespace detail
}  // namespace memplan

/// Throws `error_type` with a message made of the remaining arguments unless
/// `cond` holds: `MEMPLAN_EXPECTS(b >= 0, invalid_graph, "tensor '", n, "': negative bytes")`.
#define MEMPLAN_EXPECTS(cond, error_type, ...)                    \
  do {                                                            \
    if (!(cond)) {                                                \
      throw ::memplan::error_type(::memplan::detail::concat(__VA_ARGS__)); \
    }                                                             \
  } while (false)
