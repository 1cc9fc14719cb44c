#pragma once
/// \file
/// `runtime::arena`: the sub-allocator behind a device's one arena and its
/// pinned host pool. It hands out offsets inside a fixed capacity (first
/// fit, or best fit with `allocate_best_fit`; neighbouring holes merged), so
/// the bytes in use can never exceed the capacity, and it keeps the most
/// bytes in use at once. Blocks found by a fit are 256-byte aligned (or take an
/// alignment of their own); a block can also be taken at a given offset (a
/// memory layout's, `allocate_at`), and any sub-range of a block can go back
/// alone (a tensor split in place into micro-tensors). It owns no memory and
/// takes no locks: the backend owns the one allocation, and only the thread
/// that issues work allocates.

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <map>
#include <optional>

#include "memplan/error.hpp"
#include "memplan/fwd.hpp"

namespace memplan::runtime {

/// First- or best-fit offset allocator over a fixed capacity (see the file comment);
/// memplan's model of `memplan::allocator`.
class arena {
 public:
  /// Every block of `allocate` starts at a multiple of `alignment` (256: what
  /// cudaMalloc guarantees, and enough for any vector load).
  static constexpr bytes_t alignment = 256;

  /// \throws invalid_argument if `capacity` is negative.
  explicit arena(bytes_t capacity) : capacity_(capacity) {
    MEMPLAN_EXPECTS(capacity >= 0, invalid_argument, "arena: capacity must be non-negative, got ", capacity);
    if (capacity > 0) holes_.emplace(0, capacity);
  }

  /// Bytes a block of `bytes` takes: rounded up to the alignment.
  [[nodiscard]] static constexpr bytes_t footprint(bytes_t bytes) noexcept {
    return (bytes + alignment - 1) / alignment * alignment;
  }

  /// The offset of a fresh block of `bytes` (zero-byte blocks take no room
  /// and get offset 0), or nothing if no hole is large enough.
  [[nodiscard]] std::optional<bytes_t> allocate(bytes_t bytes) { return allocate_extent(footprint(bytes), alignment); }

  /// The offset of a block of exactly `extent` bytes starting at an offset
  /// congruent to `phase` modulo `align` (first fit; what is left of the
  /// hole on either side stays a hole), or nothing if no hole can hold it.
  /// Micro-tensors take finer blocks than whole tensors, and a tensor split
  /// in place gives its sub-ranges back one by one (`deallocate_extent`).
  [[nodiscard]] std::optional<bytes_t> allocate_extent(bytes_t extent, bytes_t align, bytes_t phase = 0) {
    if (extent == 0) return bytes_t{0};
    phase %= align;
    for (auto it = holes_.begin(); it != holes_.end(); ++it) {
      const bytes_t hole = it->first;
      const bytes_t end = hole + it->second;
      const bytes_t start = hole + (phase - hole % align + align) % align;
      if (start + extent > end) continue;
      holes_.erase(it);
      if (start > hole) holes_.emplace(hole, start - hole);
      if (end > start + extent) holes_.emplace(start + extent, end - start - extent);
      in_use_ += extent;
      peak_ = std::max(peak_, in_use_);
      return start;
    }
    return std::nullopt;
  }

  /// The offset of a block of exactly `extent` bytes at the start of the
  /// smallest hole that holds it (best fit, Knuth TAOCP vol. 1 §2.5; the
  /// lowest such hole on ties), or nothing. Offsets stay multiples of a
  /// caller's alignment if every extent and the capacity are.
  [[nodiscard]] std::optional<bytes_t> allocate_best_fit(bytes_t extent) {
    if (extent == 0) return bytes_t{0};
    auto best = holes_.end();
    for (auto it = holes_.begin(); it != holes_.end(); ++it) {
      if (it->second >= extent && (best == holes_.end() || it->second < best->second)) best = it;
    }
    if (best == holes_.end()) return std::nullopt;
    const bytes_t offset = best->first;
    return allocate_at(offset, extent) ? std::optional<bytes_t>(offset) : std::nullopt;
  }

  /// Takes the `extent` bytes at `offset` (a block placed by a memory
  /// layout rather than found by first fit). \returns false, taking
  /// nothing, if any of them is taken already or past the capacity.
  [[nodiscard]] bool allocate_at(bytes_t offset, bytes_t extent) {
    if (extent == 0) return true;
    auto it = holes_.upper_bound(offset);
    if (it == holes_.begin()) return false;
    --it;
    const bytes_t hole = it->first;
    const bytes_t end = hole + it->second;
    if (offset + extent > end) return false;
    holes_.erase(it);
    if (offset > hole) holes_.emplace(hole, offset - hole);
    if (end > offset + extent) holes_.emplace(offset + extent, end - offset - extent);
    in_use_ += extent;
    peak_ = std::max(peak_, in_use_);
    return true;
  }

  /// Returns the block at `offset` that `allocate(bytes)` handed out.
  void deallocate(bytes_t offset, bytes_t bytes) noexcept { deallocate_extent(offset, footprint(bytes)); }

  /// Returns the `extent` bytes at `offset`: a block `allocate_extent` handed
  /// out, or any sub-range of one not returned yet.
  void deallocate_extent(bytes_t offset, bytes_t extent) noexcept {
    if (extent == 0) return;
    in_use_ -= extent;
    auto [it, inserted] = holes_.emplace(offset, extent);
    if (const auto next = std::next(it); next != holes_.end() && it->first + it->second == next->first) {
      it->second += next->second;
      holes_.erase(next);
    }
    if (it != holes_.begin()) {
      const auto before = std::prev(it);
      if (before->first + before->second == it->first) {
        before->second += it->second;
        holes_.erase(it);
      }
    }
  }

  /// Forgets every block at once, keeping the peak: the first step of
  /// compacting, after which the caller allocates its live blocks again in
  /// offset order (first fit then gives each an offset no higher than before).
  void clear() noexcept {
    holes_.clear();
    if (capacity_ > 0) holes_.emplace(0, capacity_);
    in_use_ = 0;
  }

  /// The bytes it sub-allocates, as constructed.
  [[nodiscard]] bytes_t capacity() const noexcept { return capacity_; }
  /// Bytes in blocks handed out and not yet returned (footprints).
  [[nodiscard]] bytes_t in_use() const noexcept { return in_use_; }
  /// The most bytes ever in use at once.
  [[nodiscard]] bytes_t peak() const noexcept { return peak_; }
  /// The largest block `allocate` could hand out now.
  [[nodiscard]] bytes_t largest_hole() const noexcept {
    bytes_t largest = 0;
    for (const auto& [offset, size] : holes_) largest = std::max(largest, size);
    return largest;
  }

 private:
  bytes_t capacity_;
  bytes_t in_use_ = 0;
  bytes_t peak_ = 0;
  std::map<bytes_t, bytes_t> holes_;  ///< offset -> size, disjoint and never adjacent
};

}  // namespace memplan::runtime
