#pragma once
/// \file
/// `memplan::plan`: what a planner decides — a decision per tensor and the
/// action list the simulator judges and the executor runs.
///
/// Semantics of the action list (the contract between planners, the
/// simulator, the validator and the executor):
/// - Actions are listed in issue order. Each runs on the stream its kind
///   names (`stream_of`; the compute of an op that communicates with other
///   ranks runs on the communication stream) after the previous action of
///   that stream has ended and after every action in its wait list (always
///   earlier in the list) has ended. Nothing else orders actions on
///   different streams.
/// - `compute(s)` runs the op of step s; `recompute(s)` runs it again to
///   bring back those of its outputs that are not on the device, for an op
///   marked recomputable that is not an update (an update writes its state
///   in place: running it twice applies it twice). Both read
///   the op's inputs, which must be on the device (made by an earlier action
///   that has ended). They allocate the outputs they make and the op's
///   workspace when they start and free the workspace when they end.
/// - `swap_out(t)` copies t to the host (d2h) and then releases t's device
///   copy; `swap_in(t)` allocates t when it starts and copies it back (h2d);
///   it must come after a swap_out of t has ended.
/// - `free(t)` releases t's device copy without saving it (it will be
///   recomputed or is dead). A parameter or optimizer state is freed only
///   where a host copy holds its latest update (a swap_out issued after the
///   last update-phase compute that reads it, or offloaded state's host
///   copy before any update), or where this iteration made it with an op
///   that may be recomputed (not an update), which can make it again: it
///   is never lost.
/// - A release (by swap_out or free) takes effect once every earlier-issued
///   action that reads or writes that copy has ended; a tensor whose last
///   reader in the whole list has ended is released automatically, unless
///   it is persistent (parameter, optimizer state).
/// - Tensors without a producer are on the device at time 0, except the
///   plan's `offloaded_state`: parameters and optimizer state (without a
///   producer) that live in
///   host memory between iterations (as in ZeRO-Offload, or TSPLIT Table V's
///   parameter scale). Each starts in host memory, its host copy there from
///   the start, so a `swap_in` without an earlier swap_out brings it in; and
///   it must end the iteration there: not on the device at the end, its
///   latest swap_out waiting on the last update-phase compute that reads it
///   (an update writes the state it reads, in place). Every other parameter
///   and optimizer state ends the iteration on the device, whole.
/// - Only stream order and waits order actions: an action that reads a copy
///   (or saves it, or splits it in place) must come after the action that
///   made it or last wrote it (an update writes in place) through a chain of
///   waits and stream order, and a swap_in after its swap_out — not merely
///   start later in the simulated timing.
/// - If an allocation does not fit the budget, the action waits for frees
///   of actions in flight; if none can come, the plan is out of memory.
///
/// Split ops and micro-tensors (TSPLIT §V-A, Fig. 10). `parts` > 1 cuts an
/// op into micro-ops along the outermost (batch) dimension, for an op with
/// dimension 0 among its `split_dims`, into at most `max_split_parts` parts
/// (the batch's samples where the problem knows the batch):
/// - `compute(s, parts)` with `part` = no_index runs all micro-ops back to
///   back as one action: it takes `split_time_us` and needs one part's
///   workspace, ceil(workspace / parts); its tensors stay whole.
/// - `compute(s, parts, k)` runs micro-op k only (0 <= k < parts), for
///   split_time_us / parts with ceil(workspace / parts) of workspace. A step
///   is computed either whole, once, or by micro-ops 0, 1, ..., parts-1 in
///   that order; `recompute(s, parts, k)` redoes a micro-op of a computed step.
/// - The *sample tensors* of a micro-op — its inputs and outputs of kind
///   input, activation or gradient (`splits_with_batch`) — are split:
///   micro-op k reads and makes micro-tensor k of each, of
///   `micro_bytes(bytes, parts, k)` bytes (the parts add up to the tensor).
///   Its other tensors are whole: parameters are read whole, and a whole
///   output (a parameter gradient: the micro-ops' sum) is made by micro-op 0
///   and written by the later ones.
/// - A tensor is on the device whole, or as micro-tensors of one `parts`
///   count. Micro-tensors of one tensor are contiguous, so views are free
///   (zero-copy): micro-tensor k can be read from the whole tensor, and an
///   op reads a tensor whole when all its micro-tensors are on the device
///   (the merge of Fig. 10). Reading micro-tensor k of `parts` needs the
///   whole tensor, micro-tensor k of that same `parts`, or all the
///   micro-tensors of another `parts` count (merged and split again in place).
/// - `swap_out(t, parts, k)` and `free(t, parts, k)` release micro-tensor k
///   alone; `swap_in(t, parts, k)` brings it back from a host copy of that
///   micro-tensor or of the whole tensor. Releasing a micro-tensor of a
///   whole tensor splits it in place: every earlier-issued action holding
///   the whole tensor must have ended before the release starts (by stream
///   order or waits), then the tensor is `parts` micro-tensors and only the
///   released one goes. A whole release or swap-in of a tensor held as
///   micro-tensors is invalid; a whole recompute leaves an output that is
///   on the device whole or as all its micro-tensors, makes it if none of
///   them is there, and is invalid if only some are.

