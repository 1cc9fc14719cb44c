#pragma once
/// \file
/// A plan's memory layout (DESIGN.md §6): an offset for every device
/// allocation inside one arena, so that the executor places each one there
/// and never fragments. The budget is the arena: a plan is feasible only if
/// its layout fits.
///
/// The allocations, in *allocation order* (the order of `plan::offsets`):
/// the device buffers the plan walk makes (runtime::layout_of), leaving out
/// the micro-tensors of a tensor split in place, which lie inside their
/// whole tensor's block — the tensors on the device at time 0 in tensor
/// order, then per action in list order the outputs it makes (in the op's
/// output order), its workspace (when it needs any) and the copy a swap_in
/// makes.
///
/// An allocation's footprint is its bytes rounded up to the device's
/// alignment and it starts at a multiple of it. It is live from the start
/// of the action that makes it (time 0 for the tensors there at the start)
/// until the end of the last action that holds it (plan.hpp: its release
/// and every earlier action reading or writing it); a tensor split in place
/// is a block whose micro-tensors go one by one. Two allocations may share
/// bytes only if one is freed before the other is made in the simulated run
/// (`instant`: at an earlier time, or at the same time by an action that
/// the simulator started before the maker): then the executor, which issues
/// actions in the simulator's start order, makes the later one wait for the
/// earlier one's holders, all issued before it, so it cannot deadlock.

#include <algorithm>
#include <cstddef>
#include <limits>
#include <map>
#include <utility>
#include <span>
#include <string>
#include <vector>

#include "memplan/arena_layout.hpp"
#include "memplan/error.hpp"
#include "memplan/format_bytes.hpp"
#include "memplan/plan.hpp"
#include "memplan/problem.hpp"
#include "memplan/runtime/layout.hpp"

namespace memplan {

/// The allocations of a plan with their lifetimes in one timeline, ready
/// for `place` (arena_layout.hpp).
struct allocation_lifetimes {
  std::vector<index_t> buffer;        ///< per allocation: its device buffer in runtime::layout_of
  std::vector<lifetime> lifetimes;    ///< per allocation
  std::vector<segment> segments;      ///< their pieces (one, or a tensor split in place's micro-tensors)
};

namespace detail::plan_layout {

/// An instant of a run: a start or end of an action at `time`, the action
/// being the `order`-th to start. Events of one instant come in the order
/// the simulator handles them: an action's end before the start of any
/// action that started after it, its start before its own end.
struct instant {
  double time = 0;
  index_t order = -1;  ///< -1: the load at time 0, before every action
  int end = 0;         ///< 0: a start, 1: an end
  auto operator<=>(const instant&) const = default;
};

/// When buffer b of `l` is made and freed (the end of its last holder, its
/// release among them; `nullopt`-like `kept` for a buffer kept after the run).
struct span_of_life {
  instant made;
  instant freed;
  bool kept = false;
};
inline span_of_life life_of(const runtime::layout& l, const runtime::buffer& b, std::span<const double> start,
                            std::span<const double> end, std::span<const index_t> order) {
  const auto event = [&](index_t a, int is_end) {
    if (a == l.load) return instant{0, -1, is_end};
    const auto i = static_cast<std::size_t>(a);
    return instant{is_end != 0 ? end[i] : start[i], order[i], is_end};
  };
  span_of_life life{event(b.maker, 0), event(b.maker, 1), b.release == no_index};
  if (b.release != no_index) life.freed = std::max(life.freed, event(b.release, 1));
  for (const index_t h : b.holders) {
    if (h != no_index) life.freed = std::max(life.freed, event(h, 1));
  }
  return life;
}

/// Ranks of instants: made at x and freed at y become the half-open event
/// interval [rank(x), rank(y) + 1), so a buffer's bytes may be reused only
/// by one made at a later instant than its free.
class instant_ranks {
 public:
  void add(const instant& t) { times_.push_back(t); }
  void sort() {
    std::ranges::sort(times_);
    times_.erase(std::unique(times_.begin(), times_.end()), times_.end());
  }
  [[nodiscard]] index_t made(const span_of_life& l) const { return rank(l.made); }
  [[nodiscard]] index_t freed(const span_of_life& l) const { return l.kept ? never_freed : rank(l.freed) + 1; }

