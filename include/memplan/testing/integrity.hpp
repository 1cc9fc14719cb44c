#pragma once
/// \file
/// The executor's data-integrity check for any problem (DESIGN.md §7): the
/// plan runs on a host::device whose arena is the budget, with ops that
/// compute a digest instead of numbers. A tensor's digest is a hash of the
/// op, the output's position and the digests of the op's inputs (of the
/// tensor's index for tensors without a producer); an op fills each output
/// with its digest, repeated, after checking that every byte of every input
/// holds the input's digest. A tensor swapped or recomputed wrongly, or
/// overwritten by another buffer placed over it too early, shows up as a
/// mismatch, as it would as wrong numbers in training. A micro-op checks and
/// fills the bytes of its regions (its micro-tensors), byte i of a tensor
/// always holding byte i % 8 of the digest, wherever its pieces lie.

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <exception>
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

/// 64 bytes of tensor bytes from one whose index is `phase` modulo 8: byte
/// i holds byte i % 8 of `digest`.
struct pattern {
  std::array<std::byte, 64> bytes;
  pattern(std::uint64_t digest, bytes_t phase) {
    for (std::size_t k = 0; k < bytes.size(); ++k) {
      bytes[k] = static_cast<std::byte>(digest >> (8 * ((static_cast<std::size_t>(phase) + k) % 8)));
    }
  }
};

/// Fills the bytes of `r`: tensor byte i gets byte i % 8 of `digest`.
inline void fill(const runtime::region& r, std::uint64_t digest) {
  bytes_t i = r.offset;
  for (const runtime::piece& piece : r.pieces) {
    const pattern pat(digest, i);
    auto* out = static_cast<std::byte*>(piece.address);
    for (bytes_t j = 0; j < piece.bytes; j += 64) {
      std::memcpy(out + j, pat.bytes.data(), static_cast<std::size_t>(std::min<bytes_t>(64, piece.bytes - j)));
    }
    i += piece.bytes;
  }
}

[[nodiscard]] inline bool holds(const runtime::region& r, std::uint64_t digest) {
  bytes_t i = r.offset;
  for (const runtime::piece& piece : r.pieces) {
    const pattern pat(digest, i);
    const auto* in = static_cast<const std::byte*>(piece.address);
    for (bytes_t j = 0; j < piece.bytes; j += 64) {
      const auto n = static_cast<std::size_t>(std::min<bytes_t>(64, piece.bytes - j));
      if (std::memcmp(in + j, pat.bytes.data(), n) != 0) return false;
    }
    i += piece.bytes;
  }
  return i == r.offset + r.bytes;
}

}  // namespace detail

/// The outcome of `check_integrity`.
struct integrity_check {
  bool ran = false;     ///< false: the executor refused the action list as malformed
  std::string failure;  ///< "" when every op read what the unplanned run reads, else "executor: ..."
  /// The verdict a failure carries: the executor's (out_of_memory: the
  /// layout does not fit the arena; invalid_plan: a layout that does not
  /// fit the issue order), invalid_plan where an op read the wrong bytes;
  /// none when it ran right (or an op or copy failed).
  failure_kind kind = failure_kind::none;
  runtime::run_stats stats;  ///< the run's figures (when it ran to the end)
  bytes_t pinned_bytes = 0;  ///< the pinned pool it ran with (runtime::pinned_bytes)
  double run_seconds = 0;    ///< wall time of the run itself
};

/// Runs `pl` on a host::device with an arena of exactly `budget` bytes and
/// the pinned memory `runtime::pinned_bytes` says, and checks every input
/// of every op against its reference digest. A plan without a memory
/// layout runs at the executor's own (runtime::placement_of).
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
    return integrity_check{};  // not run: a list the simulator may accept but the executor refuses; none is known
  }
  host::device dev({.arena_bytes = budget, .pinned_bytes = pinned, .before_copy = {}});
  integrity_check out;
  out.ran = true;
  out.pinned_bytes = pinned;
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
    const auto start = std::chrono::steady_clock::now();
    out.stats = ex.run(run_op, load);
    out.run_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  } catch (const std::exception& e) {
    const std::string what = e.what();
    out.failure = what.starts_with("executor: ") ? what : "executor: " + what;
    if (const auto* judged = dynamic_cast<const error*>(&e)) out.kind = judged->kind();
    return out;
  }
  if (bad != 0) {
    out.failure = concat("executor: ", bad.load(), " inputs did not hold their values, first at action ", first_bad.load());
    out.kind = failure_kind::invalid_plan;
  }
  return out;
}

}  // namespace memplan::testing
