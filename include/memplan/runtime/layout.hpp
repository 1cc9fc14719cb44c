#pragma once
/// \file
/// `runtime::layout_of`: the buffers a plan's action list makes, derived once
/// before it runs by the plan walk (plan_walk.hpp, plan.hpp's semantics):
/// which device copy each action reads, allocates and releases, which host
/// copy each swap writes or reads, and after which action each buffer may go
/// and which actions must have ended first (its holders, the last per
/// stream). The executor places the device buffers at a memory layout's
/// offsets (placement.hpp) and gates reuse of their bytes on events.
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
#include "memplan/plan_walk.hpp"
#include "memplan/problem.hpp"
#include "memplan/runtime/arena.hpp"

/// Running a plan: the buffers its actions make (layout.hpp), where they
/// lie in device memory (placement.hpp), the caching allocator the online
/// policies model, and the executor that issues the actions on a device.
namespace memplan::runtime {

/// A device copy of a tensor, an action's workspace, or a host copy.
struct buffer {
  index_t tensor = no_index;  ///< no_index: workspace
  bytes_t bytes = 0;          ///< its size (a micro-tensor's: micro_bytes)
  /// The action that allocates it; `layout::load` for tensors on the device
  /// at time 0 and for the host copies of offloaded state.
  index_t maker = no_index;
  /// The action after whose issue it is given back (the swap_out or free
  /// releasing it, or its last holder); no_index: kept after the run.
  index_t release = no_index;
  /// The last action per stream that reads or writes it: the ones that must
  /// end before it can go.
  std::array<index_t, stream_count> holders = no_stream_actions;
  index_t parts = 1;          ///< a micro-tensor: `part` of `parts`; else 1
  index_t part = no_index;    ///< a micro-tensor: which one; no_index: the whole tensor (or workspace)
  ///@{
  /// A micro-tensor split in place: the whole device buffer it was part of,
  /// and where in it it starts (micro-tensor k of parts starts at
  /// bytes(whole) · k / parts). no_index: a block of its own.
  index_t whole = no_index;
  bytes_t start = 0;
  ///@}
  /// A whole device buffer split in place (its `release`): its first
  /// micro-tensor buffer; the `parts` of them follow in order.
  index_t split_into = no_index;
};

/// Bytes [offset, offset + bytes) of a device buffer.
struct slice {
  index_t buffer = no_index;  ///< index into `layout::device`
  bytes_t offset = 0;         ///< from the buffer's start
  bytes_t bytes = 0;          ///< the slice's length
};

/// The bytes [offset, offset + bytes) of a tensor that an op reads or
/// writes, held in `slices`, in order (empty: an output the op leaves alone).
struct access {
  bytes_t offset = 0;         ///< from the tensor's start (micro-tensor k's offset for a micro-op)
  bytes_t bytes = 0;          ///< the length read or written
  std::vector<slice> slices;  ///< the buffers' bytes that hold them, back to back
};

/// What an action touches: indices into `layout::device` / `layout::host`.
struct action_buffers {
  std::vector<access> reads;   ///< compute/recompute: inputs, in p.inputs(step) order
  std::vector<access> writes;  ///< compute/recompute: outputs, in p.outputs(step) order; no slices if already there
  std::vector<index_t> allocates;  ///< device buffers allocated when it is issued (outputs, workspace, swap-in target)
  index_t workspace = no_index;  ///< compute/recompute: the op's workspace buffer, or no_index for none
  index_t device = no_index;  ///< swap_out: the copy saved; swap_in: the copy made; free: the copy released
  index_t host = no_index;    ///< swap_out: the host copy written; swap_in: the host copy read
  bytes_t host_start = 0;     ///< swap_in: where in the host copy its bytes start (a micro-tensor of a whole copy)
  index_t splits = no_index;  ///< a micro release of a whole tensor: the whole buffer it splits in place first
  std::vector<index_t> releases_device;  ///< device buffers given back after it is issued
  std::vector<index_t> releases_host;    ///< host copies given back after it is issued
};

/// Every buffer a plan's run makes and what each action touches
/// (`layout_of`); the executor runs the plan from it.
struct layout {
  /// The pseudo-action that loads the tensors without a producer (index
  /// actions.size(): after every real action, so never a real one's number).
  index_t load = 0;
  std::vector<buffer> device;           ///< device copies and workspaces, in the order they are made
  std::vector<buffer> host;             ///< host copies: one per swap_out, one per offloaded state
  std::vector<action_buffers> actions;  ///< per action of the plan
  std::vector<index_t> initial;           ///< device buffers of tensors without a producer
  std::vector<index_t> initial_host;      ///< host copies of offloaded state, loaded at the start
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
/// The plan walk's visitor that records `layout`'s buffers (plan_walk.hpp).
class layout_recorder {
 public:
  layout_recorder(const problem& p, const plan& pl, layout& l) : p_(&p), pl_(&pl), l_(&l) {}

