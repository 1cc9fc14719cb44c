// The offline arena layout (arena_layout.hpp): hand-computed layouts,
// alignment, split allocations, and random traces checked by an independent
// O(n^2) conflict check.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "memplan/arena_layout.hpp"

using namespace memplan;

namespace {

/// A trace: allocations and the segments the split ones name.
struct trace {
  std::vector<lifetime> allocations;
  std::vector<segment> segments;
};

/// One live piece at its absolute bytes [lo, hi), live over [begin, end).
struct placed_piece {
  bytes_t lo = 0;
  bytes_t hi = 0;
  index_t begin = 0;
  index_t end = 0;
  std::size_t allocation = 0;
};

/// The pieces of `t` at the layout's offsets, read from the rules in
/// arena_layout.hpp's comments, not from its code.
std::vector<placed_piece> pieces_of(const trace& t, const arena_layout& l, bytes_t alignment) {
  std::vector<placed_piece> out;
  for (std::size_t i = 0; i < t.allocations.size(); ++i) {
    const lifetime& a = t.allocations[i];
    std::vector<segment> parts{{a.bytes, a.end}};
    if (a.segments > 0) {
      parts.assign(t.segments.begin() + a.first_segment, t.segments.begin() + a.first_segment + a.segments);
    }
    const bytes_t footprint = (a.bytes + alignment - 1) / alignment * alignment;
    bytes_t at = l.offsets[i];
    for (std::size_t k = 0; k < parts.size(); ++k) {
      const bytes_t end = k + 1 == parts.size() ? l.offsets[i] + footprint : at + parts[k].bytes;
      if (end > at && parts[k].end > a.begin) out.push_back({at, end, a.begin, parts[k].end, i});
      at += parts[k].bytes;
    }
  }
  return out;
}

/// The first pair of pieces of different allocations live at once on the
/// same bytes, as "i/j", or "" if none.
std::string first_conflict(const std::vector<placed_piece>& pieces) {
  for (std::size_t x = 0; x < pieces.size(); ++x) {
    for (std::size_t y = x + 1; y < pieces.size(); ++y) {
      const placed_piece& p = pieces[x];
      const placed_piece& q = pieces[y];
      if (p.allocation != q.allocation && p.begin < q.end && q.begin < p.end && p.lo < q.hi && q.lo < p.hi) {
        return std::to_string(p.allocation) + "/" + std::to_string(q.allocation);
      }
    }
  }
  return "";
}

/// The most piece bytes live at any position, by brute force over positions.
bytes_t brute_peak(const std::vector<placed_piece>& pieces) {
  bytes_t peak = 0;
  for (const placed_piece& at : pieces) {  // the live bytes only rise at a begin
    bytes_t live = 0;
    for (const placed_piece& p : pieces) {
      if (p.begin <= at.begin && at.begin < p.end) live += p.hi - p.lo;
    }
    peak = std::max(peak, live);
  }
  return peak;
}

/// A random trace: sizes over six orders of magnitude, short and long
/// lives, some allocations split into 2-5 pieces released one by one, some
/// never freed, zero bytes and empty lives now and then.
trace random_trace(std::size_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto uniform = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  trace t;
  for (std::size_t i = 0; i < count; ++i) {
    lifetime a;
    a.begin = static_cast<index_t>(uniform(0, static_cast<std::int64_t>(count)));
    const std::int64_t life = uniform(0, 9) < 7 ? uniform(0, 20) : uniform(0, static_cast<std::int64_t>(count));
    a.end = uniform(0, 30) == 0 ? never_freed : static_cast<index_t>(a.begin + life);
    a.bytes = uniform(0, 20) == 0 ? 0 : bytes_t{1} << uniform(4, 24);
    a.bytes += uniform(0, a.bytes / 2);
    if (uniform(0, 5) == 0 && a.end != never_freed) {  // split in place
      const auto parts = static_cast<index_t>(uniform(2, 5));
      a.first_segment = static_cast<index_t>(t.segments.size());
      a.segments = parts;
      for (index_t k = 0; k < parts; ++k) {
        const bytes_t bytes = a.bytes * (k + 1) / parts - a.bytes * k / parts;
        t.segments.push_back({bytes, k == 0 ? a.end : static_cast<index_t>(uniform(a.begin, a.end))});
      }
    }
    t.allocations.push_back(a);
  }
  return t;
}

/// Checks everything `place` promises for `t`.
void check_layout(const trace& t, bytes_t alignment) {
  const arena_layout l = place(t.allocations, t.segments, alignment);
  REQUIRE(l.offsets.size() == t.allocations.size());
  for (const bytes_t offset : l.offsets) CHECK(offset % alignment == 0);
  const auto pieces = pieces_of(t, l, alignment);
  CHECK(first_conflict(pieces) == "");
  bytes_t arena = 0;
  for (const placed_piece& p : pieces) arena = std::max(arena, p.hi);
  CHECK(l.arena_bytes == arena);
  CHECK(l.peak_live_bytes == brute_peak(pieces));
  CHECK(l.arena_bytes >= l.peak_live_bytes);
}

}  // namespace

