#pragma once
/// \file
/// `runtime::caching_allocator`: a model of PyTorch's CUDA caching allocator
/// (c10/cuda/CUDACachingAllocator.cpp) inside a device arena of a fixed
/// size, for the online policies (dtr, delta), which allocate as a
/// framework does — one request at a time, with no plan ahead — so that the
/// fragmentation it causes, and the time its driver calls take, are in
/// their numbers (DELTA §5.2-5.3: DTR lost most of an 80 GB card to it).
///
/// The rules (constants in cost/allocator_spec.hpp, PyTorch's by default):
/// - a request is rounded up to 512 B (and to the device's alignment);
/// - requests up to 1 MiB use the small pool, larger ones the large pool;
///   a pool's free blocks are searched best fit, by (size, address);
/// - a block larger than the request is split, its remainder kept as a free
///   block if it is at least 512 B (small pool) or more than 1 MiB (large);
/// - a freed block merges with its free neighbours inside its segment only
///   (never across segments), and stays cached in its pool;
/// - no free block fits: a new segment is "cudaMalloc'ed" — 2 MiB (small
///   pool), 20 MiB (large requests under 10 MiB), else the request rounded
///   up to 2 MiB — placed first fit in the arena; no room: every cached
///   segment that is wholly free is "cudaFree'd" (release_cached_blocks)
///   and the placement is tried once more; still no room: it fails.
/// One stream: blocks are not tied to the stream that allocated them (the
/// framework allocates on its compute stream).
///
/// Every allocation gets an arena offset. Freed bytes carry a
/// `release_clock`, per stream the latest action that must end before they
/// are reused; an allocation returns the clock of the bytes it reuses, so
/// that the action making it can wait for those (plan_layout.hpp: bytes are
/// shared only by allocations one of which is freed before the other is made).
///
/// Not thread-safe.

#include <algorithm>
#include <array>
#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

#include "memplan/cost/allocator_spec.hpp"
#include "memplan/error.hpp"
#include "memplan/fwd.hpp"
#include "memplan/plan.hpp"

namespace memplan::runtime {

/// Per stream, the latest action that must have ended before bytes freed
/// with this clock are reused; no_index: none.
using release_clock = std::array<index_t, stream_count>;
/// The clock of bytes never used: nothing to wait for.
inline constexpr release_clock no_release = no_stream_actions;

/// Per stream, the later of two clocks' actions.
[[nodiscard]] constexpr release_clock latest(const release_clock& a, const release_clock& b) noexcept {
  release_clock c = a;
  for (std::size_t k = 0; k < c.size(); ++k) c[k] = std::max(c[k], b[k]);
  return c;
}

/// PyTorch's caching allocator, modelled in an arena (see the file comment):
/// blocks out of cached segments in two pools, offsets instead of pointers.
class caching_allocator final {
 public:
  /// A block handed out: `block` names it for `free` (no_index for a
  /// request of 0 bytes, which takes no memory); `after`: the clock of the
  /// bytes it reuses.
  struct allocation {
    index_t block = no_index;  ///< the block's name, for `free`
    bytes_t offset = 0;        ///< where the block starts in the arena
    bytes_t size = 0;  ///< the block's bytes: the request rounded, or more where a remainder was too small to keep
    release_clock after = no_release;  ///< wait for these actions before writing the block
  };
  /// Driver calls so far.
  struct calls {
    index_t mallocs = 0;  ///< segments made (cudaMalloc)
    index_t frees = 0;    ///< cached segments given back (cudaFree)
    index_t flushes = 0;  ///< release_cached_blocks: a synchronisation of the device each
  };

  /// An arena of `arena` bytes on a device that aligns allocations to
  /// `alignment` (a power of two).
  /// \throws invalid_argument on a negative arena, an alignment that is not a
  ///         power of two, or a spec with a non-positive granularity or
  ///         rounding, or negative sizes or costs.
  caching_allocator(bytes_t arena, bytes_t alignment, const allocator_spec& spec) : arena_(arena), spec_(spec) {
    MEMPLAN_EXPECTS(arena >= 0, invalid_argument, "caching allocator: the arena must be non-negative, got ", arena);
    MEMPLAN_EXPECTS(alignment > 0 && (alignment & (alignment - 1)) == 0, invalid_argument,
                    "caching allocator: the alignment must be a power of two, got ", alignment);
    MEMPLAN_EXPECTS(spec.granularity > 0 && spec.large_rounding > 0, invalid_argument,
                    "caching allocator: granularity and large rounding must be positive, got ", spec.granularity,
                    " and ", spec.large_rounding);
    MEMPLAN_EXPECTS(spec.small_request >= 0 && spec.small_segment >= spec.small_request && spec.min_large_alloc >= 0 &&
                        spec.large_segment >= 0 && spec.segment_malloc_us >= 0 && spec.segment_free_us >= 0,
                    invalid_argument,
                    "caching allocator: sizes and costs must be non-negative and a small segment must hold a small "
                    "request (small request ", spec.small_request, ", small segment ", spec.small_segment, ")");
    unit_ = std::max(round_up(spec.granularity, alignment), alignment);
  }