  index_t initial_copy(index_t t) {
    const index_t c = new_device(t, bytes_of(t), l_->load, 1, no_index);
    l_->initial.push_back(c);
    return c;
  }
  index_t initial_host(index_t t) {
    const auto h = static_cast<index_t>(l_->host.size());
    l_->initial_host.push_back(h);
    l_->host.push_back({t, bytes_of(t), l_->load, no_index, {}, 1, no_index, no_index, 0, no_index});
    return h;
  }
  void begin(index_t a) {
    a_ = a;
    access_ = nullptr;
  }
  void end(index_t) { close_read(); }
  void begin_access(index_t, bytes_t offset, bytes_t bytes, bool output) {
    close_read();
    std::vector<access>& list = output ? here().writes : here().reads;
    list.push_back({offset, bytes, {}});
    access_ = &list.back();
    reading_ = !output;
    first_read_ = no_index;
  }
  void read(index_t c, bytes_t offset, bytes_t bytes) {
    hold(l_->device[static_cast<std::size_t>(c)]);
    if (bytes > 0) access_->slices.push_back({c, offset, bytes});
    if (first_read_ == no_index) first_read_ = c;
  }
  void write(index_t c, bytes_t offset, bytes_t bytes) {
    hold(l_->device[static_cast<std::size_t>(c)]);
    access_->slices.push_back({c, offset, bytes});
  }
  index_t make(index_t t, bytes_t bytes, index_t parts, index_t part) {
    const index_t c = allocate(t, bytes, parts, part);
    access_->slices.push_back({c, 0, bytes});
    return c;
  }
  void update(index_t) {}  // in place: the buffer it read
  void workspace(bytes_t bytes) {
    if (bytes == 0) return;
    const index_t w = allocate(no_index, bytes, 1, no_index);
    l_->device.back().release = a_;
    here().workspace = w;
    here().releases_device.push_back(w);
  }
  index_t swap_in(index_t t, bytes_t bytes, index_t host, bytes_t host_start) {
    here().host = host;
    here().host_start = host_start;
    hold(l_->host[static_cast<std::size_t>(host)]);
    const bool micro = act().part != no_index;
    return here().device = allocate(t, bytes, micro ? act().parts : 1, act().part);
  }
  /// A whole buffer split in place: its bytes pass to `parts` micro-tensor
  /// buffers over its sub-ranges, held by its holders and by this action.
  void split(index_t whole) {
    buffer& w = l_->device[static_cast<std::size_t>(whole)];
    split_holders_ = w.holders;
    split_maker_ = w.maker;
    w.release = a_;
    w.split_into = static_cast<index_t>(l_->device.size());
    here().splits = whole;
  }
  index_t split_part(index_t whole, index_t t, bytes_t start, bytes_t bytes, index_t parts, index_t part) {
    const index_t m = new_device(t, bytes, split_maker_, parts, part);
    buffer& b = l_->device.back();
    b.whole = whole;
    b.start = start;
    b.holders = split_holders_;
    hold(b);
    return m;
  }
  void release(index_t c, bool) {
    buffer& b = l_->device[static_cast<std::size_t>(c)];
    hold(b);
    b.release = a_;
    here().device = c;
    here().releases_device.push_back(c);
  }
  index_t save(index_t t, bytes_t bytes, index_t parts, index_t part) {
    const auto h = static_cast<index_t>(l_->host.size());
    l_->host.push_back({t, bytes, a_, no_index, {}, parts, part, no_index, 0, no_index});
    hold(l_->host.back());
    return here().host = h;
  }

 private:
  [[nodiscard]] const action& act() const { return pl_->actions[static_cast<std::size_t>(a_)]; }
  [[nodiscard]] action_buffers& here() { return l_->actions[static_cast<std::size_t>(a_)]; }
  [[nodiscard]] bytes_t bytes_of(index_t t) const { return p_->bytes[static_cast<std::size_t>(t)]; }
  /// The action being read holds b: the last holder per stream is what a release waits for.
  void hold(buffer& b) {
    index_t& last = b.holders[static_cast<std::size_t>(stream_of(*p_, act()))];
    last = std::max(last, a_);
  }
  index_t new_device(index_t t, bytes_t bytes, index_t maker, index_t parts, index_t part) {
    l_->device.push_back({t, bytes, maker, no_index, {}, parts, part, no_index, 0, no_index});
    return static_cast<index_t>(l_->device.size() - 1);
  }
  index_t allocate(index_t t, bytes_t bytes, index_t parts, index_t part) {
    const index_t c = new_device(t, bytes, a_, parts, part);
    hold(l_->device.back());
    here().allocates.push_back(c);
    return c;
  }
  /// A read of no bytes still names the buffer it would read (a view of nothing).
  void close_read() {
    if (access_ != nullptr && reading_ && access_->slices.empty() && first_read_ != no_index) {
      access_->slices.push_back({first_read_, 0, 0});
    }
    access_ = nullptr;
  }

