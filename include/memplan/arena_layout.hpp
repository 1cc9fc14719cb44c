#pragma once
/// \file
/// `place`: the offline memory layout of a run's device allocations. Given
/// when each allocation is live (positions in the run's sequence of
/// allocation and free events) and its bytes, it gives each an offset in one
/// arena so that allocations live at the same time never share a byte, and
/// keeps the arena (the highest offset + footprint) close to the peak of
/// live bytes, its lower bound.
///
/// This is the offline form of dynamic storage allocation (NP-hard); two
/// heuristics, and the smaller arena wins:
///
/// 1. **Greedy by size, then best fit over time.** The
///    `greedy_by_size_blocks` largest allocations by footprint (ties: earlier
///    begin, then input order; where that covers every allocation, also
///    later begin and later end first, the smallest arena kept) each go to the lowest aligned offset where
///    they meet none placed before them — Pisarchyk & Lee 2020, "Efficient
///    Memory Management for Deep Neural Net Inference" (arXiv:2001.03288),
///    "Greedy by Size for Offset Calculation", as TFLite's arena planner
///    does. Placed pieces are kept sorted by offset and the walk for the
///    next one stops at the first gap that holds it. Large tensors placed
///    first have the most room; small ones fill what is left. Beyond that
///    many, the rest go as in 2, in event order around the large ones (at
///    the offsets 1 gave them), avoiding those that begin during their life:
///    a merge-sort tree over the large pieces (sorted by begin; each run
///    sorted by offset with the running maximum of its ends) says when a
///    large piece first takes part of a hole (cached per hole) and moves a
///    candidate offset past the pieces it meets.
/// 2. **Best fit over time**, when 1 covered every allocation. Events in
///    order (frees before allocations at a position, larger first among
///    allocations); each allocation takes the smallest free hole that holds
///    it (Knuth, TAOCP vol. 1 §2.5), else the top of the arena. A hole free
///    at an allocation's begin stays free for its life: everything placed
///    later sees it.
///
/// Greedy by size packs swap- and recompute-heavy plans best (large holes
/// opened and refilled out of time order); best fit over time wins where
/// memory stays at its peak for long stretches (DTR's evictions).
/// docs/results.md gives the ratios on the zoo's plans.
///
/// Complexity, n allocations (a split one counts its pieces), h holes at
/// once (tens in training traces), m = min(n, greedy_by_size_blocks): greedy
/// by size O(m^2) at worst; the sweep O(n (log n + h)) plus O(log^2 m) per
/// question to the tree (a bounded number per allocation that lives while a
/// large one begins). Memory O(n + m log m). 100,000 allocations of a
/// training run take about 70 ms of CPU time (bench/bench_layout.cpp).
/// Deterministic: no hashing; ties go by input order.
///
/// Thread safety: `place` is a pure function; concurrent calls are safe.

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

#include "memplan/error.hpp"
#include "memplan/fwd.hpp"

