#pragma once
/// \file
/// TSPLIT (Nie et al., ICDE 2022) §IV-C, Algo 2 line 7: the live tensors
/// among which Algo 2 picks the smallest ΔT/ΔM (Eq. 3-4), indexed so that
/// the pick does not cost every one of them.
///
/// Each (tensor, option) pair has a lower bound of its ΔT/ΔM that the index
/// can produce in ascending order:
/// - swap: Eq. 3's swap-out term, max(T_d2h(size) - idle(j+1, i), 0), over
///   the size (its backward term is >= 0). Tensors of one size are kept in
///   order of j, the step after which their device copy exists; idle(j+1, i)
///   only shrinks as j grows, whatever the link occupancy Oc_u is, so within
///   a size the bound rises along that order (up to rounding) and the sizes
///   are merged by a heap. Models repeat few sizes (a layer's activations),
///   so the heap is small.
/// - recompute: Eq. 4's sum includes the producer's own T_u, so T_producer
///   over the size, fixed per tensor.
///
/// Algo 2 costs the pairs in that order and stops once the bound exceeds the
/// best ΔT/ΔM found. Many pairs can cost nothing (bound 0), and Algo 2 takes
/// the oldest of those: tensors never evicted ("fresh": j is their
/// producer) are kept apart from those back from an eviction, because
/// their order of j is the order of age, so a fresh size's walk ends at the
/// first tensor younger than a free option already found.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "memplan/cost/device.hpp"
#include "memplan/planners/tsplit/cost.hpp"
#include "memplan/problem.hpp"

namespace memplan::detail::tsplit {

enum class option : std::uint8_t { swap, recompute };

class candidate_index {
 public:
  candidate_index(const problem& p, const device_spec& dev)
      : p_(&p), dev_(&dev), stream_of_(p.num_tensors(), no_index), entry_(p.num_tensors(), 0) {
    // idle(j+1, i) is a difference of prefix sums of up to the whole run's
    // time: their rounding, with a wide margin, is how far a bound may
    // exceed the ΔT it bounds.
    for (const double us : p.time_us) slack_us_ += us;
    slack_us_ *= 1e-12;
  }

  /// Adds t, whose device copy exists after step `made` (j of Eq. 3).
  void insert(index_t t, index_t made) {
    const auto ti = static_cast<std::size_t>(t);
    const bytes_t b = p_->bytes[ti];
    if (b <= 0) return;  // frees nothing: never a candidate
    const bool fresh = made == p_->producer[ti];
    const bool state = p_->persistent(t);
    const auto [it, added] = size_index_.try_emplace(b, static_cast<index_t>(streams_.size()));
    if (added) {
      const double to_host = dev_->d2h.transfer_us(b);
      for (const bool s : {false, true}) {
        streams_.push_back({b, to_host, true, s, {}});
        streams_.push_back({b, to_host, false, s, {}});
      }
    }
    stream_of_[ti] = it->second + (state ? 2 : 0) + (fresh ? 0 : 1);
    entry_[ti] = (static_cast<std::uint64_t>(made + 1) << 32) | static_cast<std::uint32_t>(t);
    streams_[static_cast<std::size_t>(stream_of_[ti])].by_made.insert(entry_[ti]);
    if (const double r = recompute_bound(t); r < std::numeric_limits<double>::infinity()) by_recompute_.insert({r, t});
  }
  void erase(index_t t) {
    const auto ti = static_cast<std::size_t>(t);
    if (stream_of_[ti] == no_index) return;  // never inserted
    streams_[static_cast<std::size_t>(stream_of_[ti])].by_made.erase(entry_[ti]);
    if (const double r = recompute_bound(t); r < std::numeric_limits<double>::infinity()) by_recompute_.erase({r, t});
  }