  /// A block of at least `bytes` (PyTorch's malloc), or nullopt when even
  /// after giving back the cached segments there is no room.
  /// \throws invalid_argument if `bytes` is negative.
  [[nodiscard]] std::optional<allocation> allocate(bytes_t bytes) {
    MEMPLAN_EXPECTS(bytes >= 0, invalid_argument, "caching allocator: a request must be non-negative, got ", bytes);
    if (bytes == 0) return allocation{};
    const bytes_t size = round_up(std::max(bytes, spec_.granularity), unit_);
    const bool small = size <= spec_.small_request;
    auto it = free_[small].lower_bound({size, 0, 0});
    if (it == free_[small].end()) {
      if (!new_segment(size, small)) return std::nullopt;
      it = free_[small].lower_bound({size, 0, 0});
    }
    const index_t b = std::get<2>(*it);
    free_[small].erase(it);
    split(b, size, small);
    block& got = blocks_[at(b)];
    got.allocated = true;
    allocated_ += got.size;
    return allocation{b, got.offset, got.size, got.after};
  }

  /// Gives block `b` back (PyTorch's free): it merges with its free
  /// neighbours in its segment; its bytes carry `after`.
  /// \throws invalid_argument if `b` is not an allocated block.
  void free(index_t b, const release_clock& after) {
    MEMPLAN_EXPECTS(b >= 0 && at(b) < blocks_.size() && blocks_[at(b)].allocated, invalid_argument,
                    "caching allocator: block ", b, " is not allocated");
    block& x = blocks_[at(b)];
    x.allocated = false;
    x.after = after;
    allocated_ -= x.size;
    const index_t prev = x.prev;
    b = merge(b, x.next);
    insert_free(merge(b, prev));
  }

  /// The arena's size, bytes: segments are placed inside it.
  [[nodiscard]] bytes_t arena() const noexcept { return arena_; }
  /// Bytes in allocated blocks (rounded).
  [[nodiscard]] bytes_t allocated() const noexcept { return allocated_; }
  /// Bytes in segments (PyTorch's "reserved").
  [[nodiscard]] bytes_t reserved() const noexcept { return reserved_; }
  /// The highest end of a segment so far: the arena the run needed.
  [[nodiscard]] bytes_t high_water() const noexcept { return high_water_; }
  /// Driver calls so far: segments made and given back, and flushes.
  [[nodiscard]] const calls& driver_calls() const noexcept { return calls_; }
  ///@{
  /// The largest free block in either pool, and the largest stretch of the
  /// arena no segment holds: why a request does not fit.
  [[nodiscard]] bytes_t largest_free_block() const {
    bytes_t most = 0;
    for (const auto& pool : free_) {
      if (!pool.empty()) most = std::max(most, std::get<0>(*pool.rbegin()));
    }
    return most;
  }
  [[nodiscard]] bytes_t largest_gap() const {
    bytes_t most = 0, from = 0;
    for (const auto& [offset, s] : segments_) {
      most = std::max(most, offset - from);
      from = offset + s.bytes;
    }
    return std::max(most, arena_ - from);
  }
  ///@}
  /// What the driver calls so far cost, µs.
  [[nodiscard]] double driver_us() const noexcept {
    return static_cast<double>(calls_.mallocs) * spec_.segment_malloc_us +
           static_cast<double>(calls_.frees) * spec_.segment_free_us;
  }

 private:
  struct block {
    bytes_t offset = 0;
    bytes_t size = 0;
    index_t prev = no_index;  ///< neighbours in its segment
    index_t next = no_index;
    bool allocated = false;
    bool small = false;
    release_clock after = no_release;
  };
  using free_key = std::tuple<bytes_t, bytes_t, index_t>;  // size, offset, block: best fit by (size, address)
  struct segment {
    bytes_t bytes = 0;
    index_t head = no_index;  ///< its first block
  };

  [[nodiscard]] static std::size_t at(index_t i) { return static_cast<std::size_t>(i); }
  [[nodiscard]] static bytes_t round_up(bytes_t x, bytes_t to) { return (x + to - 1) / to * to; }

