#pragma once
/// \file
/// `runtime::layout_of`: the buffers a plan's action list makes, derived once
/// before it runs (plan.hpp's semantics, read as the validator reads them):
/// which device copy each action reads, allocates and releases, which host
/// copy each swap writes or reads, and after which action each buffer may go
/// and which actions must have ended first (its holders, the last per
/// stream). The executor turns this into allocations and event-gated frees.
///
/// Micro-tensors (plan.hpp, TSPLIT §V-A) are buffers of their own: one made
/// by a micro-op or a micro swap-in is a block of its own; releasing one of a
/// whole tensor splits the whole buffer in place into `parts` buffers over
/// its sub-ranges, each given back on its own. An op reads a tensor as a
/// list of slices of these buffers: one slice of a whole buffer (all of it,
/// or micro-tensor k's range, a zero-copy view), one micro-tensor, or — a
/// zero-copy merge — the parts of every micro-tensor that cover the range.

#include <algorithm>
#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "memplan/error.hpp"
#include "memplan/plan.hpp"
#include "memplan/problem.hpp"
#include "memplan/runtime/arena.hpp"

namespace memplan::runtime {

/// A device copy of a tensor, an action's workspace, or a host copy.
struct buffer {
  index_t tensor = no_index;  ///< no_index: workspace
  bytes_t bytes = 0;
  /// The action that allocates it; `layout::load` for tensors on the device
  /// at time 0 and for the host copies of offloaded state.
  index_t maker = no_index;
  /// The action after whose issue it is given back (the swap_out or free
  /// releasing it, or its last holder); no_index: kept after the run.
  index_t release = no_index;
  /// The last action per stream that reads or writes it: the ones that must
  /// end before it can go.
  std::array<index_t, stream_count> holders{no_index, no_index, no_index};
  index_t parts = 1;          ///< a micro-tensor: `part` of `parts`; else 1
  index_t part = no_index;    ///< a micro-tensor: which one; no_index: the whole tensor (or workspace)
  /// A micro-tensor split in place: the whole device buffer it was part of,
  /// and where in it it starts (micro-tensor k of parts starts at
  /// bytes(whole) · k / parts). no_index: a block of its own.
  index_t whole = no_index;
  bytes_t start = 0;
  /// A whole device buffer split in place (its `release`): its first
  /// micro-tensor buffer; the `parts` of them follow in order.
  index_t split_into = no_index;
  bool micro_op = false;  ///< allocated by a micro-op or a micro swap-in (finer arena blocks)
};

/// Bytes [offset, offset + bytes) of a device buffer.
struct slice {
  index_t buffer = no_index;
  bytes_t offset = 0;
  bytes_t bytes = 0;
};

/// The bytes [offset, offset + bytes) of a tensor that an op reads or
/// writes, held in `slices`, in order (empty: an output the op leaves alone).
struct access {
  bytes_t offset = 0;
  bytes_t bytes = 0;
  std::vector<slice> slices;
};

/// What an action touches: indices into `layout::device` / `layout::host`.
struct action_buffers {
  std::vector<access> reads;   ///< compute/recompute: inputs, in p.inputs(step) order
  std::vector<access> writes;  ///< compute/recompute: outputs, in p.outputs(step) order; no slices if already there
  std::vector<index_t> allocates;  ///< device buffers allocated when it is issued (outputs, workspace, swap-in target)
  index_t workspace = no_index;
  index_t device = no_index;  ///< swap_out: the copy saved; swap_in: the copy made; free: the copy released
  index_t host = no_index;    ///< swap_out: the host copy written; swap_in: the host copy read
  bytes_t host_start = 0;     ///< swap_in: where in the host copy its bytes start (a micro-tensor of a whole copy)
  index_t splits = no_index;  ///< a micro release of a whole tensor: the whole buffer it splits in place first
  std::vector<index_t> releases_device;  ///< device buffers given back after it is issued
  std::vector<index_t> releases_host;    ///< host copies given back after it is issued
};

struct layout {
  /// The pseudo-action that loads the tensors without a producer (index
  /// actions.size(): after every real action, so never a real one's number).
  index_t load = 0;
  std::vector<buffer> device;
  std::vector<buffer> host;
  std::vector<action_buffers> actions;
  std::vector<index_t> initial;           ///< device buffers of tensors without a producer
  std::vector<index_t> initial_host;      ///< host copies of offloaded state, loaded at the start
  std::vector<index_t> released_at_load;  ///< initial buffers no action touches (not persistent)
  std::vector<index_t> kept_device;       ///< per tensor: its device copy kept after the run, or no_index
  std::vector<index_t> kept_host;         ///< per tensor: its host copy kept after the run, or no_index
  bytes_t pinned_peak = 0;  ///< host-copy bytes (arena footprints) live at once, in issue order
};

/// Alignment (and rounding) of the arena blocks of micro-tensors and of
/// micro-ops' workspace: the simulator counts micro_bytes exactly, and a
/// 256-byte footprint would make 32 micro-tensors of 64 B take 4x their
/// bytes. 64 B still suits any vector load.
inline constexpr bytes_t micro_alignment = 64;

/// Where device buffer `b` sits in the arena: the bytes it takes and their
/// alignment. A whole tensor or an op's workspace: its footprint, 256-byte
/// aligned; a micro-tensor or a micro-op's workspace made on its own: its
/// bytes rounded to `micro_alignment`; a micro-tensor split in place: its
/// sub-range of the whole buffer's footprint (the last one takes the
/// padding), moved only to an offset with the same remainder modulo 64.
struct extent {
  bytes_t bytes = 0;
  bytes_t align = arena::alignment;
};
[[nodiscard]] inline std::vector<extent> device_extents(const layout& l) {
  std::vector<extent> out(l.device.size());
  for (std::size_t i = 0; i < l.device.size(); ++i) {
    const buffer& b = l.device[i];
    if (b.whole != no_index) {  // after its whole buffer (made earlier)
      const buffer& w = l.device[static_cast<std::size_t>(b.whole)];
      const bytes_t end = b.part + 1 == b.parts ? out[static_cast<std::size_t>(b.whole)].bytes
                                                : w.bytes * (b.part + 1) / b.parts;
      out[i] = {end - b.start, micro_alignment};  // never allocated; compaction keeps offset % 64
    } else if (b.micro_op) {
      out[i] = {(b.bytes + micro_alignment - 1) / micro_alignment * micro_alignment, micro_alignment};
    } else {
      out[i] = {arena::footprint(b.bytes), arena::alignment};
    }
  }
  return out;
}

namespace detail {
/// The micro-op or micro-tensor an action names (plan.hpp's `part`, TSPLIT
/// §V-A), or no_index: whole. Written against either shape of `action`.
template <class Action>
[[nodiscard]] constexpr index_t part_of(const Action& a) noexcept {
  if constexpr (requires { a.part; }) {
    return a.part;
  } else {
    return no_index;
  }
}

/// "action 25 (compute 'matmul_grad_x4')", "action 30 (swap_out 'r3', part 1 of 4)".
inline std::string action_name(const problem& p, const plan& pl, index_t a) {
  const action& act = pl.actions[static_cast<std::size_t>(a)];
  const bool op = act.kind == action_kind::compute || act.kind == action_kind::recompute;
  const std::string part =
      part_of(act) == no_index ? std::string() : memplan::detail::concat(", part ", part_of(act), " of ", act.parts);
  return memplan::detail::concat("action ", a, " (", to_string(act.kind), " '",
                op ? p.op_name[static_cast<std::size_t>(act.step)] : p.tensor_name[static_cast<std::size_t>(act.tensor)],
                "'", part, ")");
}
}  // namespace detail

/// Derives the buffers of `pl`.
/// \throws invalid_argument naming the action if the list is malformed (an
///         index out of range, a wait that does not point back, a part
///         outside [0, parts)), or reads, saves or releases a tensor (or
///         micro-tensor) that is not on the device, swaps in one never
///         swapped out, or mixes micro-tensors of two parts counts — the
///         simulator's rules (sim/simulator.hpp).
[[nodiscard]] inline layout layout_of(const problem& p, const plan& pl) {
  using memplan::detail::concat;
  const auto n = static_cast<index_t>(pl.actions.size());
  const auto steps = static_cast<index_t>(p.num_steps());
  const auto tensors = static_cast<index_t>(p.num_tensors());
  MEMPLAN_EXPECTS(pl.wait_begin.size() == pl.actions.size() + 1 && pl.wait_begin.front() == 0 &&
                      static_cast<std::size_t>(pl.wait_begin.back()) == pl.waits.size(),
                  invalid_argument, "plan: wait_begin must hold actions + 1 offsets into waits");
  layout l;
  l.load = n;
  l.actions.resize(static_cast<std::size_t>(n));
  l.kept_device.assign(static_cast<std::size_t>(tensors), no_index);
  l.kept_host.assign(static_cast<std::size_t>(tensors), no_index);
  std::vector<index_t>& on_device = l.kept_device;  // the current whole copy while walking
  std::vector<index_t>& host_copy = l.kept_host;    // the latest whole host copy
  // Per tensor held as micro-tensors: their parts count (0: none) and
  // buffers (no_index where one is not on the device); the same for the
  // host copies of micro-tensors.
  std::vector<index_t> micro_parts(static_cast<std::size_t>(tensors), 0);
  std::vector<std::vector<index_t>> micro(static_cast<std::size_t>(tensors));
  std::vector<index_t> host_parts(static_cast<std::size_t>(tensors), 0);
  std::vector<std::vector<index_t>> host_micro(static_cast<std::size_t>(tensors));
  const auto at = [](auto& v, index_t i) -> auto& { return v[static_cast<std::size_t>(i)]; };
  const auto hold = [&](buffer& b, index_t a) {
    auto& last = b.holders[static_cast<std::size_t>(stream_of(at(pl.actions, a).kind))];
    last = std::max(last, a);
  };
  const auto any_micro = [&](index_t t) { return std::ranges::any_of(at(micro, t), [](index_t b) { return b != no_index; }); };
  const auto all_micro = [&](index_t t) {
    return at(micro_parts, t) != 0 && std::ranges::none_of(at(micro, t), [](index_t b) { return b == no_index; });
  };
  // t is to hold micro-tensors of `parts`: false if it holds some of another count.
  const auto enter_parts = [&](index_t t, index_t parts) {
    if (at(micro_parts, t) == parts) return true;
    if (at(micro_parts, t) != 0 && any_micro(t)) return false;
    at(micro_parts, t) = parts;
    at(micro, t).assign(static_cast<std::size_t>(parts), no_index);
    return true;
  };
  const auto new_device = [&](index_t t, bytes_t bytes, index_t maker, index_t parts, index_t part) {
    l.device.push_back({t, bytes, maker, no_index, {}, parts, part, no_index, 0, no_index, part != no_index});
    return static_cast<index_t>(l.device.size() - 1);
  };

  MEMPLAN_EXPECTS(std::ranges::is_sorted(pl.offloaded_state) &&
                      std::ranges::adjacent_find(pl.offloaded_state) == pl.offloaded_state.end(),
                  invalid_argument, "plan: offloaded_state must list tensors in increasing order, without repeats");
  for (const index_t t : pl.offloaded_state) {
    MEMPLAN_EXPECTS(t >= 0 && t < tensors && p.persistent(t) && at(p.producer, t) == no_index, invalid_argument,
                    "plan: offloaded_state names tensor ", t,
                    ", which is not a parameter or optimizer state of the problem that no op makes");
    at(host_copy, t) = static_cast<index_t>(l.host.size());
    l.initial_host.push_back(at(host_copy, t));
    l.host.push_back({t, at(p.bytes, t), l.load, no_index, {}, 1, no_index, no_index, 0, no_index, false});
  }
  for (index_t t = 0; t < tensors; ++t) {
    if (at(p.producer, t) != no_index || std::ranges::binary_search(pl.offloaded_state, t)) continue;
    at(on_device, t) = new_device(t, at(p.bytes, t), l.load, 1, no_index);
    l.initial.push_back(at(on_device, t));
  }

  for (index_t a = 0; a < n; ++a) {
    const action& act = at(pl.actions, a);
    action_buffers& ab = at(l.actions, a);
    const auto name = [&] { return detail::action_name(p, pl, a); };
    const index_t k = detail::part_of(act);
    const bool micro_action = k != no_index;
    MEMPLAN_EXPECTS(act.parts >= 1, invalid_argument, "plan: action ", a, " (", to_string(act.kind), "): parts ",
                    act.parts, " < 1");
    MEMPLAN_EXPECTS(!micro_action || (k >= 0 && k < act.parts), invalid_argument, "plan: action ", a, " (",
                    to_string(act.kind), "): part ", k, " is outside [0, parts = ", act.parts, ")");
    const auto begin = static_cast<std::size_t>(at(pl.wait_begin, a));
    const auto end = static_cast<std::size_t>(at(pl.wait_begin, a + 1));
    MEMPLAN_EXPECTS(begin <= end && end <= pl.waits.size(), invalid_argument, "plan: action ", a,
                    ": wait offsets decrease");
    for (std::size_t i = begin; i < end; ++i) {
      MEMPLAN_EXPECTS(pl.waits[i] >= 0 && pl.waits[i] < a, invalid_argument, "plan: action ", a, " waits on action ",
                      pl.waits[i], ", which does not come before it");
    }
    if (act.kind == action_kind::compute || act.kind == action_kind::recompute) {
      MEMPLAN_EXPECTS(act.step >= 0 && act.step < steps, invalid_argument, "plan: action ", a, " (",
                      to_string(act.kind), "): step ", act.step, " is out of range [0, ", steps, ")");
      for (const index_t t : p.inputs(act.step)) {
        // Micro-op k reads micro-tensor k of its sample tensors, the rest whole.
        const bool split = micro_action && splits_with_batch(at(p.kind, t));
        const bytes_t bytes = at(p.bytes, t);
        access in{split ? bytes * k / act.parts : 0, split ? micro_bytes(bytes, act.parts, k) : bytes, {}};
        const index_t q = at(micro_parts, t);
        if (const index_t w = at(on_device, t); w != no_index) {
          hold(at(l.device, w), a);
          in.slices.push_back({w, in.offset, in.bytes});  // all of it, or a zero-copy view of micro-tensor k
        } else if (split && q == act.parts && at(at(micro, t), k) != no_index) {
          const index_t m = at(at(micro, t), k);
          hold(at(l.device, m), a);
          in.slices.push_back({m, 0, in.bytes});
        } else {
          // Read whole, or a micro-tensor of another parts count: every
          // micro-tensor must be there (the in-place merge); the op reads
          // the parts of them that cover its range.
          MEMPLAN_EXPECTS(all_micro(t), invalid_argument, "plan: ", name(), " reads tensor '", at(p.tensor_name, t),
                          "', which is not on the device",
                          q != 0 ? concat(" (only some of its ", q, " micro-tensors are)") : std::string());
          for (index_t j = 0; j < q; ++j) {
            const index_t m = at(at(micro, t), j);
            hold(at(l.device, m), a);
            const bytes_t from = std::max(in.offset, bytes * j / q);
            const bytes_t to = std::min(in.offset + in.bytes, bytes * (j + 1) / q);
            if (to > from) in.slices.push_back({m, from - bytes * j / q, to - from});
          }
          if (in.slices.empty()) in.slices.push_back({at(at(micro, t), 0), 0, 0});
        }
        ab.reads.push_back(std::move(in));
      }
      for (const index_t t : p.outputs(act.step)) {
        const bool split = micro_action && splits_with_batch(at(p.kind, t));
        const bytes_t bytes = at(p.bytes, t);
        access out{split ? bytes * k / act.parts : 0, split ? micro_bytes(bytes, act.parts, k) : bytes, {}};
        if (split && at(on_device, t) == no_index) {
          // Micro-op k makes micro-tensor k, unless it is there already.
          MEMPLAN_EXPECTS(enter_parts(t, act.parts), invalid_argument, "plan: ", name(), ": tensor '",
                          at(p.tensor_name, t), "' is on the device as micro-tensors of another parts count");
          index_t& m = at(at(micro, t), k);
          if (m == no_index) {
            m = new_device(t, out.bytes, a, act.parts, k);
            hold(l.device.back(), a);
            ab.allocates.push_back(m);
            out.slices.push_back({m, 0, out.bytes});
          }
          ab.writes.push_back(std::move(out));
          continue;
        }
        if (const index_t w = at(on_device, t); w != no_index) {
          // Already there: a recompute leaves it alone; a later micro-op of a
          // compute writes its share (a whole output made by micro-op 0).
          if (micro_action && act.kind == action_kind::compute) {
            hold(at(l.device, w), a);
            out.slices.push_back({w, out.offset, out.bytes});
          }
          ab.writes.push_back(std::move(out));
          continue;
        }
        if (at(micro_parts, t) != 0) {
          if (all_micro(t)) {  // on the device as micro-tensors: left alone
            ab.writes.push_back(std::move(out));
            continue;
          }
          MEMPLAN_EXPECTS(!any_micro(t), invalid_argument, "plan: ", name(), ": tensor '", at(p.tensor_name, t),
                          "' is on the device as some of its micro-tensors only");
          at(micro_parts, t) = 0;
        }
        at(on_device, t) = new_device(t, bytes, a, 1, no_index);
        hold(l.device.back(), a);
        ab.allocates.push_back(at(on_device, t));
        out.slices.push_back({at(on_device, t), 0, bytes});
        ab.writes.push_back(std::move(out));
      }
      // One part's scratch at a time: ceil(workspace / parts), as the simulator.
      const bytes_t w = at(p.workspace, act.step);
      const bytes_t part_w = w / act.parts + (w % act.parts != 0 ? 1 : 0);
      if (part_w > 0) {
        ab.workspace = new_device(no_index, part_w, a, 1, no_index);
        l.device.back().release = a;
        l.device.back().micro_op = micro_action;
        hold(l.device.back(), a);
        ab.allocates.push_back(ab.workspace);
        ab.releases_device.push_back(ab.workspace);
      }
      continue;
    }
    MEMPLAN_EXPECTS(act.tensor >= 0 && act.tensor < tensors, invalid_argument, "plan: action ", a, " (",
                    to_string(act.kind), "): tensor ", act.tensor, " is out of range [0, ", tensors, ")");
    const index_t t = act.tensor;
    MEMPLAN_EXPECTS(!micro_action || splits_with_batch(at(p.kind, t)), invalid_argument, "plan: ", name(),
                    ": only tensors of kind input, activation or gradient have micro-tensors");
    if (act.kind == action_kind::swap_in) {
      MEMPLAN_EXPECTS(at(on_device, t) == no_index, invalid_argument, "plan: ", name(), ": tensor '",
                      at(p.tensor_name, t), "' is already on the device");
      if (micro_action) {
        MEMPLAN_EXPECTS(enter_parts(t, act.parts), invalid_argument, "plan: ", name(), ": tensor '",
                        at(p.tensor_name, t), "' is on the device as micro-tensors of another parts count");
        index_t& m = at(at(micro, t), k);
        MEMPLAN_EXPECTS(m == no_index, invalid_argument, "plan: ", name(), ": the micro-tensor is already on the device");
        // From the host copy of micro-tensor k, else from the whole host copy.
        const index_t own = at(host_parts, t) == act.parts ? at(at(host_micro, t), k) : no_index;
        MEMPLAN_EXPECTS(own != no_index || at(host_copy, t) != no_index, invalid_argument, "plan: ", name(),
                        ": neither the micro-tensor nor tensor '", at(p.tensor_name, t), "' was swapped out");
        ab.host = own != no_index ? own : at(host_copy, t);
        ab.host_start = own != no_index ? 0 : at(p.bytes, t) * k / act.parts;
        hold(at(l.host, ab.host), a);
        m = new_device(t, micro_bytes(at(p.bytes, t), act.parts, k), a, act.parts, k);
        hold(l.device.back(), a);
        ab.device = m;
        ab.allocates.push_back(m);
        continue;
      }
      MEMPLAN_EXPECTS(!any_micro(t), invalid_argument, "plan: ", name(), ": tensor '", at(p.tensor_name, t),
                      "' is on the device as micro-tensors");
      MEMPLAN_EXPECTS(at(host_copy, t) != no_index, invalid_argument, "plan: ", name(), ": tensor '",
                      at(p.tensor_name, t), "' was never swapped out");
      at(micro_parts, t) = 0;
      ab.host = at(host_copy, t);
      hold(at(l.host, ab.host), a);
      at(on_device, t) = new_device(t, at(p.bytes, t), a, 1, no_index);
      hold(l.device.back(), a);
      ab.device = at(on_device, t);
      ab.allocates.push_back(ab.device);
      continue;
    }
    if (micro_action) {
      if (const index_t w = at(on_device, t); w != no_index) {
        // Split in place (plan.hpp): the whole buffer's bytes pass to
        // `parts` micro-tensors, each released on its own from now on; like
        // the simulator, this action holds all of them.
        buffer& whole = at(l.device, w);
        const std::array<index_t, stream_count> holders = whole.holders;
        const index_t maker = whole.maker;
        const bytes_t bytes = whole.bytes;
        whole.release = a;
        whole.split_into = static_cast<index_t>(l.device.size());
        ab.splits = w;
        at(on_device, t) = no_index;
        at(micro_parts, t) = 0;
        enter_parts(t, act.parts);
        for (index_t j = 0; j < act.parts; ++j) {
          const index_t m = new_device(t, micro_bytes(bytes, act.parts, j), maker, act.parts, j);
          buffer& b = l.device.back();
          b.micro_op = false;
          b.whole = w;
          b.start = bytes * j / act.parts;
          b.holders = holders;
          hold(b, a);
          at(at(micro, t), j) = m;
        }
      }
      MEMPLAN_EXPECTS(at(micro_parts, t) == act.parts && at(at(micro, t), k) != no_index, invalid_argument, "plan: ",
                      name(), " releases a micro-tensor of '", at(p.tensor_name, t), "' that is not on the device");
      ab.device = at(at(micro, t), k);
      at(at(micro, t), k) = no_index;
      buffer& b = at(l.device, ab.device);
      hold(b, a);
      b.release = a;
      ab.releases_device.push_back(ab.device);
      if (act.kind == action_kind::swap_out) {
        if (at(host_parts, t) != act.parts) {
          at(host_parts, t) = act.parts;
          at(host_micro, t).assign(static_cast<std::size_t>(act.parts), no_index);
        }
        at(at(host_micro, t), k) = ab.host = static_cast<index_t>(l.host.size());
        l.host.push_back({t, b.bytes, a, no_index, {}, act.parts, k, no_index, 0, no_index, false});
        hold(l.host.back(), a);
      }
      continue;
    }
    MEMPLAN_EXPECTS(at(on_device, t) != no_index, invalid_argument, "plan: ", name(), " releases tensor '",
                    at(p.tensor_name, t), "', which is not on the device",
                    any_micro(t) ? " whole (it is there as micro-tensors; release each of them)" : "");
    ab.device = at(on_device, t);
    buffer& b = at(l.device, ab.device);
    hold(b, a);
    b.release = a;
    ab.releases_device.push_back(ab.device);
    at(on_device, t) = no_index;
    if (act.kind == action_kind::swap_out) {
      at(host_copy, t) = ab.host = static_cast<index_t>(l.host.size());
      l.host.push_back({t, at(p.bytes, t), a, no_index, {}, 1, no_index, no_index, 0, no_index, false});
      hold(l.host.back(), a);
    }
  }

  // Buffers no action released: dead after their last holder, unless the
  // tensor persists across iterations (DESIGN.md §4); a host copy goes after
  // its last swap-in, unless it is the last copy of a persistent tensor
  // (read after the run) or its device copy is gone too.
  const auto last_holder = [](const buffer& b) { return *std::ranges::max_element(b.holders); };
  for (std::size_t i = 0; i < l.device.size(); ++i) {
    buffer& b = l.device[i];
    if (b.release != no_index || b.tensor == no_index) continue;
    const bool kept = p.persistent(b.tensor) && at(on_device, b.tensor) == static_cast<index_t>(i);
    if (kept) continue;
    if (at(on_device, b.tensor) == static_cast<index_t>(i)) at(on_device, b.tensor) = no_index;
    b.release = last_holder(b);
    if (b.release == no_index) {
      l.released_at_load.push_back(static_cast<index_t>(i));
    } else {
      at(l.actions, b.release).releases_device.push_back(static_cast<index_t>(i));
    }
  }
  for (std::size_t i = 0; i < l.host.size(); ++i) {
    buffer& b = l.host[i];
    const bool latest = at(host_copy, b.tensor) == static_cast<index_t>(i);
    if (latest && p.persistent(b.tensor) && at(on_device, b.tensor) == no_index) continue;  // kept
    if (latest) at(host_copy, b.tensor) = no_index;
    b.release = last_holder(b);
    if (b.release != no_index) at(l.actions, b.release).releases_host.push_back(static_cast<index_t>(i));
  }
  bytes_t pinned = 0;
  for (const index_t h : l.initial_host) pinned += arena::footprint(at(l.host, h).bytes);
  l.pinned_peak = pinned;
  for (const action_buffers& ab : l.actions) {
    const auto a = static_cast<index_t>(&ab - l.actions.data());
    if (ab.host != no_index && at(l.host, ab.host).maker == a) {
      pinned += arena::footprint(at(l.host, ab.host).bytes);
      l.pinned_peak = std::max(l.pinned_peak, pinned);
    }
    for (const index_t h : ab.releases_host) pinned -= arena::footprint(at(l.host, h).bytes);
  }
  return l;
}

/// Host-copy bytes (arena footprints) live at once when `l`'s actions are
/// issued in `order` (a permutation of them): each from the issue of the
/// swap_out that makes it (the start, for offloaded state) until its
/// release and all its holders are issued. In list order this is
/// `l.pinned_peak`.
[[nodiscard]] inline bytes_t pinned_peak(const layout& l, std::span<const index_t> order) {
  std::vector<index_t> position(l.actions.size() + 1, 0);  // the load, at the start
  for (std::size_t i = 0; i < order.size(); ++i) position[static_cast<std::size_t>(order[i])] = static_cast<index_t>(i);
  std::vector<bytes_t> change(order.size() + 1, 0);  // at each position: bytes made, then (next slot) released
  for (const buffer& b : l.host) {
    if (b.release == no_index) {  // kept after the run
      change[static_cast<std::size_t>(position[static_cast<std::size_t>(b.maker)])] += arena::footprint(b.bytes);
      continue;
    }
    index_t gone = position[static_cast<std::size_t>(b.release)];
    for (const index_t h : b.holders) {
      if (h != no_index) gone = std::max(gone, position[static_cast<std::size_t>(h)]);
    }
    change[static_cast<std::size_t>(position[static_cast<std::size_t>(b.maker)])] += arena::footprint(b.bytes);
    change[static_cast<std::size_t>(gone) + 1] -= arena::footprint(b.bytes);
  }
  bytes_t live = 0, peak = 0;
  for (const bytes_t c : change) {
    live += c;
    peak = std::max(peak, live);
  }
  return peak;
}

}  // namespace memplan::runtime
