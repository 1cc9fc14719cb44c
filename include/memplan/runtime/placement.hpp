#pragma once
/// \file
/// `runtime::placement_of`: where an executor puts a plan's device buffers
/// and in which order it issues the actions — the plan's memory layout
/// (plan_layout.hpp) mapped onto runtime::layout_of's buffers, or, for a
/// plan without one, the layout of the timeline the executor issues in —
/// and `reuse_waits`: what each action must wait for before it takes bytes
/// an earlier buffer held.
///
/// Why a layout runs as judged: the layout lets two allocations share bytes
/// only if one is freed (all its holders ended) strictly before the other
/// is made in the timeline it was derived from. The executor issues the
/// actions in that timeline's start order, so every holder of the earlier
/// allocation, and its release, is issued before the later one's maker:
/// making the maker's stream wait for the holders' events (at most one per
/// other stream) orders the reuse on the device without blocking the host.
/// A layout that does not fit the issue order (an overlapping buffer not yet
/// released when its successor is made) is refused before anything runs.

#include <algorithm>
#include <array>
#include <cstddef>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "memplan/arena_layout.hpp"
#include "memplan/cost/device.hpp"
#include "memplan/error.hpp"
#include "memplan/plan.hpp"
#include "memplan/plan_layout.hpp"
#include "memplan/problem.hpp"
#include "memplan/runtime/arena.hpp"
#include "memplan/runtime/layout.hpp"
#include "memplan/sim/assign_layout.hpp"
#include "memplan/sim/simulator.hpp"

namespace memplan::runtime {

namespace detail {
/// The actions of a simulated run in the order the simulator started them
/// (`action_interval::order`: at one instant, as it chose them).
[[nodiscard]] inline std::vector<index_t> start_order(const report& r, std::size_t actions) {
  std::vector<index_t> order(actions);
  for (const action_interval& row : r.timeline) order[static_cast<std::size_t>(row.order)] = row.action;
  return order;
}
[[nodiscard]] inline std::vector<index_t> list_order(std::size_t actions) {
  std::vector<index_t> order(actions);
  for (std::size_t a = 0; a < actions; ++a) order[a] = static_cast<index_t>(a);
  return order;
}
}  // namespace detail

/// The order in which an executor made with `timing` issues `pl`'s
/// actions: as the simulator starts them on that device under the plan's
/// budget, or list order without `timing` or where the simulator finds the
/// plan infeasible. (The simulator may start a micro-op reading micro-tensor
/// k of a whole tensor before a copy stream's release splits it, and an
/// action reading the whole tensor after: the executor splits a tensor when
/// the first of them is issued.)
[[nodiscard]] inline std::vector<index_t> issue_order(const problem& p, const plan& pl, const device_spec* timing) {
  if (timing == nullptr) return detail::list_order(pl.actions.size());
  const report r = simulator().run(p, pl, *timing, pl.budget, simulate_options{true, false});
  if (!r.feasible || r.timeline.size() != pl.actions.size()) return detail::list_order(pl.actions.size());
  return detail::start_order(r, pl.actions.size());
}

/// The pinned bytes an executor made with `timing` needs for `pl`: host
/// copies live at once in its issue order (`layout_of(p, pl).pinned_peak`
/// without timing).
[[nodiscard]] inline bytes_t pinned_bytes(const problem& p, const plan& pl, const device_spec* timing = nullptr) {
  return pinned_peak(layout_of(p, pl), issue_order(p, pl, timing));
}

/// Where an executor puts a plan's device buffers, and its issue order.
struct placement {
  std::vector<index_t> order;    ///< the actions in the order they are issued
  std::vector<bytes_t> offsets;  ///< per device buffer of layout_of(p, pl): its arena offset
  bytes_t arena_bytes = 0;       ///< the layout's arena (highest offset + footprint)
  bytes_t alignment = arena::alignment;  ///< footprints are bytes rounded up to it
  bool derived = false;          ///< the plan had no layout: this one is the executor's
};

/// The placement of `pl` (whose buffers are `l`) for an executor made with
/// `timing` (or without: null): the plan's own layout (`plan::offsets`)
/// when it has one, issued in `issue_order`; else, with `timing`, the
/// layout `assign_layout` gives it (the simulator's timeline), issued in
/// that timeline's start order; else (no timing, or a plan the simulator
/// finds infeasible) the layout of the lifetimes the actions have issued
/// one after another in list order (`issue_times`), placed by `place`.
/// \throws invalid_plan if the plan's offsets do not match its allocations.
[[nodiscard]] inline placement placement_of(const problem& p, const plan& pl, const layout& l,
                                            const device_spec* timing) {
  placement out;
  if (timing != nullptr) out.alignment = timing->alignment;
  if (!pl.offsets.empty()) {
    out.order = issue_order(p, pl, timing);
    out.offsets = offsets_by_buffer(l, pl.offsets);
    out.arena_bytes = pl.arena_bytes;
    return out;
  }
  out.derived = true;
  if (timing != nullptr) {
    plan copy = pl;
    const report r = assign_layout(p, copy, *timing);
    if (r.feasible && r.timeline.size() == pl.actions.size()) {
      out.order = detail::start_order(r, pl.actions.size());
      out.offsets = offsets_by_buffer(l, copy.offsets);
      out.arena_bytes = copy.arena_bytes;
      return out;
    }
  }
  out.order = detail::list_order(pl.actions.size());
  std::vector<double> start, end;
  std::vector<index_t> order;
  issue_times(out.order, start, end, order);
  const allocation_lifetimes a = lifetimes_of(l, start, end, order);
  arena_layout placed = place(a.lifetimes, a.segments, out.alignment);
  out.offsets = offsets_by_buffer(l, placed.offsets);
  out.arena_bytes = placed.arena_bytes;
  return out;
}

/// Per action: for each stream, the latest action of it (by issue order)
/// whose event the action's stream waits on before the action is issued,
/// or no_index — its plan waits and the holders of the earlier buffers
/// whose bytes its allocations take.
using stream_gates = std::array<index_t, stream_count>;

namespace detail {

/// Builds `reuse_waits`: a map of the arena's bytes (disjoint ranges → the
/// buffer last placed there), walked in issue order.
class reuse_map {
 public:
  reuse_map(const problem& p, const plan& pl, const layout& l, const placement& at)
      : p_(&p), pl_(&pl), l_(&l), at_(&at), position_(pl.actions.size() + 1, -1), released_(l.device.size(), -1) {
    for (std::size_t i = 0; i < at.order.size(); ++i) position_[static_cast<std::size_t>(at.order[i])] = static_cast<index_t>(i);
    // A buffer's bytes are free once its release and every holder are
    // issued (the executor releases it then); kept buffers never are.
    for (std::size_t b = 0; b < l.device.size(); ++b) {
      const buffer& buf = l.device[b];
      if (buf.release == no_index) {
        released_[b] = never;
        continue;
      }
      index_t last = pos(buf.release);
      for (const index_t h : buf.holders) last = h == no_index ? last : std::max(last, pos(h));
      released_[b] = last;
    }
    for (const index_t b : l.released_at_load) released_[static_cast<std::size_t>(b)] = -1;  // at the load
  }