namespace memplan {

/// The `end` of an allocation (or segment) that is live until the run ends.
inline constexpr index_t never_freed = std::numeric_limits<index_t>::max();

/// One contiguous piece of an allocation split in place: `bytes`, live from
/// the allocation's begin until `end` (exclusive; at the begin: never live).
struct segment {
  bytes_t bytes = 0;          ///< the piece's size
  index_t end = never_freed;  ///< the event at which the piece is released (`never_freed`: never)
};

/// One device allocation to place: `bytes`, live over the half-open event
/// interval [begin, end). An allocation live over an empty interval
/// (end == begin) is never live: it may share bytes with anything.
///
/// An allocation split in place into pieces released one by one (micro-
/// tensors, TSPLIT §V-A) names its pieces: `segments` > 0 entries of the
/// segment list from `first_segment`, back to back in that order from the
/// allocation's offset; `bytes` is then their sum and `end` the latest of
/// their ends. With `segments` == 0 the allocation is one piece.
struct lifetime {
  index_t begin = 0;           ///< the event at which the allocation is made
  index_t end = never_freed;   ///< the event at which it is freed, exclusive (`never_freed`: never)
  bytes_t bytes = 0;           ///< its size (the sum of its segments' where it has some)
  index_t first_segment = 0;   ///< its first piece in the segment list (with `segments` > 0)
  index_t segments = 0;        ///< how many pieces it is split into; 0: one piece
};

/// Where each allocation lies in the arena.
struct arena_layout {
  /// Per allocation, in input order: its offset, a multiple of the
  /// alignment (0 for an allocation that is never live).
  std::vector<bytes_t> offsets;
  /// The arena the layout needs: the highest byte a live piece takes (the
  /// offset + footprint of an allocation whose last piece is ever live).
  bytes_t arena_bytes = 0;
  /// The most footprint bytes live at once (a piece while it is live; the
  /// padding with the last piece): the lower bound on `arena_bytes`.
  bytes_t peak_live_bytes = 0;
};

/// How many of the largest allocations `place` lays out greedy by size
/// (O(m^2) at worst); the rest go best fit over time around them.
inline constexpr std::size_t greedy_by_size_blocks = 4096;

namespace detail::placement {

/// A live piece of an allocation: bytes [lo, hi) from its offset (or, once
/// placed, absolute), live over [begin, end) (end > begin, hi > lo).
struct piece {
  bytes_t lo = 0;
  bytes_t hi = 0;
  index_t begin = 0;
  index_t end = 0;
  std::size_t block = 0;
};

/// An allocation with at least one live piece.
struct block {
  std::size_t id = 0;  ///< its index in the input
  bytes_t footprint = 0;
  index_t begin = 0;
  index_t end = 0;        ///< the latest end of its live pieces
  bytes_t reach = 0;      ///< the highest `hi` of its live pieces
  std::size_t first = 0;  ///< its live pieces: pieces[first, last)
  std::size_t last = 0;
};

struct instance {
  bytes_t alignment = 1;
  std::vector<block> blocks;
  std::vector<piece> pieces;
};

[[nodiscard]] constexpr bytes_t align_up(bytes_t x, bytes_t alignment) noexcept {
  return (x + alignment - 1) & ~(alignment - 1);
}

/// The pieces of allocation `i`: its segments, or itself as one.
[[nodiscard]] inline std::span<const segment> segments_of(const lifetime& l, const segment& whole,
                                                          std::span<const segment> segments) {
  if (l.segments == 0) return {&whole, 1};
  return segments.subspan(static_cast<std::size_t>(l.first_segment), static_cast<std::size_t>(l.segments));
}

/// Checks allocation `i` and its segments.
inline void validate_one(std::size_t i, const lifetime& l, std::span<const segment> segments) {
  MEMPLAN_EXPECTS(l.begin >= 0, invalid_argument, "place: allocation ", i, ": begin must be non-negative, got ",
                  l.begin);
  MEMPLAN_EXPECTS(l.end >= l.begin, invalid_argument, "place: allocation ", i, ": end ", l.end, " is before begin ",
                  l.begin);
  MEMPLAN_EXPECTS(l.bytes >= 0, invalid_argument, "place: allocation ", i, ": bytes must be non-negative, got ",
                  l.bytes);
  if (l.segments == 0) return;
  MEMPLAN_EXPECTS(
      l.segments > 0 && l.first_segment >= 0 &&
          static_cast<std::size_t>(l.first_segment) + static_cast<std::size_t>(l.segments) <= segments.size(),
      invalid_argument, "place: allocation ", i, ": segments [", l.first_segment, ", ",
      static_cast<std::int64_t>(l.first_segment) + l.segments, ") are outside the ", segments.size(),
      " segments given");
  bytes_t sum = 0;
  index_t end = l.begin;
  for (index_t k = l.first_segment; k < l.first_segment + l.segments; ++k) {
    const segment& s = segments[static_cast<std::size_t>(k)];
    MEMPLAN_EXPECTS(s.bytes >= 0, invalid_argument, "place: allocation ", i, ": segment ", k,
                    ": bytes must be non-negative, got ", s.bytes);
    MEMPLAN_EXPECTS(s.end >= l.begin, invalid_argument, "place: allocation ", i, ": segment ", k, ": end ", s.end,
                    " is before the allocation's begin ", l.begin);
    MEMPLAN_EXPECTS(!__builtin_add_overflow(sum, s.bytes, &sum), invalid_argument, "place: allocation ", i,
                    ": its segments' bytes add up to more than 2^63 - 1");
    end = std::max(end, s.end);
  }
  MEMPLAN_EXPECTS(sum == l.bytes, invalid_argument, "place: allocation ", i, ": its segments hold ", sum,
                  " bytes, not its ", l.bytes);
  MEMPLAN_EXPECTS(end == l.end, invalid_argument, "place: allocation ", i, ": its segments end at ", end,
                  ", not at its end ", l.end);
}

/// Checks the input; \throws invalid_argument naming the allocation.
inline void validate(std::span<const lifetime> allocations, std::span<const segment> segments, bytes_t alignment) {
  MEMPLAN_EXPECTS(alignment > 0 && std::has_single_bit(static_cast<std::uint64_t>(alignment)), invalid_argument,
                  "place: alignment must be a positive power of two, got ", alignment);
  MEMPLAN_EXPECTS(allocations.size() + segments.size() <= std::numeric_limits<std::uint32_t>::max(), invalid_argument,
                  "place: at most 2^32 - 1 allocations and segments together, got ", allocations.size(), " and ",
                  segments.size());
  bytes_t total = 0;
  for (std::size_t i = 0; i < allocations.size(); ++i) {
    const lifetime& l = allocations[i];
    validate_one(i, l, segments);
    MEMPLAN_EXPECTS(l.bytes <= std::numeric_limits<bytes_t>::max() - alignment &&
                        !__builtin_add_overflow(total, align_up(l.bytes, alignment), &total),
                    invalid_argument, "place: allocation ", i, ": the footprints (", l.bytes, " bytes rounded up to ",
                    alignment, ") add up to more than 2^63 - 1");
  }
}

/// The allocations as blocks of live pieces (input checked).
[[nodiscard]] inline instance flatten(std::span<const lifetime> allocations, std::span<const segment> segments,
                                      bytes_t alignment) {
  instance in;
  in.alignment = alignment;
  in.blocks.reserve(allocations.size());
  in.pieces.reserve(allocations.size() + segments.size());
  for (std::size_t i = 0; i < allocations.size(); ++i) {
    const lifetime& l = allocations[i];
    const segment whole{l.bytes, l.end};
    const std::span<const segment> parts = segments_of(l, whole, segments);
    block b{.id = i,
            .footprint = align_up(l.bytes, alignment),
            .begin = l.begin,
            .end = l.begin,
            .reach = 0,
            .first = in.pieces.size(),
            .last = 0};
    bytes_t lo = 0;
    for (std::size_t k = 0; k < parts.size(); ++k) {
      // The last piece owns the padding up to the footprint.
      const bytes_t hi = k + 1 == parts.size() ? b.footprint : lo + parts[k].bytes;
      if (hi > lo && parts[k].end > l.begin) {
        in.pieces.push_back({lo, hi, l.begin, parts[k].end, in.blocks.size()});
        b.end = std::max(b.end, parts[k].end);
        b.reach = hi;
      }
      lo += parts[k].bytes;
    }
    b.last = in.pieces.size();
    if (b.last > b.first) in.blocks.push_back(b);
  }
  return in;
}

/// The highest offset + reach of the blocks at `offsets`.
[[nodiscard]] inline bytes_t arena_of(const instance& in, const std::vector<bytes_t>& offsets) {
  bytes_t arena = 0;
  for (std::size_t b = 0; b < in.blocks.size(); ++b) arena = std::max(arena, offsets[b] + in.blocks[b].reach);
  return arena;
}

/// How greedy by size orders blocks of the same footprint: by begin
/// (Pisarchyk & Lee), latest begin first, or latest end first. Training
/// runs make many tensors of one size (a transformer's layers), and which
/// of them goes lowest decides the holes the others find.
enum class size_ties : std::uint8_t { earlier_begin, later_begin, later_end };

/// The first `count` blocks in greedy by size's order (Pisarchyk & Lee):
/// footprint descending, then `ties`, then input order.
[[nodiscard]] inline std::vector<std::size_t> largest(const instance& in, std::size_t count,
                                                      size_ties ties = size_ties::earlier_begin) {
  std::vector<std::size_t> order(in.blocks.size());
  for (std::size_t b = 0; b < order.size(); ++b) order[b] = b;
  const auto before = [&](std::size_t x, std::size_t y) {
    const block& a = in.blocks[x];
    const block& b = in.blocks[y];
    if (a.footprint != b.footprint) return a.footprint > b.footprint;
    switch (ties) {
      case size_ties::earlier_begin:
        if (a.begin != b.begin) return a.begin < b.begin;
        break;
      case size_ties::later_begin:
        if (a.begin != b.begin) return a.begin > b.begin;
        break;
      case size_ties::later_end:
        if (a.end != b.end) return a.end > b.end;
        break;
    }
    return a.id < b.id;
  };
  count = std::min(count, order.size());
  const auto end = order.begin() + static_cast<std::ptrdiff_t>(count);
  std::nth_element(order.begin(), end, order.end(), before);
  std::sort(order.begin(), end, before);
  order.resize(count);
  return order;
}

/// The lowest offset at which block `b` meets none of `by_lo` (placed
/// pieces sorted by lo). One pass in lo order suffices for one live piece
/// (the pieces it must clear come in the order of the offsets they forbid);
/// a block of several pieces walks again until nothing moves it.
[[nodiscard]] inline bytes_t lowest_fit(const instance& in, const block& b, const std::vector<piece>& by_lo) {
  const std::span<const piece> own(in.pieces.data() + b.first, b.last - b.first);
  bytes_t x = 0;
  for (bool moved = true; moved;) {
    moved = false;
    for (const piece& q : by_lo) {
      if (q.lo >= x + b.reach) break;  // it and all after it lie above b
      if (q.begin >= b.end || b.begin >= q.end) continue;
      for (const piece& p : own) {
        if (q.begin < p.end && x + p.lo < q.hi && q.lo < x + p.hi) {
          x = align_up(q.hi - p.lo, in.alignment);
          moved = true;
        }
      }
    }
    if (own.size() == 1) break;
  }
  return x;
}

/// Places the blocks of `order`, in that order, each at its lowest fit
/// among those placed before it (Pisarchyk & Lee). \returns their
/// pieces at their offsets.
inline std::vector<piece> greedy_by_size(const instance& in, std::span<const std::size_t> order,
                                         std::vector<bytes_t>& offsets) {
  std::vector<piece> by_lo;
  for (const std::size_t index : order) {
    const block& b = in.blocks[index];
    const bytes_t x = lowest_fit(in, b, by_lo);
    offsets[index] = x;
    for (std::size_t k = b.first; k < b.last; ++k) {
      piece q = in.pieces[k];
      q.lo += x;
      q.hi += x;
      by_lo.insert(std::ranges::upper_bound(by_lo, q.lo, {}, &piece::lo), q);
    }
  }
  return by_lo;
}

/// A run of free bytes [start, end).
struct hole {
  bytes_t start = 0;
  bytes_t end = 0;
};

/// `free_space::sized::reserved` not worked out yet.
inline constexpr index_t unknown = -1;

/// The free bytes at one position of the event sweep: holes below `top`
/// (the end of the highest live piece), never touching it, and everything
/// from `top` up. The holes are kept twice, sorted by start (to merge) and
/// by size (best fit); training traces keep tens of holes at once, so
/// sorted vectors beat trees.
class free_space {
 public:
  /// A hole as best fit sees it, and (once asked) the first position after
  /// its making at which a fixed piece takes some of it (never_freed: none).
  struct sized {
    bytes_t size = 0;
    bytes_t start = 0;
    mutable index_t reserved = unknown;
  };

