#pragma once
/// \file
/// `runtime::layout_of`: the buffers a plan's action list makes, derived once
/// before it runs (plan.hpp's semantics, read as the validator reads them):
/// which device copy each action reads, allocates and releases, which host
/// copy each swap writes or reads, and after which action each buffer may go
/// and which actions must have ended first (its holders, the last per
/// stream). The executor turns this into allocations and event-gated frees.

#include <algorithm>
#include <array>
#include <cstddef>
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
  /// at time 0.
  index_t maker = no_index;
  /// The action after whose issue it is given back (the swap_out or free
  /// releasing it, or its last holder); no_index: kept after the run.
  index_t release = no_index;
  /// The last action per stream that reads or writes it: the ones that must
  /// end before it can go.
  std::array<index_t, stream_count> holders{no_index, no_index, no_index};
};

/// What an action touches: indices into `layout::device` / `layout::host`.
struct action_buffers {
  std::vector<index_t> reads;   ///< compute/recompute: inputs, in p.inputs(step) order
  std::vector<index_t> writes;  ///< compute/recompute: outputs, in p.outputs(step) order; no_index if already there
  std::vector<index_t> allocates;  ///< device buffers allocated when it is issued (outputs, workspace, swap-in target)
  index_t workspace = no_index;
  index_t device = no_index;  ///< swap_out: the copy saved; swap_in: the copy made; free: the copy released
  index_t host = no_index;    ///< swap_out: the host copy written; swap_in: the host copy read
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
  std::vector<index_t> released_at_load;  ///< initial buffers no action touches (not persistent)
  std::vector<index_t> kept_device;       ///< per tensor: its device copy kept after the run, or no_index
  std::vector<index_t> kept_host;         ///< per tensor: its host copy kept after the run, or no_index
  bytes_t pinned_peak = 0;  ///< host-copy bytes (arena footprints) live at once, in issue order
};

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

inline std::string action_name(const problem& p, const plan& pl, index_t a) {
  const action& act = pl.actions[static_cast<std::size_t>(a)];
  const bool op = act.kind == action_kind::compute || act.kind == action_kind::recompute;
  return memplan::detail::concat("action ", a, " (", to_string(act.kind), " '",
                op ? p.op_name[static_cast<std::size_t>(act.step)] : p.tensor_name[static_cast<std::size_t>(act.tensor)],
                "')");
}
}  // namespace detail

