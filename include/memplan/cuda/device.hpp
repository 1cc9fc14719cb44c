#pragma once
/// \file
/// `cuda::device`: the CUDA model of `memplan::device`. One device arena (a
/// single cudaMalloc the executor sub-allocates) and one pinned host pool
/// (a single cudaHostAlloc); copies are cudaMemcpyAsync on the stream the
/// executor gives them (its dedicated d2h and h2d streams for swaps);
/// ordering between streams is cudaEventRecord + cudaStreamWaitEvent.
/// `launch(s, f)` calls `f(view)` at once: the framework's op enqueues its
/// kernels on the view. Needs only <cuda_runtime_api.h> and CUDA::cudart,
/// so it builds with g++.

#include <cstddef>
#include <utility>

#include <cuda_runtime_api.h>

#include "memplan/cuda/error.hpp"
#include "memplan/cuda/stream.hpp"
#include "memplan/error.hpp"
#include "memplan/runtime/arena.hpp"
#include "memplan/runtime/device.hpp"

namespace memplan::cuda {

/// Number of CUDA devices visible, 0 when there is no GPU or no driver
/// (the CUDA error is cleared, not thrown: "no GPU" is an answer here).
[[nodiscard]] inline int device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

/// Settings of a CUDA device.
struct device_options {
  int ordinal = 0;           ///< which GPU
  bytes_t arena_bytes = 0;   ///< the one device allocation (the budget to run under)
  bytes_t pinned_bytes = 0;  ///< the one pinned host allocation for swapped-out tensors
};

/// The CUDA model of `memplan::device`: one GPU, its arena and a pinned host
/// pool, both sub-allocated by `runtime::arena` (see the file comment).
class device {
 public:
  using stream = cuda::stream;            ///< an owning non-blocking cudaStream_t
  using stream_view = cuda::stream_view;  ///< what launched work enqueues on
  using event = cuda::event;              ///< an owning ordering-only cudaEvent_t
  using allocator_type = runtime::arena;  ///< sub-allocates both arenas

  /// Selects the GPU and makes the two allocations.
  /// \throws cuda_error if either fails (the message names the call);
  ///         invalid_argument if a size is negative.
  explicit device(device_options options)
      : ordinal_(options.ordinal), arena_(options.arena_bytes), pinned_(options.pinned_bytes) {
    MEMPLAN_CUDA_TRY(cudaSetDevice(ordinal_));
    if (options.arena_bytes > 0) {
      MEMPLAN_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&device_memory_), static_cast<std::size_t>(options.arena_bytes)));
    }
    if (options.pinned_bytes > 0) {
      try {
        MEMPLAN_CUDA_TRY(cudaHostAlloc(reinterpret_cast<void**>(&pinned_memory_),
                                       static_cast<std::size_t>(options.pinned_bytes), cudaHostAllocDefault));
      } catch (...) {
        free_memory();
        throw;
      }
    }
  }
  device(const device&) = delete;
  device& operator=(const device&) = delete;
  ~device() { free_memory(); }

  /// The GPU it runs on (`device_options::ordinal`).
  [[nodiscard]] int ordinal() const noexcept { return ordinal_; }

  /// A new non-blocking stream.
  /// \throws cuda_error if creation fails.
  [[nodiscard]] stream make_stream() const { return stream(); }
  /// A new ordering-only event.
  /// \throws cuda_error if creation fails.
  [[nodiscard]] event make_event() const { return event(); }

  /// cudaEventRecord of `e` on `s`.
  /// \throws cuda_error if it fails.
  void record(event& e, stream& s) const { MEMPLAN_CUDA_TRY(cudaEventRecord(e.value(), s.value())); }
  /// cudaStreamWaitEvent: `s` waits on the device, the host does not block.
  /// \throws cuda_error if it fails.
  void wait(stream& s, const event& e) const { MEMPLAN_CUDA_TRY(cudaStreamWaitEvent(s.value(), e.value(), 0)); }
  /// cudaEventQuery: false while `e`'s work is pending (cudaErrorNotReady is
  /// an answer, cleared); never blocks.
  /// \throws cuda_error for any other error.
  [[nodiscard]] bool query(const event& e) const {
    const cudaError_t status = cudaEventQuery(e.value());
    if (status == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    MEMPLAN_CUDA_TRY(status);
    return true;
  }
  /// cudaEventSynchronize: blocks the calling thread until `e` has completed.
  /// \throws cuda_error if it fails.
  void synchronize(const event& e) const { MEMPLAN_CUDA_TRY(cudaEventSynchronize(e.value())); }
  /// cudaStreamSynchronize: blocks the calling thread until `s` is idle.
  /// \throws cuda_error for an error it reports (a fault in work on `s`).
  void synchronize(stream& s) const { MEMPLAN_CUDA_TRY(cudaStreamSynchronize(s.value())); }

  /// Calls `f(view)` now; `f` enqueues its work on the view.
  template <class F>
  void launch(stream& s, F&& f) const {
    std::forward<F>(f)(s.view());
  }
  /// cudaMemcpyAsync of `bytes` bytes on `s` (nothing for 0): enqueued, not
  /// done, on return.
  /// \throws cuda_error if it cannot be enqueued.
  void copy(void* dst, const void* src, std::size_t bytes, copy_kind kind, stream_view s) const {
    if (bytes == 0) return;
    const cudaMemcpyKind k = kind == copy_kind::device_to_host   ? cudaMemcpyDeviceToHost
                             : kind == copy_kind::host_to_device ? cudaMemcpyHostToDevice
                                                                 : cudaMemcpyDeviceToDevice;
    MEMPLAN_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, k, s.value()));
  }

  /// The device arena's allocator; its offsets index `device_memory()`.
  [[nodiscard]] runtime::arena& arena() noexcept { return arena_; }
  /// The one cudaMalloc allocation (null if `arena_bytes` was 0).
  [[nodiscard]] std::byte* device_memory() noexcept { return device_memory_; }
  /// The pinned pool's allocator; its offsets index `pinned_memory()`.
  [[nodiscard]] runtime::arena& pinned() noexcept { return pinned_; }
  /// The one cudaHostAlloc allocation (null if `pinned_bytes` was 0).
  [[nodiscard]] std::byte* pinned_memory() noexcept { return pinned_memory_; }

 private:
  void free_memory() noexcept {
    if (device_memory_ != nullptr) MEMPLAN_CUDA_ASSERT_OK(cudaFree(device_memory_));
    if (pinned_memory_ != nullptr) MEMPLAN_CUDA_ASSERT_OK(cudaFreeHost(pinned_memory_));
    device_memory_ = nullptr;
    pinned_memory_ = nullptr;
  }

  int ordinal_;
  runtime::arena arena_;
  runtime::arena pinned_;
  std::byte* device_memory_ = nullptr;
  std::byte* pinned_memory_ = nullptr;
};

static_assert(memplan::device<device>);

}  // namespace memplan::cuda