  /// PyTorch's get_allocation_size.
  [[nodiscard]] bytes_t segment_size(bytes_t size, bool small) const {
    if (small) return round_up(spec_.small_segment, unit_);
    if (size < spec_.min_large_alloc) return round_up(std::max(spec_.large_segment, size), unit_);
    return round_up(round_up(size, spec_.large_rounding), unit_);
  }
  /// alloc_block, and on failure release_cached_blocks and once more.
  bool new_segment(bytes_t size, bool small) {
    const bytes_t bytes = segment_size(size, small);
    std::optional<bytes_t> where = gap(bytes);
    if (!where) {
      release_cached();
      where = gap(bytes);
    }
    if (!where) return false;
    ++calls_.mallocs;
    reserved_ += bytes;
    high_water_ = std::max(high_water_, *where + bytes);
    const index_t b = new_block({*where, bytes, no_index, no_index, false, small, released_});
    segments_.emplace(*where, segment{bytes, b});
    insert_free(b);
    return true;
  }
  /// The lowest offset where `bytes` fit between the segments (first fit).
  [[nodiscard]] std::optional<bytes_t> gap(bytes_t bytes) const {
    bytes_t from = 0;
    for (const auto& [offset, s] : segments_) {
      if (offset - from >= bytes) return from;
      from = offset + s.bytes;
    }
    if (arena_ - from >= bytes) return from;
    return std::nullopt;
  }
  /// Gives back every segment that is one free block; their bytes keep
  /// their clocks, joined into `released_` (new segments carry it).
  void release_cached() {
    ++calls_.flushes;
    for (auto it = segments_.begin(); it != segments_.end();) {
      const index_t head = it->second.head;
      const block& b = blocks_[at(head)];
      if (b.allocated || b.next != no_index) {
        ++it;
        continue;
      }
      ++calls_.frees;
      reserved_ -= b.size;
      released_ = latest(released_, b.after);
      free_[b.small].erase({b.size, b.offset, head});
      spare_.push_back(head);
      it = segments_.erase(it);
    }
  }
  /// Cuts free block b to `size`, keeping the rest as a free block where
  /// PyTorch's should_split does.
  void split(index_t b, bytes_t size, bool small) {
    const bytes_t rest = blocks_[at(b)].size - size;
    if (small ? rest < spec_.granularity : rest <= spec_.small_request) return;
    block& x = blocks_[at(b)];
    const index_t r = new_block({x.offset + size, rest, b, x.next, false, small, x.after});
    block& y = blocks_[at(b)];  // new_block may have moved it
    if (y.next != no_index) blocks_[at(y.next)].prev = r;
    y.next = r;
    y.size = size;
    insert_free(r);
  }
  /// Merges free neighbour n into b (PyTorch's try_merge_blocks); \returns
  /// the block that holds both (b, or n when n comes first). A segment's
  /// first block stays first, so it names the segment throughout.
  index_t merge(index_t b, index_t n) {
    if (n == no_index || blocks_[at(n)].allocated) return b;
    block& nb = blocks_[at(n)];
    free_[nb.small].erase({nb.size, nb.offset, n});
    const bool n_first = nb.offset < blocks_[at(b)].offset;
    const index_t keep = n_first ? n : b;
    const index_t gone = n_first ? b : n;
    block& k = blocks_[at(keep)];
    const block& g = blocks_[at(gone)];
    k.size += g.size;
    k.after = latest(k.after, g.after);
    k.next = g.next;
    if (k.next != no_index) blocks_[at(k.next)].prev = keep;
    spare_.push_back(gone);
    return keep;
  }
  void insert_free(index_t b) {
    const block& x = blocks_[at(b)];
    free_[x.small].insert({x.size, x.offset, b});
  }
  index_t new_block(const block& x) {
    if (!spare_.empty()) {
      const index_t b = spare_.back();
      spare_.pop_back();
      blocks_[at(b)] = x;
      return b;
    }
    blocks_.push_back(x);
    return static_cast<index_t>(blocks_.size() - 1);
  }

  bytes_t arena_;
  allocator_spec spec_;
  bytes_t unit_ = 1;
  std::vector<block> blocks_;
  std::vector<index_t> spare_;        ///< block slots free for reuse
  std::set<free_key> free_[2];        ///< free blocks of the large [0] and small [1] pool
  std::map<bytes_t, segment> segments_;  ///< by arena offset
  release_clock released_ = no_release;  ///< joined clocks of every segment given back
  bytes_t allocated_ = 0;
  bytes_t reserved_ = 0;
  bytes_t high_water_ = 0;
  calls calls_;
};

}  // namespace memplan::runtime