  [[nodiscard]] bytes_t top() const noexcept { return top_; }
  [[nodiscard]] bytes_t live() const noexcept { return live_; }
  /// The holes of at least `bytes`, smallest first.
  [[nodiscard]] std::span<const sized> at_least(bytes_t bytes) const {
    return {std::ranges::lower_bound(by_size_, sized{bytes, std::numeric_limits<bytes_t>::min()}, smaller),
            by_size_.end()};
  }

  /// Takes [lo, hi), which must be free.
  void occupy(bytes_t lo, bytes_t hi) {
    live_ += hi - lo;
    if (lo >= top_) {
      if (lo > top_) insert(holes_.end(), {top_, lo});
      top_ = hi;
      return;
    }
    const auto after = std::ranges::upper_bound(holes_, lo, {}, &hole::start);
    if (after == holes_.begin() || std::prev(after)->end < hi) {
      throw std::logic_error(detail::concat("place: bytes [", lo, ", ", hi, ") are taken (a bug in arena_layout.hpp)"));
    }
    const auto h = std::prev(after);  // holds [lo, hi)
    const hole was = *h;
    if (was.start < lo && hi < was.end) {
      replace(h, {was.start, lo});
      insert(std::next(h), {hi, was.end});
    } else if (was.start < lo) {
      replace(h, {was.start, lo});
    } else if (hi < was.end) {
      replace(h, {hi, was.end});
    } else {
      erase(h);
    }
  }