 private:
  [[nodiscard]] index_t rank(const instant& t) const {
    return static_cast<index_t>(std::ranges::lower_bound(times_, t) - times_.begin());
  }
  std::vector<instant> times_;
};

/// A piece of an allocation in a sweep: bytes [from, to) live over [begin, end).
struct piece {
  index_t begin, end;
  bytes_t from, to;
  index_t allocation;
};

/// The pieces of every allocation at `offsets`, the last piece of each
/// taking its padding to the alignment; zero-byte pieces left out.
inline std::vector<piece> pieces_of(std::span<const lifetime> lifetimes, std::span<const segment> segments,
                                    std::span<const bytes_t> offsets, bytes_t alignment) {
  std::vector<piece> out;
  for (std::size_t i = 0; i < lifetimes.size(); ++i) {
    const lifetime& life = lifetimes[i];
    const segment whole{life.bytes, life.end};
    const std::span<const segment> parts =
        life.segments == 0 ? std::span<const segment>(&whole, 1)
                           : segments.subspan(static_cast<std::size_t>(life.first_segment), static_cast<std::size_t>(life.segments));
    bytes_t at = offsets[i];
    for (std::size_t k = 0; k < parts.size(); ++k) {
      bytes_t to = at + parts[k].bytes;
      if (k + 1 == parts.size()) to = offsets[i] + (to - offsets[i] + alignment - 1) / alignment * alignment;
      if (to > at) out.push_back({life.begin, parts[k].end, at, to, static_cast<index_t>(i)});
      at += parts[k].bytes;
    }
  }
  return out;
}

}  // namespace detail::plan_layout

/// The first two allocations (by when the second is made) that share bytes
/// while both are live, or {no_index, no_index}. A sweep over makes and
/// frees with the live pieces ordered by offset: O(n log n).
[[nodiscard]] inline std::pair<index_t, index_t> first_conflict(std::span<const lifetime> lifetimes,
                                                                std::span<const segment> segments,
                                                                std::span<const bytes_t> offsets, bytes_t alignment) {
  using detail::plan_layout::piece;
  std::vector<piece> pieces = detail::plan_layout::pieces_of(lifetimes, segments, offsets, alignment);
  std::ranges::stable_sort(pieces, {}, &piece::begin);
  std::vector<std::size_t> by_end(pieces.size());
  for (std::size_t i = 0; i < by_end.size(); ++i) by_end[i] = i;
  std::ranges::sort(by_end, [&](std::size_t x, std::size_t y) { return pieces[x].end < pieces[y].end; });
  std::map<bytes_t, const piece*> live;  // by `from`; disjoint
  std::size_t next_free = 0;
  for (const piece& made : pieces) {
    for (; next_free < by_end.size() && pieces[by_end[next_free]].end <= made.begin; ++next_free) {
      const piece& gone = pieces[by_end[next_free]];
      if (const auto it = live.find(gone.from); it != live.end() && it->second == &gone) live.erase(it);
    }
    auto it = live.lower_bound(made.to);  // the first live piece starting at or after its end
    if (it != live.begin()) {
      const piece& before = *std::prev(it)->second;  // the last starting before its end
      if (before.to > made.from) return {before.allocation, made.allocation};
    }
    live.emplace(made.from, &made);
  }
  return {no_index, no_index};
}

/// The allocations of `l` (layout_of's buffers of a plan) and their
/// lifetimes in the run where action a runs from `start[a]` to `end[a]`
/// and is the `order[a]`-th to start.
[[nodiscard]] inline allocation_lifetimes lifetimes_of(const runtime::layout& l, std::span<const double> start,
                                                       std::span<const double> end, std::span<const index_t> order) {
  using namespace detail::plan_layout;
  std::vector<span_of_life> lives(l.device.size());
  instant_ranks ranks;
  for (std::size_t i = 0; i < l.device.size(); ++i) {
    lives[i] = life_of(l, l.device[i], start, end, order);
    ranks.add(lives[i].made);
    ranks.add(lives[i].freed);
  }
  for (const index_t i : l.released_at_load) lives[static_cast<std::size_t>(i)] = {{0, -1, 0}, {0, -1, 1}, false};
  ranks.sort();
  allocation_lifetimes out;
  for (std::size_t i = 0; i < l.device.size(); ++i) {
    const runtime::buffer& b = l.device[i];
    if (b.whole != no_index) continue;  // inside its whole tensor's block
    lifetime life{ranks.made(lives[i]), ranks.freed(lives[i]), b.bytes, 0, 0};
    if (b.split_into != no_index) {  // its micro-tensors, back to back, each freed on its own
      life.first_segment = static_cast<index_t>(out.segments.size());
      life.segments = l.device[static_cast<std::size_t>(b.split_into)].parts;
      life.end = 0;
      for (index_t k = 0; k < life.segments; ++k) {
        const auto m = static_cast<std::size_t>(b.split_into + k);
        out.segments.push_back({l.device[m].bytes, ranks.freed(lives[m])});
        life.end = std::max(life.end, out.segments.back().end);
      }
    }
    out.buffer.push_back(static_cast<index_t>(i));
    out.lifetimes.push_back(life);
  }
  return out;
}

/// Per device buffer of `l`, its arena offset under the layout `offsets`
/// (in allocation order): a micro-tensor split in place lies inside its
/// whole tensor's block, at its start.
[[nodiscard]] inline std::vector<bytes_t> offsets_by_buffer(const runtime::layout& l, std::span<const bytes_t> offsets) {
  std::vector<bytes_t> out(l.device.size(), 0);
  std::size_t next = 0;
  for (std::size_t i = 0; i < l.device.size(); ++i) {
    const runtime::buffer& b = l.device[i];
    if (b.whole != no_index) {
      out[i] = out[static_cast<std::size_t>(b.whole)] + b.start;
    } else {
      MEMPLAN_EXPECTS(next < offsets.size(), invalid_plan, "invalid plan: the layout has ", offsets.size(),
                      " offsets, fewer than the plan's device allocations");
      out[i] = offsets[next++];
    }
  }
  MEMPLAN_EXPECTS(next == offsets.size(), invalid_plan, "invalid plan: the layout has ", offsets.size(),
                  " offsets for the plan's ", next, " device allocations");
  return out;
}

/// Times for `lifetimes_of` where actions are issued one after another in
/// `issue` (a permutation of the plan's actions): the executor's issue
/// order, in which an allocation may reuse bytes once every holder of the
/// old one is issued before its maker.
inline void issue_times(std::span<const index_t> issue, std::vector<double>& start, std::vector<double>& end,
                        std::vector<index_t>& order) {
  start.assign(issue.size(), 0);
  end.assign(issue.size(), 0);
  order.assign(issue.size(), 0);
  for (std::size_t i = 0; i < issue.size(); ++i) {
    const auto a = static_cast<std::size_t>(issue[i]);
    start[a] = static_cast<double>(i) + 1;
    end[a] = static_cast<double>(i) + 1.5;
    order[a] = static_cast<index_t>(i);
  }
}

/// Why `offsets` is not a layout of `a` (the plan `pl`'s allocations) on a
/// device of `alignment`: the wrong count, an offset that is negative or
/// not aligned, or two allocations sharing bytes while both are live —
/// named by the actions that make them; empty if it is one.
[[nodiscard]] inline std::string layout_conflict(const problem& p, const plan& pl, const runtime::layout& l,
                                                 const allocation_lifetimes& a, std::span<const bytes_t> offsets,
                                                 bytes_t alignment) {
  if (offsets.size() != a.lifetimes.size()) {
    return detail::concat("the layout has ", offsets.size(), " offsets for the plan's ", a.lifetimes.size(),
                          " device allocations");
  }
  const auto maker = [&](std::size_t i) {
    const runtime::buffer& b = l.device[static_cast<std::size_t>(a.buffer[i])];
    const std::string what = b.tensor == no_index ? std::string("the workspace")
                                                  : detail::concat("tensor '", p.tensor_name[static_cast<std::size_t>(b.tensor)], "'");
    return detail::concat("allocation ", i, " (", what, b.maker == l.load ? std::string(" at the start")
                                                                        : " of " + plan_walk::describe(p, pl, b.maker), ")");
  };
  for (std::size_t i = 0; i < offsets.size(); ++i) {
    if (offsets[i] < 0 || offsets[i] % alignment != 0) {
      return detail::concat(maker(i), " is at offset ", offsets[i], ", not a non-negative multiple of the device's ",
                            alignment, "-byte alignment");
    }
  }
  const auto [first, second] = first_conflict(a.lifetimes, a.segments, offsets, alignment);
  if (first == no_index) return {};
  return detail::concat(maker(static_cast<std::size_t>(first)), " and ", maker(static_cast<std::size_t>(second)),
                        " share bytes at offsets ", offsets[static_cast<std::size_t>(first)], " and ",
                        offsets[static_cast<std::size_t>(second)], " while both are live");
}

/// The arena a layout takes: its highest offset + footprint.
[[nodiscard]] inline bytes_t arena_extent(const allocation_lifetimes& a, std::span<const bytes_t> offsets,
                                          bytes_t alignment) {
  bytes_t arena = 0;
  for (std::size_t i = 0; i < a.lifetimes.size(); ++i) {
    const bytes_t bytes = a.lifetimes[i].bytes;
    if (bytes > 0) arena = std::max(arena, offsets[i] + (bytes + alignment - 1) / alignment * alignment);
  }
  return arena;
}

}  // namespace memplan
