#pragma once
/// \file
/// The error hierarchy and the MEMPLAN_EXPECTS macro (after rmm's detail/error.hpp).

#include <charconv>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include "memplan/failure.hpp"

namespace memplan {

/// Base of every exception memplan throws.
struct error : std::runtime_error {
  using std::runtime_error::runtime_error;

  /// \returns the verdict on a plan this error carries: `out_of_memory`
  ///          (infeasible_budget), `invalid_plan` (invalid_plan); `none` for
  ///          the errors that judge no plan (malformed input, CUDA failures).
  [[nodiscard]] failure_kind kind() const noexcept { return kind_; }

 protected:
  /// An error with `message` (the `what()`) and the verdict `kind`, for the
  /// subclasses that judge a plan.
  error(const std::string& message, failure_kind kind) : std::runtime_error(message), kind_(kind) {}

 private:
  failure_kind kind_ = failure_kind::none;
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

/// A plan breaks plan.hpp's rules (`kind()` is `failure_kind::invalid_plan`):
/// thrown where a caller demands a plan that runs (the executor); the
/// simulator and the validator report it instead.
struct invalid_plan : invalid_argument {
  /// An invalid plan's error: `message` says which rule the plan breaks.
  explicit invalid_plan(const std::string& message) : invalid_argument(message, failure_kind::invalid_plan) {}
};

/// A budget cannot be met at all (thrown only where a caller demands a
/// feasible plan; planners report infeasibility in the plan instead).
/// `kind()` says why: `out_of_memory` unless the thrower says otherwise.
struct infeasible_budget : error {
  /// `message` says which budget and why; `kind` is the verdict.
  explicit infeasible_budget(const std::string& message, failure_kind kind = failure_kind::out_of_memory)
      : error(message, kind) {}
};

/// A CUDA runtime call failed.
struct cuda_error : error {
  using error::error;
};

namespace detail {

/// Appends text or a character to a message.
inline void append_part(std::string& out, std::string_view text) { out += text; }
inline void append_part(std::string& out, char c) { out += c; }
/// Appends a number as `std::ostream` writes it by default: integers in
/// decimal, floating point as `%g` with 6 significant digits, bool as 0 or
/// 1, the character types as characters, an enum as its number.
template <class T>
  requires std::is_arithmetic_v<T> || std::is_enum_v<T>
void append_part(std::string& out, T value) {
  if constexpr (std::is_enum_v<T>) {
    append_part(out, static_cast<std::underlying_type_t<T>>(value));
  } else if constexpr (std::is_same_v<T, bool>) {
    out += value ? '1' : '0';
  } else if constexpr (sizeof(T) == 1 && std::is_integral_v<T>) {
    out += static_cast<char>(value);
  } else {
    char text[64];
    std::to_chars_result r;
    if constexpr (std::is_floating_point_v<T>) {
      r = std::to_chars(text, text + sizeof text, value, std::chars_format::general, 6);
    } else {
      r = std::to_chars(text, text + sizeof text, value);
    }
    out.append(text, r.ptr);
  }
}

/// Concatenates text and numbers into one message (as `std::ostream` would write them).
template <class... Parts>
[[nodiscard]] std::string concat(const Parts&... parts) {
  std::string out;
  (append_part(out, parts), ...);
  return out;
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
