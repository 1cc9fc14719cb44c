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

namespace memplan::cuda {

class stream_view {
 public:
  /// \throws invalid_argument for 0 / nullptr (the legacy default stream).
  stream_view(cudaStream_t s) : stream_(s) {  // NOLINT(google-explicit-constructor): views convert, as rmm's do
    MEMPLAN_EXPECTS(s != nullptr, invalid_argument,
                    "cuda::stream_view: the legacy default stream (0) is not allowed; create a stream");
  }
  stream_view(std::nullptr_t) = delete;
  stream_view(int) = delete;

  [[nodiscard]] cudaStream_t value() const noexcept { return stream_; }
  operator cudaStream_t() const noexcept { return stream_; }  // NOLINT(google-explicit-constructor)
  friend bool operator==(stream_view, stream_view) = default;

 private:
  cudaStream_t stream_;
};

/// Owning stream, created non-blocking (no implicit sync with stream 0).
class stream {
 public:
  /// \throws cuda_error if creation fails.
  stream() { MEMPLAN_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  stream(stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}
  stream& operator=(stream&& other) noexcept {
    std::swap(stream_, other.stream_);
    return *this;
  }
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  ~stream() {
    if (stream_ != nullptr) MEMPLAN_CUDA_ASSERT_OK(cudaStreamDestroy(stream_));
  }

  [[nodiscard]] stream_view view() const { return stream_view(stream_); }
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
  event(event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  event& operator=(event&& other) noexcept {
    std::swap(event_, other.event_);
    return *this;
  }
  event(const event&) = delete;
  event& operator=(const event&) = delete;
  ~event() {
    if (event_ != nullptr) MEMPLAN_CUDA_ASSERT_OK(cudaEventDestroy(event_));
  }

  [[nodiscard]] cudaEvent_t value() const noexcept { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace memplan::cuda