  /// The gates of every action; \throws invalid_plan at the first buffer
  /// placed over one still live.
  std::vector<stream_gates> run() {
    std::vector<stream_gates> gates(pl_->actions.size(), no_stream_actions);
    for (const index_t b : l_->initial) take(l_->load, b, nullptr);
    for (const index_t a : at_->order) {
      stream_gates& g = gates[static_cast<std::size_t>(a)];
      const stream_kind own = stream_of(*p_, act(a));
      for (const index_t w : pl_->waits_of(static_cast<std::size_t>(a))) gate(g, own, w);
      for (const index_t b : l_->actions[static_cast<std::size_t>(a)].allocates) take(a, b, &g);
    }
    return gates;
  }

 private:
  static constexpr index_t never = std::numeric_limits<index_t>::max();
  struct range {
    bytes_t end;
    index_t buffer;
  };

  [[nodiscard]] index_t pos(index_t a) const { return position_[static_cast<std::size_t>(a)]; }
  [[nodiscard]] const action& act(index_t a) const { return pl_->actions[static_cast<std::size_t>(a)]; }
  [[nodiscard]] const buffer& buf(index_t b) const { return l_->device[static_cast<std::size_t>(b)]; }
  [[nodiscard]] bytes_t offset(index_t b) const { return at_->offsets[static_cast<std::size_t>(b)]; }

  /// Waits on action `w`'s event, unless `w` runs on the waiting stream.
  void gate(stream_gates& g, stream_kind own, index_t w) const {
    const stream_kind s = stream_of(*p_, act(w));
    if (s == own) return;
    index_t& latest = g[static_cast<std::size_t>(s)];
    if (latest == no_index || pos(w) > pos(latest)) latest = w;
  }

