#pragma once
// The trainers' CUDA backend: cuda::device (one cudaMalloc arena, one
// pinned pool, CUDA streams) and the cuDNN/cuBLAS kernels. Op times come
// from cudaEvent pairs around each op on its stream.

#include <memory>
#include <vector>

#include <cuda_runtime_api.h>

#include "cuda_kernels.hpp"
#include "memplan/cuda/device.hpp"
#include "memplan/cuda/stream.hpp"

namespace memplan::trainers {

namespace cuda_detail {

/// \throws error if no GPU is visible: the message says what runs without one.
inline int require_gpu() {
  const int count = cuda::device_count();
  if (count == 0) {
    throw error("no CUDA GPU is visible (cudaGetDeviceCount found none): the CUDA trainers need one; "
                "memplan-train-mlp and memplan-train-cnn run the same networks on the host");
  }
  return count;
}

}  // namespace cuda_detail

class cuda_backend {
  [[maybe_unused]] int gpus_ = cuda_detail::require_gpu();  // first: before cuDNN and cuBLAS start

 public:
  using device_type = cuda::device;
  using stream_view = cuda::stream_view;

  cuda_kernels kernels;

  [[nodiscard]] std::unique_ptr<cuda::device> make_device(bytes_t arena_bytes, bytes_t pinned_bytes) const {
    return std::make_unique<cuda::device>(
        cuda::device_options{.ordinal = 0, .arena_bytes = arena_bytes, .pinned_bytes = pinned_bytes});
  }
  /// A starting value into the arena or, for offloaded state, the pinned pool.
  void upload(cuda::device&, void* dst, const void* src, std::size_t bytes, stream_view view) const {
    MEMPLAN_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, view.value()));
  }

  void start_timing(std::size_t steps) {
    steps_ = steps;
    marks_.clear();
  }
  void begin_op(index_t step, stream_view view) {
    marks_.push_back({step, cuda::event(true), cuda::event(true)});
    MEMPLAN_CUDA_TRY(cudaEventRecord(marks_.back().start.value(), view.value()));
  }
  void end_op(index_t, stream_view view) { MEMPLAN_CUDA_TRY(cudaEventRecord(marks_.back().stop.value(), view.value())); }
  /// Per step, the µs between its events (the run has ended: they have passed).
  [[nodiscard]] std::vector<double> op_times() const {
    std::vector<double> times(steps_, 0.0);
    for (const mark& m : marks_) {
      float ms = 0;
      MEMPLAN_CUDA_TRY(cudaEventElapsedTime(&ms, m.start.value(), m.stop.value()));
      times[static_cast<std::size_t>(m.step)] += static_cast<double>(ms) * 1e3;
    }
    return times;
  }

 private:
  struct mark {
    index_t step;
    cuda::event start, stop;
  };
  std::size_t steps_ = 0;
  std::vector<mark> marks_;
};

}  // namespace memplan::trainers
