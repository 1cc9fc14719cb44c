#pragma once
/// \file
/// `allocator_spec`: the constants of the online policies' allocator model
/// (runtime/caching_allocator.hpp), PyTorch's CUDA caching allocator
/// (c10/cuda/CUDACachingAllocator.cpp), and what its calls into the CUDA
/// driver cost. A field of `device_spec`, so that a test device of a few
/// hundred bytes can scale it down.

#include "memplan/fwd.hpp"

namespace memplan {

/// The caching allocator's constants (PyTorch's names in parentheses) and the
/// cost of its driver calls; the defaults are PyTorch's on a CUDA device.
struct allocator_spec {
  /// Every request is rounded up to a multiple of this (kMinBlockSize, 512 B).
  bytes_t granularity = 512;
  /// Requests up to this go to the small pool (kSmallSize, 1 MiB); the
  /// large pool keeps a split's remainder only if it is larger than this.
  bytes_t small_request = bytes_t{1} << 20;
  /// A small-pool segment (kSmallBuffer, 2 MiB).
  bytes_t small_segment = bytes_t{2} << 20;
  /// A large request below `min_large_alloc` (kMinLargeAlloc, 10 MiB) gets a
  /// segment of `large_segment` (kLargeBuffer, 20 MiB); a larger one is
  /// rounded up to `large_rounding` (kRoundLarge, 2 MiB).
  bytes_t min_large_alloc = bytes_t{10} << 20;
  bytes_t large_segment = bytes_t{20} << 20;   ///< see `min_large_alloc`
  bytes_t large_rounding = bytes_t{2} << 20;   ///< see `min_large_alloc`
  /// One cudaMalloc of a segment, µs: about 50 µs for sizes up to 512 KB
  /// and more above (M. Boyer, "Memory allocation overhead",
  /// cs.virginia.edu/~mwb7w/cuda_support/memory_management_overhead.html),
  /// so a lower bound for the MiB-sized segments here.
  double segment_malloc_us = 50;
  /// One cudaFree of a cached segment, µs (same source, the same order as
  /// cudaMalloc). PyTorch synchronises the device first
  /// (release_cached_blocks); that wait is not charged on its own: the
  /// actions reusing the bytes wait for their holders anyway.
  double segment_free_us = 50;
};

/// A scaled-down spec for graphs of tensors of a few hundred bytes: no
/// rounding, one pool, every segment exactly its request, a remainder of any
/// size kept; the rules and costs are PyTorch's otherwise.
[[nodiscard]] constexpr allocator_spec byte_exact_allocator() noexcept {
  allocator_spec s;
  s.granularity = 1;
  s.small_request = 0;
  s.small_segment = 0;
  s.min_large_alloc = 0;
  s.large_segment = 0;
  s.large_rounding = 1;
  return s;
}

}  // namespace memplan