  /// Places buffer `b`, made by `maker`: its bytes, or those of the
  /// micro-tensors it is split into in place (each freed on its own).
  void take(index_t maker, index_t b, stream_gates* g) {
    const buffer& whole = buf(b);
    if (whole.split_into == no_index) {
      take(maker, b, b, offset(b), offset(b) + whole.bytes, g);
      return;
    }
    for (index_t k = 0; k < buf(whole.split_into).parts; ++k) {
      const index_t m = whole.split_into + k;
      take(maker, b, m, offset(m), offset(m) + buf(m).bytes, g);
    }
  }
  /// The bytes [from, to) of `b` go to `holder` (b, or a micro-tensor of
  /// b): every range they overlap must be free by `maker`'s issue, and its
  /// holders' events gate `maker`.
  void take(index_t maker, index_t b, index_t holder, bytes_t from, bytes_t to, stream_gates* g) {
    if (to <= from) return;
    auto it = ranges_.upper_bound(from);
    if (it != ranges_.begin() && std::prev(it)->second.end > from) --it;
    while (it != ranges_.end() && it->first < to) {
      const bytes_t start = it->first;
      const range old = it->second;
      if (released_[static_cast<std::size_t>(old.buffer)] >= pos(maker)) conflict(maker, b, old.buffer);
      for (const index_t h : buf(old.buffer).holders) {
        if (h != no_index && g != nullptr) gate(*g, stream_of(*p_, act(maker)), h);
      }
      it = ranges_.erase(it);
      if (start < from) ranges_.emplace(start, range{from, old.buffer});
      if (old.end > to) it = ranges_.emplace(to, range{old.end, old.buffer}).first;
    }
    ranges_.emplace(from, range{to, holder});
  }

  [[nodiscard]] std::string describe(index_t b) const {
    const buffer& x = buf(b);
    const std::string what =
        x.tensor == no_index ? std::string("the workspace")
        : x.part == no_index ? memplan::detail::concat("tensor '", p_->tensor_name[static_cast<std::size_t>(x.tensor)], "'")
                             : memplan::detail::concat("micro-tensor ", x.part, " of ", x.parts, " of tensor '",
                                                       p_->tensor_name[static_cast<std::size_t>(x.tensor)], "'");
    const std::string by = x.maker == l_->load ? std::string("loaded at the start")
                                               : "made by " + action_name(*p_, *pl_, x.maker);
    return memplan::detail::concat(what, " (", by, ") at offset ", offset(b), ", ", x.bytes, " bytes");
  }
  [[noreturn]] void conflict(index_t maker, index_t b, index_t live) const {
    const buffer& x = buf(live);
    const std::string until = x.release == no_index ? std::string("it is never released")
                                                    : "its release is issued after " + action_name(*p_, *pl_, x.release) +
                                                          " and its holders";
    throw invalid_plan(memplan::detail::concat(
        "invalid plan: the memory layout does not fit the executor's issue order: ", describe(b), " overlaps ",
        describe(live), ", which is still live when ",
        maker == l_->load ? std::string("the initial load") : action_name(*p_, *pl_, maker), " is issued (", until,
        "); a layout made from the simulator's timeline fits the executor made with that device "
        "(executor(dev, p, pl, spec))"));
  }

  const problem* p_;
  const plan* pl_;
  const layout* l_;
  const placement* at_;
  std::vector<index_t> position_;  ///< per action: where it is issued; the load: -1
  std::vector<index_t> released_;  ///< per device buffer: the position after which its bytes are free
  std::map<bytes_t, range> ranges_;  ///< by start: disjoint ranges of the arena and who holds them
};

}  // namespace detail

/// The gates of each of `pl`'s actions when its device buffers sit at
/// `at.offsets` and the actions are issued in `at.order`: its plan waits on
/// other streams and, for every earlier buffer whose bytes its allocations
/// overlap, that buffer's holders on other streams (the latest per stream).
/// O(n log n) in the buffers.
/// \throws invalid_plan naming both buffers, their tensors, makers and
///         offsets if an overlapping buffer is still live when an action
///         allocating over it is issued (the layout does not fit the order).
[[nodiscard]] inline std::vector<stream_gates> reuse_waits(const problem& p, const plan& pl, const layout& l,
                                                          const placement& at) {
  return detail::reuse_map(p, pl, l, at).run();
}

}  // namespace memplan::runtime
