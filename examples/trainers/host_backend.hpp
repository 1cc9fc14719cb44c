#pragma once
// The trainers' host backend: host::device (threads as streams, CI runs it)
// and the plain C++ kernels.

#include <chrono>
#include <memory>
#include <vector>

#include "host_kernels.hpp"
#include "memplan/host/device.hpp"

namespace memplan::trainers {

class host_backend {
 public:
  using device_type = host::device;
  using stream_view = host::stream_view;

  host_kernels kernels;

  [[nodiscard]] std::unique_ptr<host::device> make_device(bytes_t arena_bytes, bytes_t pinned_bytes) const {
    return std::make_unique<host::device>(
        host::device_options{.arena_bytes = arena_bytes, .pinned_bytes = pinned_bytes, .before_copy = {}});
  }
  /// A starting value into the arena or, for offloaded state, the pinned pool.
  void upload(host::device& dev, void* dst, const void* src, std::size_t bytes, stream_view view) const {
    dev.copy(dst, src, bytes, copy_kind::host_to_device, view);
  }

  /// Op timing: host ops run when their stream reaches them, so a clock
  /// around the op is its time.
  void start_timing(std::size_t steps) { times_.assign(steps, 0.0); }
  void begin_op(index_t, stream_view) { begin_ = std::chrono::steady_clock::now(); }
  void end_op(index_t step, stream_view) {
    times_[static_cast<std::size_t>(step)] +=
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - begin_).count();
  }
  [[nodiscard]] std::vector<double> op_times() const { return times_; }

 private:
  std::vector<double> times_;
  std::chrono::steady_clock::time_point begin_;
};

}  // namespace memplan::trainers