  const problem* p_;
  const plan* pl_;
  layout* l_;
  index_t a_ = 0;
  access* access_ = nullptr;  ///< the read or write being recorded
  bool reading_ = false;
  index_t first_read_ = no_index;
  std::array<index_t, stream_count> split_holders_{};
  index_t split_maker_ = no_index;
};

/// Buffers no action released: dead after their last holder, unless the
/// tensor persists across iterations (DESIGN.md §4); a host copy goes after
/// its last swap-in, unless it is the last copy of a persistent tensor
/// (read after the run) or its device copy is gone too.
inline void release_the_rest(const problem& p, layout& l) {
  const auto last_holder = [](const buffer& b) { return *std::ranges::max_element(b.holders); };
  const auto at = [](auto& v, index_t i) -> auto& { return v[static_cast<std::size_t>(i)]; };
  for (std::size_t i = 0; i < l.device.size(); ++i) {
    buffer& b = l.device[i];
    if (b.release != no_index || b.tensor == no_index) continue;
    const bool latest = at(l.kept_device, b.tensor) == static_cast<index_t>(i);
    if (latest && p.persistent(b.tensor)) continue;
    if (latest) at(l.kept_device, b.tensor) = no_index;
    b.release = last_holder(b);
    if (b.release == no_index) {
      l.released_at_load.push_back(static_cast<index_t>(i));
    } else {
      at(l.actions, b.release).releases_device.push_back(static_cast<index_t>(i));
    }
  }
  for (std::size_t i = 0; i < l.host.size(); ++i) {
    buffer& b = l.host[i];
    const bool latest = at(l.kept_host, b.tensor) == static_cast<index_t>(i);
    if (latest && p.persistent(b.tensor) && at(l.kept_device, b.tensor) == no_index) continue;  // kept
    if (latest) at(l.kept_host, b.tensor) = no_index;
    b.release = last_holder(b);
    if (b.release != no_index) at(l.actions, b.release).releases_host.push_back(static_cast<index_t>(i));
  }
}

/// Host-copy bytes (arena footprints) live at once in issue order.
inline bytes_t pinned_in_list_order(const layout& l) {
  bytes_t pinned = 0;
  for (const index_t h : l.initial_host) pinned += arena::footprint(l.host[static_cast<std::size_t>(h)].bytes);
  bytes_t peak = pinned;
  for (std::size_t a = 0; a < l.actions.size(); ++a) {
    const action_buffers& ab = l.actions[a];
    if (ab.host != no_index && l.host[static_cast<std::size_t>(ab.host)].maker == static_cast<index_t>(a)) {
      pinned += arena::footprint(l.host[static_cast<std::size_t>(ab.host)].bytes);
      peak = std::max(peak, pinned);
    }
    for (const index_t h : ab.releases_host) pinned -= arena::footprint(l.host[static_cast<std::size_t>(h)].bytes);
  }
  return peak;
}
}  // namespace detail

/// Derives the buffers of `pl` by the plan walk (plan_walk.hpp).
/// \throws invalid_plan naming the action and the rule if plan.hpp's rules
///         reject the list (the simulator's verdict, word for word).
[[nodiscard]] inline layout layout_of(const problem& p, const plan& pl) {
  layout l;
  l.load = static_cast<index_t>(pl.actions.size());
  l.actions.resize(pl.actions.size());
  l.kept_device.assign(p.num_tensors(), no_index);
  l.kept_host.assign(p.num_tensors(), no_index);
  detail::layout_recorder recorder(p, pl, l);
  plan_walk walk;
  if (!walk.run(p, pl, recorder)) throw invalid_plan("invalid plan: " + walk.why());
  for (std::size_t t = 0; t < p.num_tensors(); ++t) {
    l.kept_device[t] = walk.device_copy(static_cast<index_t>(t));
    l.kept_host[t] = walk.host_copy(static_cast<index_t>(t));
  }
  detail::release_the_rest(p, l);
  l.pinned_peak = detail::pinned_in_list_order(l);
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