TEST_CASE("three allocations laid out by hand") {
  // Footprints 256, 512, 256; live [0,2), [1,3), [2,4). Greedy by size puts
  // the 512 at 0, then allocation 0 (it begins first) above it at 512, then
  // allocation 2 at 512 too: allocation 0 has gone by position 2.
  const std::vector<lifetime> a{
      {.begin = 0, .end = 2, .bytes = 100}, {.begin = 1, .end = 3, .bytes = 512}, {.begin = 2, .end = 4, .bytes = 256}};
  const arena_layout l = place(a, 256);
  CHECK(l.offsets == std::vector<bytes_t>{512, 0, 512});
  CHECK(l.arena_bytes == 768);
  CHECK(l.peak_live_bytes == 768);  // 256 + 512 at positions 1 and 2

  // 1 KiB over [0,3), 512 B over [1,2) and [2,4): the two small ones share
  // bytes 1024..1535, one after the other.
  const std::vector<lifetime> b{{.begin = 0, .end = 3, .bytes = 1024},
                                {.begin = 1, .end = 2, .bytes = 512},
                                {.begin = 2, .end = 4, .bytes = 512}};
  const arena_layout m = place(b, 256);
  CHECK(m.offsets == std::vector<bytes_t>{0, 1024, 1024});
  CHECK(m.arena_bytes == 1536);
  CHECK(m.peak_live_bytes == 1536);
}

TEST_CASE("greedy by size tries later blocks first among equal footprints") {
  // A [0,4) 2 B, B [4,7) 1 B, C [5,7) 2 B, D [2,5) 2 B; peak 4 (A and D).
  // Earlier begin first: A 0, D 2, C 0 (D has ended), then B meets C at 0
  // and D at 2: 4, arena 5. Later begin first: C 0, D 0, A 2, B 2: arena 4.
  const std::vector<lifetime> a{{.begin = 0, .end = 4, .bytes = 2},
                                {.begin = 4, .end = 7, .bytes = 1},
                                {.begin = 5, .end = 7, .bytes = 2},
                                {.begin = 2, .end = 5, .bytes = 2}};
  namespace pp = detail::placement;
  const pp::instance in = pp::flatten(a, {}, 1);
  std::vector<bytes_t> by_begin(4, 0);
  (void)pp::greedy_by_size(in, pp::largest(in, 4), by_begin);
  CHECK(by_begin == std::vector<bytes_t>{0, 4, 0, 2});
  CHECK(pp::arena_of(in, by_begin) == 5);
  const pp::candidates c = pp::lay_out(in);
  CHECK(c.greedy == std::vector<bytes_t>{2, 2, 0, 0});
  CHECK(pp::arena_of(in, c.greedy) == 4);
  CHECK(c.peak == 4);
}

TEST_CASE("footprints are rounded up to the alignment") {
  const std::vector<lifetime> one{{.begin = 0, .end = 1, .bytes = 100}};
  CHECK(place(one, 256).arena_bytes == 256);
  CHECK(place(one, 256).peak_live_bytes == 256);
  CHECK(place(one, 64).arena_bytes == 128);
  CHECK(place(one, 1).arena_bytes == 100);
  // Two of 100 B live together: the second starts at the next multiple of 256.
  const std::vector<lifetime> two{{.begin = 0, .end = 2, .bytes = 100}, {.begin = 1, .end = 3, .bytes = 100}};
  const arena_layout l = place(two, 256);
  CHECK(std::ranges::minmax(l.offsets).min == 0);
  CHECK(std::ranges::minmax(l.offsets).max == 256);
  CHECK(l.arena_bytes == 512);
}