  /// Gives [lo, hi) back, merged with the free bytes beside it.
  void release(bytes_t lo, bytes_t hi) {
    live_ -= hi - lo;
    const auto next = std::ranges::lower_bound(holes_, lo, {}, &hole::start);
    const bool join_next = next != holes_.end() && next->start == hi;
    const bool join_before = next != holes_.begin() && std::prev(next)->end == lo;
    if (hi == top_) {  // never with join_next: holes end below the top
      top_ = join_before ? std::prev(next)->start : lo;
      if (join_before) erase(std::prev(next));
    } else if (join_before && join_next) {
      const bytes_t end = next->end;
      erase(replace(std::prev(next), {std::prev(next)->start, end}) + 1);
    } else if (join_before) {
      replace(std::prev(next), {std::prev(next)->start, hi});
    } else if (join_next) {
      replace(next, {lo, next->end});
    } else {
      insert(next, {lo, hi});
    }
  }

 private:
  using iterator = std::vector<hole>::iterator;

  static bool smaller(const sized& x, const sized& y) noexcept {
    return x.size != y.size ? x.size < y.size : x.start < y.start;
  }
  static sized size_of(const hole& h) noexcept { return {h.end - h.start, h.start}; }
  void index(const hole& h) { by_size_.insert(std::ranges::lower_bound(by_size_, size_of(h), smaller), size_of(h)); }
  void unindex(const hole& h) { by_size_.erase(std::ranges::lower_bound(by_size_, size_of(h), smaller)); }

