#pragma once
/// \file
/// Forward declarations and the vocabulary types shared by every header.

#include <cstdint>

/// memplan: GPU memory planning for DNN training. A training graph compiled
/// against a schedule is a `problem`; planners answer it with a `plan` of
/// swaps, recomputations and splits; the simulator and the validator judge
/// plans, and the executor (memplan::runtime) runs them.
namespace memplan {

/// Bytes are signed 64-bit so that differences (ΔM) need no casts; 10^15
/// bytes and sums of a million of them fit.
using bytes_t = std::int64_t;
/// Dense index of a tensor (0 .. tensors-1) or of a step of a schedule.
using index_t = std::int32_t;
/// No tensor, op or step: a producer-less tensor's producer, an unset index.
inline constexpr index_t no_index = -1;

/// The part of a training iteration an op belongs to: the forward pass, the
/// backward pass (gradients), or the optimizer's update (reads gradients,
/// writes parameters and state in place). Only forward ops are recomputable
/// by default; graph/vocabulary.hpp spells the phases.
enum class phase : std::uint8_t { forward, backward, update };
/// What a tensor holds, which decides how long it lives (DESIGN.md §4) and
/// whether it may be dropped without a host copy.
enum class tensor_kind : std::uint8_t {
  input,               ///< a batch's input: images, labels, token ids
  parameter,           ///< a weight; persistent (live across iterations)
  activation,          ///< made by a forward op, read by later ops and the backward pass
  gradient,            ///< a backward op's output other than a parameter's final gradient
  parameter_gradient,  ///< a parameter's final gradient, read by the update
  optimizer_state,     ///< momentum, Adam's moments; persistent
  other                ///< anything else (the default of a `tensor_info`)
};

struct op_info;
struct tensor_info;
class graph;
struct problem;
struct plan;
struct device_spec;

}  // namespace memplan
