#pragma once
/// \file
/// `parallel_for`: items handed out one at a time to a few threads, for
/// planners whose items are independent. Which thread runs which item must
/// not change the result; only the order of side effects may differ.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace memplan::detail {

/// The thread count `requested` means: 0 is every core.
[[nodiscard]] inline std::size_t thread_count(int requested) {
  if (requested > 0) return static_cast<std::size_t>(requested);
  return std::max<std::size_t>(1, std::thread::hardware_concurrency());
}

/// Calls `f(worker, item)` for every item in [0, count) on `threads` threads.
/// Items are dealt round-robin: item i always runs on worker i % threads
/// (worker in [0, threads) names the thread), so per-worker state such as a
/// cache sees the same items every time. The first exception a call throws
/// is rethrown here once every thread is done.
template <class F>
void parallel_for(std::size_t threads, std::size_t count, F&& f) {
  threads = std::clamp<std::size_t>(threads, 1, std::max<std::size_t>(count, 1));
  std::exception_ptr failure;
  std::mutex failure_lock;
  std::atomic<bool> failed{false};
  const auto work = [&](std::size_t worker) {
    for (std::size_t i = worker; i < count && !failed; i += threads) {
      try {
        f(worker, i);
      } catch (...) {
        const std::lock_guard lock(failure_lock);
        if (!failure) failure = std::current_exception();
        failed = true;
      }
    }
  };
  {
    std::vector<std::jthread> pool;
    pool.reserve(threads - 1);
    for (std::size_t w = 1; w < threads; ++w) pool.emplace_back(work, w);
    work(0);
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace memplan::detail