  /// Calls visit(t, how) for the pairs of the parameters and optimizer state
  /// (`state`) or of the other tensors in ascending order of their lower
  /// bound at step `i`, while that bound is at most bound() (the best
  /// ΔT/ΔM so far; infinity when there is none), ties and rounding
  /// included. visit
  /// returns false when no tensor made after t's producer can beat the best
  /// any more: the rest of a fresh stream is skipped. `unbounded`: every
  /// swap's bound is 0 (an offloaded state's swap has no swap-out term here).
  template <class Bound, class Visit>
  void visit(const link_occupancy& out, index_t i, bool state, Bound bound, Visit visit, bool unbounded = false) {
    heads_.clear();
    unbounded_ = unbounded;
    for (std::size_t s = 0; s < streams_.size(); ++s) {
      if (streams_[s].state == state && !streams_[s].by_made.empty()) {
        push_swap(out, i, static_cast<index_t>(s), streams_[s].by_made.begin());
      }
    }
    if (!state && !by_recompute_.empty()) push_recompute(by_recompute_.begin());
    while (!heads_.empty()) {
      std::pop_heap(heads_.begin(), heads_.end(), later);
      const head h = heads_.back();
      heads_.pop_back();
      if (h.delta_t > bound() * static_cast<double>(h.delta_m) + slack_us_) return;
      if (h.stream == no_index) {
        (void)visit(h.recompute->second, option::recompute);
        if (const auto next = std::next(h.recompute); next != by_recompute_.end()) push_recompute(next);
        continue;
      }
      const stream& s = streams_[static_cast<std::size_t>(h.stream)];
      const bool go_on = visit(static_cast<index_t>(*h.swap & 0xffffffffU), option::swap);
      if (const auto next = std::next(h.swap); next != s.by_made.end() && (go_on || !s.fresh)) {
        push_swap(out, i, h.stream, next);
      }
    }
  }

 private:
  using by_made_t = std::set<std::uint64_t>;  ///< (j + 1) << 32 | tensor
  using by_recompute_t = std::set<std::pair<double, index_t>>;  ///< (T_producer / size, tensor)
  /// The tensors of one size, fresh or back from an eviction, of the
  /// training's state or not, in order of j.
  struct stream {
    bytes_t bytes = 0;
    double to_host_us = 0;  ///< T_d2h(bytes)
    bool fresh = true;
    bool state = false;  ///< parameters and optimizer state
    by_made_t by_made;
  };
  /// One stream's (or the recompute order's) next pair.
  struct head {
    double lower_bound = 0;  ///< of ΔT/ΔM: delta_t / delta_m
    double delta_t = 0;      ///< a lower bound of ΔT, µs
    bytes_t delta_m = 0;
    index_t stream = no_index;  ///< no_index: the recompute order
    by_made_t::const_iterator swap;
    by_recompute_t::const_iterator recompute;
  };
  static bool later(const head& a, const head& b) noexcept { return a.lower_bound > b.lower_bound; }

  /// T_producer / size; infinite where t cannot be recomputed (Algo 2 never
  /// recomputes parameters or optimizer state).
  [[nodiscard]] double recompute_bound(index_t t) const {
    const auto ti = static_cast<std::size_t>(t);
    const index_t producer = p_->producer[ti];
    if (producer == no_index || !p_->recomputable[static_cast<std::size_t>(producer)] || p_->persistent(t)) {
      return std::numeric_limits<double>::infinity();
    }
    return p_->time_us[static_cast<std::size_t>(producer)] / static_cast<double>(p_->bytes[ti]);
  }
  void push_swap(const link_occupancy& out, index_t i, index_t s, by_made_t::const_iterator it) {
    const stream& c = streams_[static_cast<std::size_t>(s)];
    const auto from = static_cast<index_t>(*it >> 32);
    // swap_cost_of's forward term.
    const double forward = unbounded_ ? 0.0 : std::max(c.to_host_us - out.idle(from, i), 0.0);
    heads_.push_back({forward / static_cast<double>(c.bytes), forward, c.bytes, s, it, {}});
    std::push_heap(heads_.begin(), heads_.end(), later);
  }
  void push_recompute(by_recompute_t::const_iterator it) {
    const auto ti = static_cast<std::size_t>(it->second);
    heads_.push_back({it->first, p_->time_us[static_cast<std::size_t>(p_->producer[ti])], p_->bytes[ti], no_index, {}, it});
    std::push_heap(heads_.begin(), heads_.end(), later);
  }

  const problem* p_;
  const device_spec* dev_;
  std::vector<index_t> stream_of_;      ///< per tensor: into streams_
  std::vector<std::uint64_t> entry_;    ///< per tensor: its key in its stream
  std::unordered_map<bytes_t, index_t> size_index_;  ///< size -> its first of four streams
  std::vector<stream> streams_;
  by_recompute_t by_recompute_;
  std::vector<head> heads_;
  bool unbounded_ = false;  ///< of the current visit
  double slack_us_ = 0;
};

}  // namespace memplan::detail::tsplit
