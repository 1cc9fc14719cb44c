#pragma once
/// \file
/// Owning and viewing CUDA handles (rmm's cuda_stream / cuda_stream_view,
/// CCCL's cuda::stream_ref): `cuda::stream` and `cuda::event` own their
/// handle and are move-only; `cuda::stream_view` is a copyable view that
/// converts from `cudaStream_t` and refuses the legacy default stream (0),
/// whose implicit synchronization would serialize the plan's streams.

#include <cstdint>
#include <utility>

#include <cuda_runtime_api.h>

#include "memplan/cuda/error.hpp"
#include "memplan/error.hpp"

/// The CUDA adapters (memplan::cuda, CMake component `cuda`): the executor's
/// device on the CUDA runtime, and the profiler that measures a device_spec.
namespace memplan::cuda {

/// A non-owning, copyable stream handle that is never the legacy default
/// stream; what the executor's device takes and hands out.
class stream_view {
 public:
  /// \throws invalid_argument for 0 / nullptr (the legacy default stream).
  stream_view(cudaStream_t s) : stream_(s) {  // NOLINT(google-explicit-constructor): views convert, as rmm's do
    MEMPLAN_EXPECTS(s != nullptr, invalid_argument,
                    "cuda::stream_view: the legacy default stream (0) is not allowed; create a stream");
  }
  stream_view(std::nullptr_t) = delete;
  stream_view(int) = delete;

  /// The handle, for CUDA calls.
  [[nodiscard]] cudaStream_t value() const noexcept { return stream_; }
  /// The handle, so that a view passes where CUDA takes a `cudaStream_t`.
  operator cudaStream_t() const noexcept { return stream_; }  // NOLINT(google-explicit-constructor)
  /// Views of the same stream.
  friend bool operator==(stream_view, stream_view) = default;

 private:
  cudaStream_t stream_;
};

/// Owning stream, created non-blocking (no implicit sync with stream 0).
class stream {
 public:
  /// \throws cuda_error if creation fails.
  stream() { MEMPLAN_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  /// Takes `other`'s stream; `other` owns none afterwards.
  stream(stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}
  /// Swaps the streams: `other` destroys this one's old stream.
  stream& operator=(stream&& other) noexcept {
    std::swap(stream_, other.stream_);
    return *this;
  }
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  ~stream() {
    if (stream_ != nullptr) MEMPLAN_CUDA_ASSERT_OK(cudaStreamDestroy(stream_));
  }

  /// A view of the stream.
  /// \throws invalid_argument on a moved-from stream (it owns none).
  [[nodiscard]] stream_view view() const { return stream_view(stream_); }
  /// The handle, for CUDA calls; null on a moved-from stream.
  [[nodiscard]] cudaStream_t value() const noexcept { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

/// Owning event; ordering-only by default (cudaEventDisableTiming, the
/// cheap kind), `timing` for the profiler's elapsed-time pairs.
class event {
 public:
  /// \throws cuda_error if creation fails.
  explicit event(bool timing = false) {
    MEMPLAN_CUDA_TRY(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
  }
  /// Takes `other`'s event; `other` owns none afterwards.
  event(event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  /// Swaps the events: `other` destroys this one's old event.
  event& operator=(event&& other) noexcept {
    std::swap(event_, other.event_);
    return *this;
  }
  event(const event&) = delete;
  event& operator=(const event&) = delete;
  ~event() {
    if (event_ != nullptr) MEMPLAN_CUDA_ASSERT_OK(cudaEventDestroy(event_));
  }

  /// The handle, for CUDA calls; null on a moved-from event.
  [[nodiscard]] cudaEvent_t value() const noexcept { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace memplan::cuda