#include <algorithm>
#include <array>
#include <cstdint>
#include <string_view>
#include <utility>
#include <span>
#include <string>
#include <vector>

#include "memplan/error.hpp"
#include "memplan/failure.hpp"
#include "memplan/fwd.hpp"
#include "memplan/problem.hpp"

namespace memplan {

/// What an action does: `compute` runs a step's op (or a micro-op) the first
/// time, `recompute` runs it again to bring back outputs that are not on the
/// device, `swap_out` copies a tensor to the host and then releases its
/// device copy, `swap_in` allocates it and copies it back, `free` releases
/// the device copy without saving it. The file comment gives the rules.
enum class action_kind : std::uint8_t { compute, recompute, swap_out, swap_in, free };
/// The four streams actions run on, each in issue order: `compute` (compute,
/// recompute, free), `d2h` (swap_out), `h2d` (swap_in) and `comm` (the
/// compute and recompute of an op that communicates with other ranks:
/// problem::communicates, DESIGN.md §7a).
enum class stream_kind : std::uint8_t { compute, d2h, h2d, comm };
/// How many `stream_kind`s there are (arrays indexed by stream).
inline constexpr int stream_count = 4;
/// Streams as traces and messages spell them.
inline constexpr std::array<std::string_view, stream_count> stream_names{"compute", "d2h", "h2d", "comm"};
/// Per stream, no action: the initial value of arrays indexed by stream.
inline constexpr std::array<index_t, stream_count> no_stream_actions{no_index, no_index, no_index, no_index};

/// The stream an action of kind `k` runs on when its op (if any) does not
/// communicate: copies on their own direction's stream, everything else on
/// the compute stream.
[[nodiscard]] constexpr stream_kind stream_of(action_kind k) noexcept {
  switch (k) {
    case action_kind::swap_out: return stream_kind::d2h;
    case action_kind::swap_in: return stream_kind::h2d;
    default: return stream_kind::compute;
  }
}

/// Action kinds as files, messages and traces spell them.
inline constexpr std::array<std::string_view, 5> action_kind_names{"compute", "recompute", "swap_out", "swap_in",
                                                                   "free"};
/// `k` as files spell it (`action_kind_names`).
[[nodiscard]] constexpr std::string_view to_string(action_kind k) noexcept {
  return action_kind_names[static_cast<std::size_t>(k)];
}

/// What a planner decided for a tensor, for reports; the actions are the truth.
/// `keep` it on the device, `swap` it out to the host and back, `recompute`
/// it after freeing it, or `split` it into micro-tensors with its op.
enum class decision : std::uint8_t { keep, swap, recompute, split };
/// Decisions as files and reports spell them.
inline constexpr std::array<std::string_view, 4> decision_names{"keep", "swap", "recompute", "split"};
/// `d` as files spell it (`decision_names`).
[[nodiscard]] constexpr std::string_view to_string(decision d) noexcept {
  return decision_names[static_cast<std::size_t>(d)];
}

/// One entry of a plan's action list: what runs, on which step or tensor,
/// and on which part of a split one.
struct action {
  action_kind kind = action_kind::compute;  ///< what it does, and so (with its op) its stream (`stream_of`)
  index_t step = no_index;    ///< compute / recompute: the step whose op runs
  index_t tensor = no_index;  ///< swap_out / swap_in / free: the tensor
  index_t parts = 1;          ///< micro-batches the op (or the tensor) is split into (1 = whole)
  index_t part = no_index;    ///< with parts > 1: the micro-op or micro-tensor; no_index: all of them
};
/// The streams a plan for `p` may use: the first three, and the
/// communication stream where an op communicates (traces and pictures show these).
[[nodiscard]] inline std::size_t streams_used(const problem& p) noexcept { return p.comm.empty() ? 3 : stream_count; }
/// The stream action `a` of a plan for `p` runs on: an op that communicates
/// runs on the communication stream, everything else as `stream_of(kind)`.
[[nodiscard]] inline stream_kind stream_of(const problem& p, const action& a) noexcept {
  const bool runs_op = a.kind == action_kind::compute || a.kind == action_kind::recompute;
  return runs_op && p.communicates(a.step) ? stream_kind::comm : stream_of(a.kind);
}

/// Tensors split with the batch dimension when their op is (plan.hpp's
/// comment): those that carry samples.
[[nodiscard]] constexpr bool splits_with_batch(tensor_kind k) noexcept {
  return k == tensor_kind::input || k == tensor_kind::activation || k == tensor_kind::gradient;
}
/// Bytes of micro-tensor k of a tensor of `bytes` cut into `parts`.
[[nodiscard]] constexpr bytes_t micro_bytes(bytes_t bytes, index_t parts, index_t k) noexcept {
  return bytes * (k + 1) / parts - bytes * k / parts;
}

/// The most parts step `s`'s op may be split into: 1 unless the batch
/// (dimension 0) is among its split dimensions; else the batch's samples
/// where `p` knows the batch; else the bytes of the op's largest sample
/// tensor (a micro-batch holds a sample at least, and a sample a byte), and
/// at least 1. The one rule the plan reader, the simulator and the validator
/// apply.
[[nodiscard]] inline std::int64_t max_split_parts(const problem& p, index_t s) {
  const auto dims = p.split_dims(s);
  if (std::ranges::find(dims, 0) == dims.end()) return 1;
  if (p.batch > 0) return p.batch;
  bytes_t largest = 1;
  for (const auto& list : {p.inputs(s), p.outputs(s)}) {
    for (const index_t t : list) {
      const auto ti = static_cast<std::size_t>(t);
      if (splits_with_batch(p.kind[ti])) largest = std::max(largest, p.bytes[ti]);
    }
  }
  return largest;
}

/// Why step `s`'s op cannot be split into `parts` (`max_split_parts`):
/// "splits op 'fc1' into 12 parts, more than the batch's 10 samples", or an
/// empty string if it can.
[[nodiscard]] inline std::string split_violation(const problem& p, index_t s, std::int64_t parts) {
  if (parts <= 1 || parts <= max_split_parts(p, s)) return {};
  const std::string& op = p.op_name[static_cast<std::size_t>(s)];
  const auto dims = p.split_dims(s);
  if (std::ranges::find(dims, 0) == dims.end()) {
    return detail::concat("splits op '", op, "' into ", parts,
                          " parts along dimension 0 (the batch), which is not one of its split dimensions");
  }
  if (p.batch > 0) {
    return detail::concat("splits op '", op, "' into ", parts, " parts, more than the batch's ", p.batch, " samples");
  }
  return detail::concat("splits op '", op, "' into ", parts, " parts, more than the ", max_split_parts(p, s),
                        " bytes of its largest sample tensor (the batch is unknown; a micro-batch holds a sample "
                        "of a byte at least)");
}

/// A search planner's best plan after one iteration (HOME Fig. 8): its
/// simulated time, and by how much it exceeds the budget (0: it fits).
struct search_point {
  double time_us = 0;        ///< the best plan's simulated iteration time, µs
  bytes_t excess_bytes = 0;  ///< its peak above the budget, bytes (0: it fits)
};

/// A planner's answer for one problem, device and budget: per-tensor
/// decisions for reports, and the action list (the file comment gives its
/// rules) with its waits, which the simulator judges and the executor runs.
struct plan {
  std::string planner;   ///< the planner's registry name ("tsplit", ...), or a file's
  bool feasible = true;  ///< whether the planner claims it fits; `kind` and `reason` say why not
  /// Why not feasible: `none` when feasible; else out_of_memory (its best
  /// plan needs more than the budget), planner_gave_up, time_limit, or
  /// invalid_plan (a planner's bug). Not stored in plan documents.
  failure_kind kind = failure_kind::none;
  std::string reason;        ///< why not feasible; for a feasible plan, a caveat (milp: stopped early, its gap) or empty
  bytes_t budget = 0;        ///< the device memory it was planned for, bytes
  bytes_t best_peak = 0;     ///< the smallest peak the planner reached, as it estimated it
  std::vector<decision> decisions;  ///< per tensor
  std::vector<action> actions;         ///< in issue order
  std::vector<index_t> wait_begin{0};  ///< CSR offsets into `waits` (actions + 1)
  std::vector<index_t> waits;          ///< indices of earlier actions
  std::vector<search_point> history;   ///< search planners: the best plan after each iteration; else empty
  std::vector<index_t> offloaded_state;  ///< persistent tensors in host memory between iterations, ascending
  /// The memory layout (DESIGN.md §6, plan_layout.hpp): the arena offset of
  /// every device allocation, in `allocation_order` (plan_layout.hpp);
  /// empty: none assigned yet.
  std::vector<bytes_t> offsets;
  bytes_t arena_bytes = 0;  ///< the layout's arena: the highest offset + footprint (0: no layout)
  /// Host time an online allocator spent in driver calls (cudaMalloc of a
  /// segment, cudaFree of cached ones: runtime/caching_allocator.hpp), µs.
  /// The calls block the host that issues the actions, so the simulator and
  /// the validator add it to the run's time (in full: an upper bound).
  double allocator_us = 0;

  /// The earlier actions action `a` waits for.
  [[nodiscard]] std::span<const index_t> waits_of(std::size_t a) const {
    const auto b = static_cast<std::size_t>(wait_begin[a]);
    return {waits.data() + b, static_cast<std::size_t>(wait_begin[a + 1]) - b};
  }
  /// Appends an action that waits on `on` (indices of earlier actions).
  /// Inlined, so that `a` built from values is stored field by field, not
  /// copied whole through memory (plan_builder::add).
  [[gnu::always_inline]] index_t push(action a, std::span<const index_t> on = {}) {
    actions.push_back(a);
    waits.insert(waits.end(), on.begin(), on.end());
    wait_begin.push_back(static_cast<index_t>(waits.size()));
    return static_cast<index_t>(actions.size() - 1);
  }
};

}  // namespace memplan