TEST_CASE("zero bytes and empty lives take no room") {
  const std::vector<lifetime> a{{.begin = 0, .end = 4, .bytes = 256},
                                {.begin = 1, .end = 3, .bytes = 0},
                                {.begin = 2, .end = 2, .bytes = 4096},
                                {.begin = 5, .end = never_freed, .bytes = 256}};
  const arena_layout l = place(a, 256);
  CHECK(l.offsets == std::vector<bytes_t>{0, 0, 0, 0});
  CHECK(l.arena_bytes == 256);
  CHECK(l.peak_live_bytes == 256);
  CHECK(place(std::span<const lifetime>{}, 256).arena_bytes == 0);
}

TEST_CASE("a split allocation's released piece is reused") {
  // S: 512 B from position 0 in two pieces of 256, the first released at 2,
  // the second at 5. T: 256 B over [3,5) fits in S's first piece. Whole, S
  // would push T to 512 (arena 768).
  const std::vector<segment> segments{{.bytes = 256, .end = 2}, {.bytes = 256, .end = 5}};
  const std::vector<lifetime> a{{.begin = 0, .end = 5, .bytes = 512, .first_segment = 0, .segments = 2},
                                {.begin = 3, .end = 5, .bytes = 256}};
  const arena_layout l = place(a, segments, 256);
  CHECK(l.offsets == std::vector<bytes_t>{0, 0});
  CHECK(l.arena_bytes == 512);
  CHECK(l.peak_live_bytes == 512);
  const std::vector<lifetime> whole{{.begin = 0, .end = 5, .bytes = 512}, {.begin = 3, .end = 5, .bytes = 256}};
  CHECK(place(whole, 256).arena_bytes == 768);

  // The last piece owns the padding: pieces of 100 and 100 B in a 256 B
  // footprint take [0,100) and [100,256). With the second released first,
  // a 156 B allocation fits in [100,256) while the first is still live.
  const std::vector<segment> padded{{.bytes = 100, .end = 6}, {.bytes = 100, .end = 2}};
  const std::vector<lifetime> b{{.begin = 0, .end = 6, .bytes = 200, .first_segment = 0, .segments = 2},
                                {.begin = 3, .end = 5, .bytes = 100}};
  const arena_layout m = place(b, padded, 256);
  CHECK(m.offsets == std::vector<bytes_t>{0, 256});  // 100 B needs a 256-aligned start
  CHECK(m.peak_live_bytes == 356);                   // at 3: [0,100) and b[1]'s 256 B footprint
  const std::vector<segment> tail{{.bytes = 100, .end = 6}, {.bytes = 100, .end = 2}};
  const std::vector<lifetime> c{{.begin = 0, .end = 6, .bytes = 200, .first_segment = 0, .segments = 2},
                                {.begin = 3, .end = 5, .bytes = 100}};
  CHECK(place(c, tail, 64).offsets == std::vector<bytes_t>{0, 128});  // [128,256) is free from position 2
}

TEST_CASE("random traces: no conflicts, arena >= peak, aligned, deterministic") {
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    CAPTURE(seed);
    const trace t = random_trace(seed % 4 == 0 ? 600 : 60, seed);
    check_layout(t, seed % 3 == 0 ? 64 : 256);
    const arena_layout first = place(t.allocations, t.segments, 256);
    const arena_layout again = place(t.allocations, t.segments, 256);
    CHECK(first.offsets == again.offsets);
    CHECK(first.arena_bytes == again.arena_bytes);
  }
}

TEST_CASE("random traces beyond greedy_by_size_blocks: no conflicts") {
  // The largest greedy by size, the rest best fit around them.
  const trace t = random_trace(greedy_by_size_blocks + 1500, 7);
  check_layout(t, 256);
}

/// Checks `detail::placement::lay_out`'s first layout with the
/// `greedy_blocks` largest greedy by size, the rest best fit around them.
void check_greedy_then_best_fit(const trace& t, std::size_t greedy_blocks, bytes_t alignment) {
  const auto in = detail::placement::flatten(t.allocations, t.segments, alignment);
  const auto c = detail::placement::lay_out(in, greedy_blocks);
  arena_layout l{std::vector<bytes_t>(t.allocations.size(), 0), 0, 0};
  for (std::size_t b = 0; b < in.blocks.size(); ++b) l.offsets[in.blocks[b].id] = c.greedy[b];
  const auto pieces = pieces_of(t, l, alignment);
  CHECK(first_conflict(pieces) == "");
  CHECK(c.peak == brute_peak(pieces));
  for (const bytes_t offset : l.offsets) CHECK(offset % alignment == 0);
}

