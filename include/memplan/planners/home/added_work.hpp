#pragma once
/// \file
/// Which moves of Algo 3 only add work to a placement's plan (issue 29):
/// then the moved placement's run without a budget takes no less time, a
/// floor under its fitness that the residency floor's excess alone lacks.
///
/// Without a budget every action starts once its stream and its waits are
/// done (the simulator's first pass), so a plan that has another's actions
/// in the same order with more actions between them, and more or later
/// waits, starts none of them earlier — by induction in issue order, each
/// one's stream predecessor and waits end no earlier — and its time, the
/// latest end, is no less. Moving a retained map j (feature_maps.hpp's
/// `emit`) gives such a plan
/// - to swap: a swap-out once the forward pass is done with j, a swap-in
///   before its first need, and waits on it; the other maps' needs, which
///   place their prefetches, do not depend on where j is;
/// - to recompute: a free, and recomputations of j's maker — and of the
///   makers of the maps placed recompute that it reads, in turn — before
///   the ops that need them; a prefetch triggered after one waits on a
///   later compute-stream action than before. Unless a maker in that chain
///   reads a swapped map (needed back earlier, its prefetch would move up)
///   or makes another evicted map (its own reader would find it there and
///   recompute less).

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "memplan/planners/home/feature_maps.hpp"
#include "memplan/problem.hpp"

namespace memplan::detail::home {

/// Per feature map, the maps its maker reads and the other maps it makes;
/// answers whether a move only adds work (the file comment).
class added_work {
 public:
  added_work(const problem& p, const feature_maps& fm) : reads_begin_{0}, makes_begin_{0} {
    for (std::size_t j = 0; j < fm.size(); ++j) {
      const index_t made = p.producer[static_cast<std::size_t>(fm.tensor[j])];
      if (made != no_index) {
        for (const index_t t : p.inputs(made)) append(reads_, fm.map_of[static_cast<std::size_t>(t)]);
        for (const index_t t : p.outputs(made)) {
          if (t != fm.tensor[j]) append(makes_, fm.map_of[static_cast<std::size_t>(t)]);
        }
      }
      reads_begin_.push_back(static_cast<index_t>(reads_.size()));
      makes_begin_.push_back(static_cast<index_t>(makes_.size()));
    }
    seen_.assign(fm.size(), 0);
  }

  /// Whether placement `x` has the plan of `x` with map j retained plus
  /// work only: x[j] is swap, or recompute with a chain that reads no
  /// swapped map and makes no other evicted one (the file comment).
  [[nodiscard]] bool only_adds(std::span<const placement> x, std::size_t j) {
    if (x[j] == placement::swap) return true;
    if (x[j] != placement::recompute) return false;
    ++stamp_;
    chain_.assign(1, static_cast<index_t>(j));
    seen_[j] = stamp_;
    while (!chain_.empty()) {
      const auto m = static_cast<std::size_t>(chain_.back());
      chain_.pop_back();
      for (const index_t k : span_of(makes_begin_, makes_, m)) {
        if (x[static_cast<std::size_t>(k)] != placement::retain) return false;
      }
      for (const index_t k : span_of(reads_begin_, reads_, m)) {
        const auto ki = static_cast<std::size_t>(k);
        if (x[ki] == placement::swap) return false;
        if (x[ki] == placement::recompute && seen_[ki] != stamp_) {
          seen_[ki] = stamp_;
          chain_.push_back(k);
        }
      }
    }
    return true;
  }

 private:
  static void append(std::vector<index_t>& list, index_t map) {
    if (map != no_index) list.push_back(map);
  }
  [[nodiscard]] static std::span<const index_t> span_of(const std::vector<index_t>& begin,
                                                        const std::vector<index_t>& list, std::size_t j) {
    const auto b = static_cast<std::size_t>(begin[j]);
    return {list.data() + b, static_cast<std::size_t>(begin[j + 1]) - b};
  }

  std::vector<index_t> reads_begin_;  ///< per map, plus one: into reads_
  std::vector<index_t> reads_;        ///< the maps its maker reads
  std::vector<index_t> makes_begin_;  ///< per map, plus one: into makes_
  std::vector<index_t> makes_;        ///< the other maps its maker makes
  std::vector<std::uint32_t> seen_;   ///< per map: the stamp of the check that reached it
  std::uint32_t stamp_ = 0;
  std::vector<index_t> chain_;        ///< maps whose makers are still to check
};

}  // namespace memplan::detail::home
