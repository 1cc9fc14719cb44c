#pragma once
/// \file
/// The executor's data-integrity check for any problem (DESIGN.md §7): the
/// plan runs on a host::device whose arena holds the budget, with ops that
/// compute a digest instead of numbers. A tensor's digest is a hash of the
/// op, the output's position and the digests of the op's inputs (of the
/// tensor's index for tensors without a producer); an op fills each output
/// with its digest, repeated, after checking that every byte of every input
/// holds the input's digest. A tensor swapped, recomputed, moved by
/// compaction or overwritten by another buffer in the arena shows up as a
/// mismatch, as it would as wrong numbers in training. A micro-op checks and
/// fills the bytes of its regions (its micro-tensors), byte i of a tensor
/// always holding byte i % 8 of the digest, wherever its pieces lie.

#include <algorithm>
#include <exception>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "memplan/cost/device.hpp"
#include "memplan/error.hpp"
#include "memplan/host/device.hpp"
#include "memplan/plan.hpp"
#include "memplan/problem.hpp"
#include "memplan/runtime/arena.hpp"
#include "memplan/runtime/executor.hpp"
#include "memplan/runtime/layout.hpp"

namespace memplan::testing {

namespace detail {

[[nodiscard]] constexpr std::uint64_t mix(std::uint64_t h, std::uint64_t v) noexcept {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdULL;
}

/// Fills the bytes of `r`: tensor byte i gets byte i % 8 of `digest`.
inline void fill(const runtime::region& r, std::uint64_t digest) {
  bytes_t i = r.offset;
  for (const runtime::piece& piece : r.pieces) {
    auto* out = static_cast<std::byte*>(piece.address);
    for (bytes_t j = 0; j < piece.bytes; ++j, ++i) out[j] = static_cast<std::byte>(digest >> (8 * (i % 8)));
  }
}

[[nodiscard]] inline bool holds(const runtime::region& r, std::uint64_t digest) {
  bytes_t i = r.offset;
  for (const runtime::piece& piece : r.pieces) {
    const auto* in = static_cast<const std::byte*>(piece.address);
    for (bytes_t j = 0; j < piece.bytes; ++j, ++i) {
      if (in[j] != static_cast<std::byte>(digest >> (8 * (i % 8)))) return false;
    }
  }
  return i == r.offset + r.bytes;
}

}  // namespace detail

/// The outcome of `check_integrity`.
struct integrity_check {
  bool ran = false;     ///< false: the executor refused the action list as malformed
  std::string failure;  ///< "" when every op read what the unplanned run reads, else "executor: ..."
};

/// Runs `pl` on a host::device with an arena of `budget` bytes (plus one
/// alignment unit per buffer, which the arena's rounding may take, and 64
/// bytes per micro-op or micro-tensor action) and
/// checks every input of every op against its reference digest.
/// `timing`: the device the plan was made for, to issue in the simulator's
/// start order (runtime::executor's constructor); null: list order.
[[nodiscard]] inline integrity_check check_integrity(const problem& p, const plan& pl, bytes_t budget,
                                                     const device_spec* timing = nullptr) {
  using memplan::detail::concat;
  // Reference digests, in schedule order with no planning.
  std::vector<std::uint64_t> digest(p.num_tensors());
  for (std::size_t t = 0; t < p.num_tensors(); ++t) digest[t] = detail::mix(0x6d656d706c616eULL, t);
  for (std::size_t s = 0; s < p.num_steps(); ++s) {
    std::uint64_t h = detail::mix(0x6f70ULL, s);
    for (const index_t t : p.inputs(static_cast<index_t>(s))) h = detail::mix(h, digest[static_cast<std::size_t>(t)]);
    std::uint64_t k = 0;
    for (const index_t t : p.outputs(static_cast<index_t>(s))) digest[static_cast<std::size_t>(t)] = detail::mix(h, ++k);
  }
  bytes_t pinned = 0;
  try {
    pinned = runtime::pinned_bytes(p, pl, timing);
  } catch (const invalid_argument&) {
    return {false, ""};  // a list the simulator may accept but the executor refuses; none is known
  }
  // Micro-tensors made on their own round to 64 bytes instead.
  bytes_t micro = 0;
  for (const action& a : pl.actions) micro += a.part != no_index ? 1 : 0;
  const bytes_t slack = runtime::arena::alignment * static_cast<bytes_t>(p.num_tensors() + p.num_steps() + 1) +
                        runtime::micro_alignment * micro;
  host::device dev({.arena_bytes = budget + slack, .pinned_bytes = pinned, .before_copy = {}});
  std::atomic<long> bad{0};
  std::atomic<index_t> first_bad{no_index};
  try {
    std::optional<runtime::executor<host::device>> made;
    if (timing != nullptr) {
      made.emplace(dev, p, pl, *timing);
    } else {
      made.emplace(dev, p, pl);
    }
    runtime::executor<host::device>& ex = *made;
    const auto run_op = [&](const runtime::op_call& call, host::stream_view) {
      const auto ins = p.inputs(call.step);
      for (std::size_t i = 0; i < ins.size(); ++i) {
        const auto t = static_cast<std::size_t>(ins[i]);
        if (!detail::holds(call.input_regions[i], digest[t])) {
          ++bad;
          index_t none = no_index;
          first_bad.compare_exchange_strong(none, call.action);
        }
      }
      const auto outs = p.outputs(call.step);
      for (std::size_t i = 0; i < outs.size(); ++i) {
        const auto t = static_cast<std::size_t>(outs[i]);
        if (call.outputs[i] != nullptr) detail::fill(call.output_regions[i], digest[t]);
      }
      if (call.workspace != nullptr) std::memset(call.workspace, 0xa5, static_cast<std::size_t>(call.workspace_bytes));
    };
    const auto load = [&](index_t t, void* to, host::stream_view) {
      const runtime::piece all{to, p.bytes[static_cast<std::size_t>(t)]};
      detail::fill({0, all.bytes, {&all, 1}}, digest[static_cast<std::size_t>(t)]);
    };
    const runtime::run_stats stats = ex.run(run_op, load);
    if (stats.peak_bytes > budget) return {true, concat("executor: peak ", stats.peak_bytes, " B > budget ", budget, " B")};
  } catch (const std::exception& e) {
    return {true, concat("executor: ", e.what())};
  }
  if (bad != 0) {
    return {true, concat("executor: ", bad.load(), " inputs did not hold their values, first at action ", first_bad.load())};
  }
  return {true, ""};
}

}  // namespace memplan::testing