  void insert(iterator at, const hole& h) {
    index(h);
    holes_.insert(at, h);
  }
  iterator replace(iterator at, const hole& h) {
    unindex(*at);
    index(h);
    *at = h;
    return at;
  }
  void erase(iterator at) {
    unindex(*at);
    holes_.erase(at);
  }

  std::vector<hole> holes_;  // by start
  std::vector<sized> by_size_;
  bytes_t top_ = 0;
  bytes_t live_ = 0;
};

/// The pieces of the blocks placed greedy by size, for the sweep to ask:
/// which of those beginning in (after, before) meet [x, x + bytes)? Sorted
/// by begin; a merge-sort tree (level k: runs of 2^k sorted by lo, with the
/// running maximum of hi) answers "the highest hi among pieces i1..i2 with
/// lo < y" in O(log^2) time; a few pieces are scanned instead.
class fixed_pieces {
 public:
  fixed_pieces() = default;
  explicit fixed_pieces(std::vector<piece> pieces) {
    std::ranges::sort(pieces, {}, &piece::begin);
    begins_.reserve(pieces.size());
    std::vector<std::pair<bytes_t, bytes_t>> level;  // (lo, hi)
    for (const piece& p : pieces) {
      begins_.push_back(p.begin);
      level.emplace_back(p.lo, p.hi);
    }
    for (std::size_t run = 1; !level.empty(); run *= 2) {
      if (run > 1) merge_runs(level, run);
      auto& maxima = levels_.emplace_back(level);
      for (std::size_t i = 1; i < maxima.size(); ++i) {
        if (i % run != 0) maxima[i].second = std::max(maxima[i].second, maxima[i - 1].second);
      }
      if (run >= level.size()) break;
    }
  }

  /// The pieces beginning in (after, before): [first, second) in begin order.
  [[nodiscard]] std::pair<std::size_t, std::size_t> beginning_in(index_t after, index_t before) const {
    return {static_cast<std::size_t>(std::ranges::upper_bound(begins_, after) - begins_.begin()),
            static_cast<std::size_t>(std::ranges::lower_bound(begins_, before) - begins_.begin())};
  }

  /// The first begin of a piece beginning in (after, ...) that meets
  /// [lo, hi); never_freed if none does.
  [[nodiscard]] index_t first_begin_meeting(index_t after, bytes_t lo, bytes_t hi) const {
    const auto i = first_meeting(beginning_in(after, never_freed).first, lo, hi);
    return i < begins_.size() ? begins_[i] : never_freed;
  }

  /// The lowest multiple of `alignment` >= x where [x, x + bytes) meets none
  /// of the pieces `range`, moving past one piece (or a stack of them) at a
  /// time; after `max_moves` moves, above all of them. Stops early (with a
  /// value above `limit`) once above `limit`.
  [[nodiscard]] bytes_t clear_from(bytes_t x, bytes_t bytes, std::pair<std::size_t, std::size_t> range,
                                   bytes_t alignment, bytes_t limit = std::numeric_limits<bytes_t>::max()) const {
    const auto [i1, i2] = range;
    for (int moves = 0; i1 < i2 && x <= limit; ++moves) {
      if (moves == max_moves) {  // above every piece that could meet it up to the limit
        const bytes_t below = limit == std::numeric_limits<bytes_t>::max() ? limit : limit + bytes;
        return std::max(x, align_up(highest_hi(i1, i2, below), alignment));
      }
      const bytes_t hi = i2 - i1 <= scan_limit ? scanned_hi(i1, i2, x, x + bytes) : highest_hi(i1, i2, x + bytes);
      if (hi <= x) return x;
      x = align_up(hi, alignment);
    }
    return x;
  }

