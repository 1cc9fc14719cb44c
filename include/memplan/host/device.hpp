#pragma once
/// \file
/// `host::device`: the `memplan::device` model that runs everywhere (and is
/// what CI exercises); `host::basic_device<A>` is the same over an allocator
/// of the framework's own (`memplan::allocator`). A stream is a thread
/// draining a queue in issue order;
/// an event is a completion flag (a recorded and a completed generation);
/// the device arena and the pinned pool are ordinary aligned host
/// allocations; a copy is a memcpy on the stream's thread. Work on
/// different streams really runs concurrently, so a plan missing an order
/// shows up as wrong numbers or a ThreadSanitizer report.

#include <concepts>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <utility>

#include "memplan/error.hpp"
#include "memplan/runtime/allocator.hpp"
#include "memplan/runtime/arena.hpp"
#include "memplan/runtime/device.hpp"

/// The host backend: `memplan::device` on threads and ordinary memory, to run
/// and test plans without a GPU.
namespace memplan::host {

template <memplan::allocator A>
class basic_device;
class stream;

namespace detail {

/// Completion flag with generations, so that an event can be recorded again
/// (as cudaEventRecord can): complete when the latest record has run.
struct event_state {
  std::mutex mutex;
  std::condition_variable done;
  std::uint64_t recorded = 0;   ///< generation of the latest record (issue thread)
  std::uint64_t completed = 0;  ///< highest generation whose stream point has passed

  /// Notifies under the lock: a waiter that sees the flag may destroy the
  /// event at once, so nothing may touch it after the unlock.
  void complete(std::uint64_t generation) {
    const std::lock_guard lock(mutex);
    if (generation > completed) completed = generation;
    done.notify_all();
  }
  void wait_for(std::uint64_t generation) {
    std::unique_lock lock(mutex);
    done.wait(lock, [&] { return completed >= generation; });
  }
};

class worker;

}  // namespace detail

/// Non-owning view of a host stream, handed to work running on it.
class stream_view {
 public:
  /// Views of the same stream.
  friend bool operator==(stream_view, stream_view) = default;

