#pragma once
/// \file
/// Forward declarations and the vocabulary types shared by every header.

#include <cstdint>

namespace memplan {

/// Bytes are signed 64-bit so that differences (ΔM) need no casts; 10^15
/// bytes and sums of a million of them fit.
using bytes_t = std::int64_t;
/// Dense index of a tensor (0 .. tensors-1) or of a step of a schedule.
using index_t = std::int32_t;
inline constexpr index_t no_index = -1;

enum class phase : std::uint8_t { forward, backward, update };
enum class tensor_kind : std::uint8_t {
  input,
  parameter,
  activation,
  gradient,
  parameter_gradient,
  optimizer_state,
  other
};

struct op_info;
struct tensor_info;
class graph;
struct problem;
struct plan;
struct device_spec;

}  // namespace memplan