 private:
  static constexpr std::size_t scan_limit = 128;
  static constexpr int max_moves = 3;

  /// Sorts each run of `run` pieces by lo, from its two sorted halves.
  static void merge_runs(std::vector<std::pair<bytes_t, bytes_t>>& level, std::size_t run) {
    for (std::size_t start = 0; start < level.size(); start += run) {
      const auto at = [&](std::size_t i) {
        return level.begin() + static_cast<std::ptrdiff_t>(std::min(i, level.size()));
      };
      std::inplace_merge(at(start), at(start + run / 2), at(start + run));
    }
  }

  /// The highest hi among pieces [i1, i2) that meet [lo, hi) (0 if none).
  [[nodiscard]] bytes_t scanned_hi(std::size_t i1, std::size_t i2, bytes_t lo, bytes_t hi) const {
    bytes_t highest = 0;
    for (std::size_t i = i1; i < i2; ++i) {
      const auto [plo, phi] = levels_[0][i];
      if (plo < hi && lo < phi) highest = std::max(highest, phi);
    }
    return highest;
  }

  /// The highest hi among the pieces of run `run` of level `level` with
  /// lo < below (0 if none).
  [[nodiscard]] bytes_t run_hi(std::size_t level, std::size_t run, bytes_t below) const {
    const auto& v = levels_[level];
    const auto first = v.begin() + static_cast<std::ptrdiff_t>(run << level);
    const auto last = v.begin() + static_cast<std::ptrdiff_t>(std::min(v.size(), (run + 1) << level));
    const auto end = std::lower_bound(first, last, std::pair{below, std::numeric_limits<bytes_t>::min()});
    return end != first ? std::prev(end)->second : 0;
  }

  /// The highest hi among pieces [i1, i2) with lo < below (0 if none).
  [[nodiscard]] bytes_t highest_hi(std::size_t i1, std::size_t i2, bytes_t below) const {
    bytes_t hi = 0;
    for (std::size_t level = 0; i1 < i2; ++level, i1 >>= 1, i2 >>= 1) {
      if (i1 & 1) hi = std::max(hi, run_hi(level, i1++, below));
      if (i2 & 1) hi = std::max(hi, run_hi(level, --i2, below));
    }
    return hi;
  }

  /// The first piece from `i` on (in begin order) that meets [lo, hi), or
  /// the number of pieces: the largest runs from i on are asked left to
  /// right, then the first that has one is halved down to it.
  [[nodiscard]] std::size_t first_meeting(std::size_t i, bytes_t lo, bytes_t hi) const {
    const std::size_t top = levels_.size() - 1;
    while (i < begins_.size()) {
      std::size_t level = i == 0 ? top : std::min<std::size_t>(top, static_cast<std::size_t>(std::countr_zero(i)));
      if (run_hi(level, i >> level, hi) <= lo) {
        i += std::size_t{1} << level;
        continue;
      }
      for (; level > 0; --level) {  // the left half if it has one, else the right
        if (run_hi(level - 1, i >> (level - 1), hi) <= lo) i += std::size_t{1} << (level - 1);
      }
      return i;
    }
    return begins_.size();
  }