 private:
  template <memplan::allocator A>
  friend class basic_device;
  friend class stream;
  friend class detail::worker;
  explicit stream_view(detail::worker* w) noexcept : worker_(w) {}
  detail::worker* worker_;
};

namespace detail {

/// One stream: a thread running queued tasks in order. A task that throws
/// does not stop the stream; its exception is kept for `synchronize`.
class worker {
 public:
  worker() : thread_([this] { loop(); }) {}
  worker(const worker&) = delete;
  worker& operator=(const worker&) = delete;
  ~worker() {
    {
      const std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }

  void post(std::function<void(stream_view)> task) {
    {
      const std::lock_guard lock(mutex_);
      tasks_.push_back(std::move(task));
      ++posted_;
    }
    changed_.notify_all();
  }
  /// Blocks until every task posted so far has run; rethrows the first
  /// exception a task threw since the last call.
  void synchronize() {
    std::unique_lock lock(mutex_);
    const std::uint64_t target = posted_;
    changed_.wait(lock, [&] { return finished_ >= target; });
    if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
  }

 private:
  void loop() {
    std::unique_lock lock(mutex_);
    for (;;) {
      changed_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and everything posted has run
      auto task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      std::exception_ptr failed;
      try {
        task(stream_view(this));
      } catch (...) {
        failed = std::current_exception();
      }
      lock.lock();
      if (failed && !failure_) failure_ = failed;
      ++finished_;
      changed_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void(stream_view)>> tasks_;
  std::uint64_t posted_ = 0;
  std::uint64_t finished_ = 0;
  bool stopping_ = false;
  std::exception_ptr failure_;
  std::thread thread_;  // last: starts once the rest is built
};

struct aligned_delete {
  void operator()(std::byte* p) const noexcept { ::operator delete[](p, std::align_val_t{runtime::arena::alignment}); }
};
using aligned_bytes = std::unique_ptr<std::byte[], aligned_delete>;

inline aligned_bytes allocate_aligned(bytes_t bytes) {
  if (bytes == 0) return nullptr;
  return aligned_bytes(static_cast<std::byte*>(
      ::operator new[](static_cast<std::size_t>(bytes), std::align_val_t{runtime::arena::alignment})));
}

}  // namespace detail

/// Owning host stream (move-only); its thread ends, after running everything
/// posted to it, when the stream is destroyed.
class stream {
 public:
  /// A view of the stream.
  [[nodiscard]] stream_view view() const noexcept { return stream_view(worker_.get()); }

 private:
  template <memplan::allocator A>
  friend class basic_device;
  stream() : worker_(std::make_unique<detail::worker>()) {}
  std::unique_ptr<detail::worker> worker_;
};

/// Owning host event (move-only). Work waiting on it holds a pointer to its
/// state: destroy it only after the streams that use it are synchronized.
class event {
 private:
  template <memplan::allocator A>
  friend class basic_device;
  event() : state_(std::make_unique<detail::event_state>()) {}
  std::unique_ptr<detail::event_state> state_;
};

/// Settings of a host device.
struct device_options {
  bytes_t arena_bytes = 0;   ///< size of the device arena (the budget to run under)
  bytes_t pinned_bytes = 0;  ///< size of the "pinned" host pool that swapped-out tensors go to
  /// Called on the stream's thread before every copy; it may throw to make
  /// the copy fail (fault injection) or record what is copied.
  std::function<void(copy_kind, std::size_t)> before_copy;
};

/// The host model of `memplan::device`, its arenas sub-allocated by `A`.
template <memplan::allocator A>
class basic_device {
 public:
  using stream = host::stream;            ///< a thread draining a queue
  using stream_view = host::stream_view;  ///< what launched work is handed
  using event = host::event;              ///< a completion flag
  using allocator_type = A;               ///< sub-allocates both arenas

  /// Arenas of `options.arena_bytes` and `options.pinned_bytes`, each
  /// sub-allocated by an `A` made from its capacity.
  /// \throws invalid_argument if a size is negative.
  explicit basic_device(device_options options)
    requires std::constructible_from<A, bytes_t>
      : basic_device(A(options.arena_bytes), A(options.pinned_bytes), std::move(options.before_copy)) {}

  /// Arenas of the allocators' capacities, sub-allocated by them (an
  /// allocator the framework has set up: with its own statistics or hooks).
  /// `before_copy`: as `device_options::before_copy`.
  basic_device(A arena, A pinned, std::function<void(copy_kind, std::size_t)> before_copy = {})
      : arena_(std::move(arena)),
        pinned_(std::move(pinned)),
        device_memory_(detail::allocate_aligned(arena_.capacity())),
        pinned_memory_(detail::allocate_aligned(pinned_.capacity())),
        before_copy_(std::move(before_copy)) {}

  /// A new stream: starts its thread.
  [[nodiscard]] stream make_stream() const { return stream(); }
  /// A new event, never recorded (so complete).
  [[nodiscard]] event make_event() const { return event(); }

  /// Starts a new generation of `e`, completed by a task queued on `s`
  /// behind the work issued there so far.
  void record(event& e, stream& s) const {
    detail::event_state* state = e.state_.get();
    std::uint64_t generation = 0;
    {
      const std::lock_guard lock(state->mutex);
      generation = ++state->recorded;
    }
    s.worker_->post([state, generation](stream_view) { state->complete(generation); });
  }
  /// Queues on `s` a task that blocks its thread until `e`'s latest record
  /// (as of now) has completed; a never-recorded `e` does not block.
  void wait(stream& s, const event& e) const {
    detail::event_state* state = e.state_.get();
    std::uint64_t generation = 0;
    {
      const std::lock_guard lock(state->mutex);
      generation = state->recorded;
    }
    s.worker_->post([state, generation](stream_view) { state->wait_for(generation); });
  }
  /// Whether `e`'s latest record has completed; never blocks.
  [[nodiscard]] bool query(const event& e) const {
    const std::lock_guard lock(e.state_->mutex);
    return e.state_->completed >= e.state_->recorded;
  }
  /// Blocks the calling thread until `e`'s latest record has completed.
  void synchronize(const event& e) const {
    std::uint64_t generation = 0;
    {
      const std::lock_guard lock(e.state_->mutex);
      generation = e.state_->recorded;
    }
    e.state_->wait_for(generation);
  }
  /// Blocks the calling thread until everything issued on `s` has run.
  /// \throws the first exception work on `s` threw since the last call.
  void synchronize(stream& s) const { s.worker_->synchronize(); }

  /// Runs `f(view)` on `s`'s thread after the work issued on `s` before it.
  template <class F>
  void launch(stream& s, F&& f) const {
    s.worker_->post(std::function<void(stream_view)>(std::forward<F>(f)));
  }
  /// Copies now: called from work running on `view`'s stream, now is its turn.
  void copy(void* dst, const void* src, std::size_t bytes, copy_kind kind, stream_view) const {
    if (before_copy_) before_copy_(kind, bytes);
    if (bytes > 0) std::memmove(dst, src, bytes);
  }

  /// The device arena's allocator; its offsets index `device_memory()`.
  [[nodiscard]] A& arena() noexcept { return arena_; }
  /// The "device" allocation (256-byte aligned host memory; null if empty).
  [[nodiscard]] std::byte* device_memory() noexcept { return device_memory_.get(); }
  /// The pinned pool's allocator; its offsets index `pinned_memory()`.
  [[nodiscard]] A& pinned() noexcept { return pinned_; }
  /// The "pinned" allocation (ordinary aligned host memory; null if empty).
  [[nodiscard]] std::byte* pinned_memory() noexcept { return pinned_memory_.get(); }

 private:
  A arena_;
  A pinned_;
  detail::aligned_bytes device_memory_;
  detail::aligned_bytes pinned_memory_;
  std::function<void(copy_kind, std::size_t)> before_copy_;
};

/// The host device over memplan's own allocator.
using device = basic_device<runtime::arena>;

static_assert(memplan::device<device>);

}  // namespace memplan::host