/// Derives the buffers of `pl`.
/// \throws invalid_argument naming the action if the list is malformed (an
///         index out of range, a wait that does not point back), names a
///         micro-op or micro-tensor (not supported yet), or reads,
///         saves or releases a tensor that is not on the device, or swaps in
///         one never swapped out.
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
  std::vector<index_t>& on_device = l.kept_device;  // the current copy while walking
  std::vector<index_t>& host_copy = l.kept_host;
  const auto at = [](auto& v, index_t i) -> auto& { return v[static_cast<std::size_t>(i)]; };
  const auto hold = [&](buffer& b, index_t a) {
    auto& last = b.holders[static_cast<std::size_t>(stream_of(at(pl.actions, a).kind))];
    last = std::max(last, a);
  };

  for (index_t t = 0; t < tensors; ++t) {
    if (at(p.producer, t) != no_index) continue;
    at(on_device, t) = static_cast<index_t>(l.device.size());
    l.initial.push_back(at(on_device, t));
    l.device.push_back({t, at(p.bytes, t), l.load, no_index, {}});
  }

  for (index_t a = 0; a < n; ++a) {
    const action& act = at(pl.actions, a);
    action_buffers& ab = at(l.actions, a);
    const auto name = [&] { return detail::action_name(p, pl, a); };
    MEMPLAN_EXPECTS(detail::part_of(act) == no_index, invalid_argument, "executor: ", name(), " is part ",
                    detail::part_of(act), " of ", act.parts,
                    ": micro-ops and micro-tensors (plan.hpp's `part`, TSPLIT §V-A) are not supported yet; plans "
                    "whose split ops run whole (`part` = no_index) are");
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
      MEMPLAN_EXPECTS(act.parts >= 1, invalid_argument, "plan: ", name(), ": parts ", act.parts, " < 1");
      for (const index_t t : p.inputs(act.step)) {
        const index_t b = at(on_device, t);
        MEMPLAN_EXPECTS(b != no_index, invalid_argument, "plan: ", name(), " reads tensor '", at(p.tensor_name, t),
                        "', which is not on the device");
        hold(at(l.device, b), a);
        ab.reads.push_back(b);
      }
      for (const index_t t : p.outputs(act.step)) {
        if (at(on_device, t) != no_index) {  // recompute brings back only what is missing
          ab.writes.push_back(no_index);
          continue;
        }
        at(on_device, t) = static_cast<index_t>(l.device.size());
        l.device.push_back({t, at(p.bytes, t), a, no_index, {}});
        hold(l.device.back(), a);
        ab.writes.push_back(at(on_device, t));
        ab.allocates.push_back(at(on_device, t));
      }
      // One part's scratch at a time: ceil(workspace / parts), as the simulator.
      const bytes_t w = at(p.workspace, act.step);
      const bytes_t part_w = w / act.parts + (w % act.parts != 0 ? 1 : 0);
      if (part_w > 0) {
        ab.workspace = static_cast<index_t>(l.device.size());
        l.device.push_back({no_index, part_w, a, a, {}});
        hold(l.device.back(), a);
        ab.allocates.push_back(ab.workspace);
        ab.releases_device.push_back(ab.workspace);
      }
      continue;
    }
    MEMPLAN_EXPECTS(act.tensor >= 0 && act.tensor < tensors, invalid_argument, "plan: action ", a, " (",
                    to_string(act.kind), "): tensor ", act.tensor, " is out of range [0, ", tensors, ")");
    const index_t t = act.tensor;
    if (act.kind == action_kind::swap_in) {
      MEMPLAN_EXPECTS(at(on_device, t) == no_index, invalid_argument, "plan: ", name(), ": tensor '",
                      at(p.tensor_name, t), "' is already on the device");
      MEMPLAN_EXPECTS(at(host_copy, t) != no_index, invalid_argument, "plan: ", name(), ": tensor '",
                      at(p.tensor_name, t), "' was never swapped out");
      ab.host = at(host_copy, t);
      hold(at(l.host, ab.host), a);
      at(on_device, t) = static_cast<index_t>(l.device.size());
      l.device.push_back({t, at(p.bytes, t), a, no_index, {}});
      hold(l.device.back(), a);
      ab.device = at(on_device, t);
      ab.allocates.push_back(ab.device);
      continue;
    }
    MEMPLAN_EXPECTS(at(on_device, t) != no_index, invalid_argument, "plan: ", name(), " releases tensor '",
                    at(p.tensor_name, t), "', which is not on the device");
    ab.device = at(on_device, t);
    buffer& b = at(l.device, ab.device);
    hold(b, a);
    b.release = a;
    ab.releases_device.push_back(ab.device);
    at(on_device, t) = no_index;
    if (act.kind == action_kind::swap_out) {
      at(host_copy, t) = ab.host = static_cast<index_t>(l.host.size());
      l.host.push_back({t, at(p.bytes, t), a, no_index, {}});
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
    at(l.actions, b.release).releases_host.push_back(static_cast<index_t>(i));
  }
  bytes_t pinned = 0;
  for (const action_buffers& ab : l.actions) {
    if (ab.host != no_index && at(l.host, ab.host).maker == static_cast<index_t>(&ab - l.actions.data())) {
      pinned += arena::footprint(at(l.host, ab.host).bytes);
      l.pinned_peak = std::max(l.pinned_peak, pinned);
    }
    for (const index_t h : ab.releases_host) pinned -= arena::footprint(at(l.host, h).bytes);
  }
  return l;
}

}  // namespace memplan::runtime
