#pragma once
/// \file
/// `runtime::ordered_pool`: stream-ordered allocation over one of a device's
/// arenas (as CCCL's stream-ordered resources and cudaFreeAsync) — the
/// executor's pinned host pool; device buffers sit at a memory layout's
/// offsets instead (placement.hpp). A block
/// given back with `deallocate(offset, bytes, after)` is reused only once
/// every event in `after` has completed, so work still reading it on any
/// stream finishes first; until then its bytes count as in use. An optional
/// limit (the plan's budget) caps the bytes in use, counted as the plan
/// counts them (unrounded).

#include <algorithm>
#include <cstddef>
#include <deque>
#include <initializer_list>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "memplan/runtime/device.hpp"

namespace memplan::runtime {

/// Stream-ordered reuse of one of `D`'s arenas (see the file comment): a
/// freed block waits for its events before it is handed out again.
template <memplan::device D>
class ordered_pool {
 public:
  using event = typename D::event;                    ///< what a freed block waits for
  using allocator_type = typename D::allocator_type;  ///< the arena's sub-allocator

  /// Allocates from `space` (one of `dev`'s arenas, e.g. `dev.pinned()`), at
  /// most `limit` bytes in use at once (unrounded); both must outlive the pool.
  ordered_pool(D& dev, allocator_type& space, bytes_t limit = std::numeric_limits<bytes_t>::max())
      : dev_(&dev), arena_(&space), limit_(limit) {}

  /// A block of `bytes` if one is free now (after taking back every block
  /// whose events have completed) and the limit allows; nothing otherwise.
  [[nodiscard]] std::optional<bytes_t> try_allocate(bytes_t bytes) {
    reclaim();
    if (bytes > limit_ - in_use_) return std::nullopt;
    const auto offset = arena_->allocate(bytes);
    if (offset) {
      in_use_ += bytes;
      peak_ = std::max(peak_, in_use_);
    }
    return offset;
  }
  /// Gives a block back for reuse once every event in `after` has completed
  /// (at once when `after` is empty). The events must outlive the pool's
  /// use of them: until `drain` or a `wait_one` that takes the block back.
  void deallocate(bytes_t offset, bytes_t bytes, std::span<const event* const> after = {}) {
    if (after.empty()) {
      release(offset, bytes);
      return;
    }
    pending_.push_back({offset, bytes, {after.begin(), after.end()}});
  }
  /// Blocks until the oldest pending block can be reused and takes it (and
  /// any other ready ones) back. \returns false if nothing was pending.
  bool wait_one() {
    if (pending_.empty()) return false;
    for (const event* e : pending_.front().after) dev_->synchronize(*e);
    reclaim();
    return true;
  }
  /// Waits for and takes back every pending block.
  void drain() {
    while (wait_one()) {
    }
  }

  /// Bytes in blocks handed out or pending, as requested (unrounded).
  [[nodiscard]] bytes_t in_use() const noexcept { return in_use_; }
  /// The most bytes in use at once, counted as `in_use`.
  [[nodiscard]] bytes_t peak() const noexcept { return peak_; }
  /// The cap on `in_use` given at construction (bytes).
  [[nodiscard]] bytes_t limit() const noexcept { return limit_; }
  /// Whether a block given back is still waiting for its events.
  [[nodiscard]] bool has_pending() const noexcept { return !pending_.empty(); }

  /// A live block, for `compact`: where it is (updated) and its size.
  struct block {
    bytes_t* offset;  ///< the block's offset, rewritten where `compact` moves it
    bytes_t bytes;    ///< its size as allocated (unrounded)
  };
  /// Closes the holes between `live` blocks — every block handed out and not
  /// given back — by moving each down, lowest first, with
  /// `move(from, to, bytes)` (to < from; the ranges may overlap). Call it
  /// with nothing pending and nothing running that uses the blocks. Each
  /// block lands at or below where it was (its old place is free once the
  /// lower ones are packed), so this always succeeds.
  template <class Move>
  void compact(std::vector<block> live, Move&& move) {
    std::ranges::sort(live, [](const block& a, const block& b) { return *a.offset < *b.offset; });
    arena_->clear();
    for (const block& b : live) {
      const bytes_t to = *arena_->allocate(b.bytes);
      if (to != *b.offset) move(*b.offset, to, b.bytes);
      *b.offset = to;
    }
  }

 private:
  struct pending {
    bytes_t offset;
    bytes_t bytes;
    std::vector<const event*> after;
  };

  void reclaim() {
    std::erase_if(pending_, [&](const pending& p) {
      if (!std::ranges::all_of(p.after, [&](const event* e) { return dev_->query(*e); })) return false;
      release(p.offset, p.bytes);
      return true;
    });
  }
  void release(bytes_t offset, bytes_t bytes) {
    arena_->deallocate(offset, bytes);
    in_use_ -= bytes;
  }

  D* dev_;
  allocator_type* arena_;
  bytes_t limit_;
  bytes_t in_use_ = 0;
  bytes_t peak_ = 0;
  std::deque<pending> pending_;
};

}  // namespace memplan::runtime
