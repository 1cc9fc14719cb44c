#pragma once
/// \file
/// Capuchin (Peng et al., ASPLOS 2020) §4.5: the memory curve the policy
/// maker infers from the allocation and deallocation times seen in measured
/// execution ("we can keep track allocation and deallocation time of
/// tensors to infer memory usage"), updated as tensors join the eviction set.

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

#include "memplan/fwd.hpp"

namespace memplan::detail::capuchin {

/// Bytes in use per step against a budget; the steps above it are the
/// peak period.
class memory_estimate {
 public:
  memory_estimate(std::vector<bytes_t> per_step, bytes_t budget) : mem_(std::move(per_step)), budget_(budget) {}

  [[nodiscard]] bytes_t budget() const noexcept { return budget_; }
  [[nodiscard]] bytes_t at(index_t s) const { return mem_[static_cast<std::size_t>(s)]; }
  /// How far the highest step exceeds the budget; 0 when every step fits.
  [[nodiscard]] bytes_t excess() const {
    sync();
    return excess_;
  }

  /// Adds `bytes` (negative: releases) at steps [from, to]; empty when from > to.
  void add(index_t from, index_t to, bytes_t bytes) {
    for (index_t s = std::max<index_t>(from, 0); s <= to; ++s) mem_[static_cast<std::size_t>(s)] += bytes;
    stale_ = true;
  }
  /// Whether some step in [from, to] is above the budget (lies in the peak period).
  [[nodiscard]] bool covers_peak(index_t from, index_t to) const {
    if (from > to) return false;
    sync();
    return over_[static_cast<std::size_t>(to) + 1] - over_[static_cast<std::size_t>(from)] > 0;
  }
  /// The latest step in [from, to] where `bytes` more would not fit, or no_index.
  [[nodiscard]] index_t last_over(index_t from, index_t to, bytes_t bytes) const {
    for (index_t s = to; s >= from; --s) {
      if (mem_[static_cast<std::size_t>(s)] + bytes > budget_) return s;
    }
    return no_index;
  }
  /// Brings a tensor of `bytes` back earlier, step by step from `from`
  /// (it is there from the step after) towards `to`, while it fits at each
  /// step it joins (Capuchin §4.4: an in-trigger never lies inside the peak).
  /// \returns the earliest step reached.
  index_t advance(bytes_t bytes, index_t from, index_t to) {
    index_t k = from;
    for (; k > to && mem_[static_cast<std::size_t>(k)] + bytes <= budget_; --k) {
      mem_[static_cast<std::size_t>(k)] += bytes;
    }
    stale_ = stale_ || k < from;
    return k;
  }
  /// The highest value over [from, to] (0 when empty).
  [[nodiscard]] bytes_t max_over(index_t from, index_t to) const {
    bytes_t m = 0;
    for (index_t s = from; s <= to; ++s) m = std::max(m, mem_[static_cast<std::size_t>(s)]);
    return m;
  }

 private:
  /// Recounts the steps above the budget after changes (queries are far rarer than changes).
  void sync() const {
    if (!stale_) return;
    stale_ = false;
    over_.resize(mem_.size() + 1);
    over_[0] = 0;
    bytes_t high = 0;
    for (std::size_t s = 0; s < mem_.size(); ++s) {
      over_[s + 1] = over_[s] + (mem_[s] > budget_ ? 1 : 0);
      high = std::max(high, mem_[s]);
    }
    excess_ = std::max<bytes_t>(0, high - budget_);
  }

  std::vector<bytes_t> mem_;
  bytes_t budget_;
  mutable bool stale_ = true;
  mutable std::vector<index_t> over_;  ///< prefix counts of steps above the budget
  mutable bytes_t excess_ = 0;
};

}  // namespace memplan::detail::capuchin
