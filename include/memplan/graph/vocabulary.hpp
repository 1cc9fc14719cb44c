#pragma once
/// \file
/// Names of phases and tensor kinds as the JSON format and the CLI spell them.

#include <array>
#include <optional>
#include <string_view>
#include <utility>

#include "memplan/fwd.hpp"

namespace memplan {

/// Phases by their value, as files and the CLI spell them.
inline constexpr std::array<std::string_view, 3> phase_names{"forward", "backward", "update"};
/// Tensor kinds by their value, as files and the CLI spell them.
inline constexpr std::array<std::string_view, 7> tensor_kind_names{
    "input", "parameter", "activation", "gradient", "parameter_gradient", "optimizer_state", "other"};

/// `p` as files spell it (`phase_names`).
[[nodiscard]] constexpr std::string_view to_string(phase p) noexcept {
  return phase_names[static_cast<std::size_t>(p)];
}
/// `k` as files spell it (`tensor_kind_names`).
[[nodiscard]] constexpr std::string_view to_string(tensor_kind k) noexcept {
  return tensor_kind_names[static_cast<std::size_t>(k)];
}

/// The phase spelled `name`, or nothing.
[[nodiscard]] constexpr std::optional<phase> parse_phase(std::string_view name) noexcept {
  for (std::size_t i = 0; i < phase_names.size(); ++i) {
    if (phase_names[i] == name) return static_cast<phase>(i);
  }
  return std::nullopt;
}

/// The tensor kind spelled `name`, or nothing.
[[nodiscard]] constexpr std::optional<tensor_kind> parse_tensor_kind(std::string_view name) noexcept {
  for (std::size_t i = 0; i < tensor_kind_names.size(); ++i) {
    if (tensor_kind_names[i] == name) return static_cast<tensor_kind>(i);
  }
  return std::nullopt;
}

/// Bytes per element of a dtype as frameworks spell it ("float32", "fp16",
/// "int64", ...), or nothing for an unknown name.
[[nodiscard]] constexpr std::optional<int> dtype_bytes(std::string_view dtype) noexcept {
  constexpr std::pair<std::string_view, int> sizes[] = {
      {"float64", 8}, {"float32", 4}, {"fp32", 4},  {"float16", 2}, {"fp16", 2}, {"bfloat16", 2},
      {"bf16", 2},    {"int64", 8},   {"int32", 4}, {"int16", 2},   {"int8", 1}, {"uint8", 1},
      {"bool", 1}};
  for (const auto& [name, bytes] : sizes) {
    if (name == dtype) return bytes;
  }
  return std::nullopt;
}

/// Parameters and optimizer state persist across iterations: live to the end
/// and never freed (DESIGN.md §4).
[[nodiscard]] constexpr bool is_persistent(tensor_kind k) noexcept {
  return k == tensor_kind::parameter || k == tensor_kind::optimizer_state;
}

/// Op types that communicate with other ranks: collectives and point-to-point
/// transfers. Their ops run on the communication stream (DESIGN.md §5).
inline constexpr std::array<std::string_view, 6> communication_types{"all_reduce", "all_gather", "reduce_scatter",
                                                                     "broadcast",  "send",       "recv"};
/// An op of type `type` communicates with other ranks (`communication_types`).
[[nodiscard]] constexpr bool is_communication(std::string_view type) noexcept {
  for (const std::string_view c : communication_types) {
    if (c == type) return true;
  }
  return false;
}

/// DESIGN.md §4 default: forward ops may be recomputed, others not.
[[nodiscard]] constexpr bool default_recomputable(phase p) noexcept { return p == phase::forward; }

}  // namespace memplan