  std::vector<index_t> begins_;
  std::vector<std::vector<std::pair<bytes_t, bytes_t>>> levels_;
};

/// The order of the sweep: blocks by begin (then larger first, then input
/// order) and pieces by end (those never freed left out).
struct sweep_order {
  std::vector<std::size_t> blocks;
  std::vector<std::size_t> releases;
};

/// Sorts `keys` (position << 32 | index) and \returns the indices.
[[nodiscard]] inline std::vector<std::size_t> indices_by_position(std::vector<std::uint64_t>& keys) {
  if (!std::ranges::is_sorted(keys)) std::ranges::sort(keys);  // allocations often come in event order
  std::vector<std::size_t> out(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) out[i] = static_cast<std::size_t>(keys[i] & 0xFFFFFFFFU);
  return out;
}

[[nodiscard]] inline sweep_order make_sweep_order(const instance& in) {
  const auto key = [](index_t position, std::size_t i) {
    return static_cast<std::uint64_t>(position) << 32 | static_cast<std::uint64_t>(i);
  };
  std::vector<std::uint64_t> keys;
  keys.reserve(std::max(in.blocks.size(), in.pieces.size()));
  for (std::size_t b = 0; b < in.blocks.size(); ++b) keys.push_back(key(in.blocks[b].begin, b));
  sweep_order order{indices_by_position(keys), {}};
  // Larger first among blocks that begin together (rare: one event, one position).
  for (auto run = order.blocks.begin(); run != order.blocks.end();) {
    const auto same = std::ranges::find_if(run, order.blocks.end(),
                                           [&](std::size_t b) { return in.blocks[b].begin != in.blocks[*run].begin; });
    std::sort(run, same, [&](std::size_t x, std::size_t y) {
      return in.blocks[x].footprint != in.blocks[y].footprint ? in.blocks[x].footprint > in.blocks[y].footprint : x < y;
    });
    run = same;
  }
  keys.clear();
  for (std::size_t k = 0; k < in.pieces.size(); ++k) {
    if (in.pieces[k].end != never_freed) keys.push_back(key(in.pieces[k].end, k));
  }
  order.releases = indices_by_position(keys);
  return order;
}

/// Of the holes, smallest first, that fixed pieces beginning during a
/// block's life take some of: how many best fit searches for room beside
/// those pieces, and how many it passes over before it takes the top.
inline constexpr std::size_t partial_tries = 2;
inline constexpr std::size_t hole_tries = 16;

/// Block b's offset at its begin: the smallest hole that holds it (and
/// that no fixed piece beginning during its life takes any of), else the
/// top (clear of those pieces).
[[nodiscard]] inline bytes_t best_fit(const instance& in, const block& b, const free_space& space,
                                      const fixed_pieces& fixed) {
  const auto range = fixed.beginning_in(b.begin, b.end);
  const bytes_t a = in.alignment;
  std::size_t tries = 0;
  for (const auto& [size, start, reserved] : space.at_least(b.reach)) {
    const bytes_t x = align_up(start, a);
    if (x + b.reach > start + size) continue;  // too small once aligned (after a split piece)
    if (range.first >= range.second) return x;
    if (reserved == unknown) reserved = fixed.first_begin_meeting(b.begin, start, start + size);
    if (reserved >= b.end) return x;
    if (tries < partial_tries) {  // some of it may do
      const bytes_t clear = fixed.clear_from(x, b.reach, range, a, start + size - b.reach);
      if (clear + b.reach <= start + size) return clear;
    }
    if (++tries == hole_tries) break;
  }
  return fixed.clear_from(align_up(space.top(), a), b.reach, range, a);
}

/// Places the blocks not `fixed` best fit over time, in event order, around
/// the fixed ones (at `offsets` already, their pieces in `index`).
/// \returns the peak of live bytes.
inline bytes_t best_fit_over_time(const instance& in, const sweep_order& order, const std::vector<char>& fixed,
                                  const fixed_pieces& index, std::vector<bytes_t>& offsets) {
  free_space space;
  bytes_t peak = 0;
  std::size_t next_release = 0;
  const auto occupy = [&](std::size_t i) {
    for (std::size_t k = in.blocks[i].first; k < in.blocks[i].last; ++k) {
      space.occupy(offsets[i] + in.pieces[k].lo, offsets[i] + in.pieces[k].hi);
    }
  };
  for (auto run = order.blocks.begin(); run != order.blocks.end();) {
    const index_t position = in.blocks[*run].begin;
    for (; next_release < order.releases.size(); ++next_release) {  // frees first
      const piece& p = in.pieces[order.releases[next_release]];
      if (p.end > position) break;
      space.release(offsets[p.block] + p.lo, offsets[p.block] + p.hi);
    }
    const auto same =
        std::find_if(run, order.blocks.end(), [&](std::size_t b) { return in.blocks[b].begin != position; });
    for (auto i = run; i != same; ++i) {  // then the fixed blocks take their places
      if (fixed[*i]) occupy(*i);
    }
    for (auto i = run; i != same; ++i) {
      if (fixed[*i]) continue;
      offsets[*i] = best_fit(in, in.blocks[*i], space, index);
      occupy(*i);
    }
    peak = std::max(peak, space.live());
    run = same;
  }
  return peak;
}

/// The layouts `place` chooses from (file comment) and the peak of live bytes.
struct candidates {
  std::vector<bytes_t> greedy;  ///< 1: the largest greedy by size, the rest best fit around them
  std::vector<bytes_t> swept;   ///< 2: all best fit over time (empty when 1 covers only the largest)
  bytes_t peak = 0;
};

/// `greedy` lays out the `greedy_blocks` largest greedy by size (tests ask
/// for few, to try the sweep around them on small traces).
[[nodiscard]] inline candidates lay_out(const instance& in, std::size_t greedy_blocks = greedy_by_size_blocks) {
  const sweep_order order = make_sweep_order(in);
  candidates c{std::vector<bytes_t>(in.blocks.size(), 0), {}, 0};
  std::vector<char> fixed(in.blocks.size(), 0);
  const std::vector<std::size_t> large = largest(in, greedy_blocks);
  std::vector<piece> placed = greedy_by_size(in, large, c.greedy);
  if (large.size() == in.blocks.size()) {
    // Every block greedy by size: its other orders of equal footprints too, the smallest arena kept.
    for (const size_ties ties : {size_ties::later_begin, size_ties::later_end}) {
      std::vector<bytes_t> other(in.blocks.size(), 0);
      (void)greedy_by_size(in, largest(in, greedy_blocks, ties), other);
      if (arena_of(in, other) < arena_of(in, c.greedy)) c.greedy = std::move(other);
    }
    c.swept.assign(in.blocks.size(), 0);
    c.peak = best_fit_over_time(in, order, fixed, fixed_pieces{}, c.swept);
    return c;
  }
  for (const std::size_t b : large) fixed[b] = 1;
  c.peak = best_fit_over_time(in, order, fixed, fixed_pieces(std::move(placed)), c.greedy);
  return c;
}

}  // namespace detail::placement

/// Lays out `allocations` in one arena: no two pieces live at the same time
/// share a byte, and the arena is as small as the heuristics find (file
/// comment).
///
/// Each allocation's footprint is its bytes rounded up to `alignment`, and
/// it starts at a multiple of `alignment`; a piece lies at the allocation's
/// offset + the bytes of the pieces before it, the last one with the
/// padding. Two pieces conflict when their live intervals and their bytes
/// overlap; zero bytes and empty intervals never conflict.
///
/// @code
/// const std::vector<memplan::lifetime> a{{.begin = 0, .end = 2, .bytes = 100},
///                                        {.begin = 1, .end = 3, .bytes = 512},
///                                        {.begin = 2, .end = 4, .bytes = 256}};
/// const auto l = memplan::place(a, 256);  // offsets {512, 0, 512}, arena 768, peak 768
/// @endcode
///
/// @param allocations what to place, each live over [begin, end)
/// @param segments    the pieces that split allocations name (lifetime::first_segment)
/// @param alignment   a power of two (256: what cudaMalloc guarantees)
/// @return per allocation its offset, the arena bytes and the peak of live bytes
/// @throws invalid_argument naming the allocation (or segment) and the numbers:
///         alignment not a positive power of two, a negative begin or byte count,
///         end < begin, segments outside the list or not adding up to the
///         allocation's bytes and end, footprints adding up past 2^63 - 1;
///         std::logic_error only for a bug here (bytes placed twice), never silently
[[nodiscard]] inline arena_layout place(std::span<const lifetime> allocations, std::span<const segment> segments,
                                        bytes_t alignment) {
  namespace p = detail::placement;
  p::validate(allocations, segments, alignment);
  const p::instance in = p::flatten(allocations, segments, alignment);
  const p::candidates c = p::lay_out(in);
  const bytes_t greedy = p::arena_of(in, c.greedy);
  const bytes_t swept = c.swept.empty() ? greedy : p::arena_of(in, c.swept);
  const std::vector<bytes_t>& best = swept < greedy ? c.swept : c.greedy;
  arena_layout out;
  out.offsets.assign(allocations.size(), 0);
  for (std::size_t b = 0; b < in.blocks.size(); ++b) out.offsets[in.blocks[b].id] = best[b];
  out.arena_bytes = std::min(greedy, swept);
  out.peak_live_bytes = c.peak;
  return out;
}

/// `place` for allocations none of which is split.
/// \throws invalid_argument as the other overload; a lifetime naming segments
///         is outside the (empty) segment list.
[[nodiscard]] inline arena_layout place(std::span<const lifetime> allocations, bytes_t alignment) {
  return place(allocations, {}, alignment);
}

}  // namespace memplan