TEST_CASE("best fit around a few large allocations placed greedy by size: no conflicts") {
  // The path above on small traces: the 1, 4, 16 or 64 largest greedy by size.
  for (std::uint64_t seed = 1; seed <= 160; ++seed) {
    CAPTURE(seed);
    const trace t = random_trace(seed % 8 == 0 ? 500 : 120, seed * 7919);
    check_greedy_then_best_fit(t, std::size_t{1} << (2 * (seed % 4)), bytes_t{1} << (4 * (seed % 3)));
  }
  // Once moved above the pieces that begin in its life, a block must clear
  // those just above the hole's limit too (a bug this trace found).
  check_greedy_then_best_fit(random_trace(700, std::uint64_t{324} * 7919), 30, 1);
}

TEST_CASE("bad input names the allocation and the numbers") {
  const auto one = [](lifetime a) { return std::vector<lifetime>{{.begin = 0, .end = 1, .bytes = 8}, a}; };
  CHECK_THROWS_WITH_AS((void)place(one({.begin = 5, .end = 3, .bytes = 8}), 256),
                       "place: allocation 1: end 3 is before begin 5", invalid_argument);
  CHECK_THROWS_WITH_AS((void)place(one({.begin = 0, .end = 3, .bytes = -8}), 256),
                       "place: allocation 1: bytes must be non-negative, got -8", invalid_argument);
  CHECK_THROWS_WITH_AS((void)place(one({.begin = -1, .end = 3, .bytes = 8}), 256),
                       "place: allocation 1: begin must be non-negative, got -1", invalid_argument);
  for (const bytes_t alignment : {bytes_t{0}, bytes_t{-256}, bytes_t{100}}) {
    CHECK_THROWS_WITH_AS((void)place(one({}), alignment),
                         ("place: alignment must be a positive power of two, got " + std::to_string(alignment)).c_str(),
                         invalid_argument);
  }
  CHECK_THROWS_WITH_AS((void)place(one({.begin = 0, .end = 3, .bytes = std::numeric_limits<bytes_t>::max() - 10}), 256),
                       "place: allocation 1: the footprints (9223372036854775797 bytes rounded up to 256) add up "
                       "to more than 2^63 - 1",
                       invalid_argument);
}

TEST_CASE("bad segments name the allocation, the segment and the numbers") {
  const std::vector<segment> s{{.bytes = 256, .end = 2}, {.bytes = 256, .end = 5}, {.bytes = -1, .end = 5}};
  const auto with = [](lifetime a) { return std::vector<lifetime>{a}; };
  CHECK_THROWS_WITH_AS(
      (void)place(with({.begin = 0, .end = 5, .bytes = 512, .first_segment = 1, .segments = 3}), s, 256),
      "place: allocation 0: segments [1, 4) are outside the 3 segments given", invalid_argument);
  CHECK_THROWS_WITH_AS(
      (void)place(with({.begin = 0, .end = 5, .bytes = 500, .first_segment = 0, .segments = 2}), s, 256),
      "place: allocation 0: its segments hold 512 bytes, not its 500", invalid_argument);
  CHECK_THROWS_WITH_AS(
      (void)place(with({.begin = 0, .end = 7, .bytes = 512, .first_segment = 0, .segments = 2}), s, 256),
      "place: allocation 0: its segments end at 5, not at its end 7", invalid_argument);
  CHECK_THROWS_WITH_AS(
      (void)place(with({.begin = 3, .end = 5, .bytes = 512, .first_segment = 0, .segments = 2}), s, 256),
      "place: allocation 0: segment 0: end 2 is before the allocation's begin 3", invalid_argument);
  CHECK_THROWS_WITH_AS(
      (void)place(with({.begin = 0, .end = 5, .bytes = 255, .first_segment = 1, .segments = 2}), s, 256),
      "place: allocation 0: segment 2: bytes must be non-negative, got -1", invalid_argument);
  // Without a segment list, a lifetime naming segments is outside it.
  CHECK_THROWS_WITH_AS((void)place(with({.begin = 0, .end = 5, .bytes = 512, .first_segment = 0, .segments = 2}), 256),
                       "place: allocation 0: segments [0, 2) are outside the 0 segments given", invalid_argument);
}
