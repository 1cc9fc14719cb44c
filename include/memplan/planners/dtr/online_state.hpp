#pragma once
/// \file
/// DTR (Kirisame et al., ICLR 2021) §4, h_DTR^eq: `detail::dtr::online_state`,
/// what an online policy (DTR, DELTA) sees while the runtime of online.hpp
/// executes a schedule — where each tensor is
/// (resident, evicted, offloaded, a prefetch in flight), whether the current
/// op pins it, its staleness, and its recompute cost including its evicted
/// neighbourhood.
///
/// Flat arrays, no pointer chasing: the tensors a policy may release are kept
/// in one dense candidate index (struct of arrays: tensor, cost, bytes, last
/// access), so that a decision is one linear, branch-free scoring pass over
/// contiguous floats (`best_candidate`).
///
/// Recompute cost (DTR §4, h_DTR^eq): evicted tensors form equivalence
/// classes in a union-find; a tensor evicted joins the classes of its evicted
/// parents and children, and a tensor brought back subtracts its own cost
/// from its class without splitting it (DTR's documented approximation). The
/// cost of a resident tensor t is c0(t) (its producer's time) plus the cost
/// of every distinct evicted class adjacent to t: what evicting t would make
/// rematerialising it, or its evicted neighbours, cost. The index caches this
/// cost per candidate; each class keeps the list of candidates on its border,
/// and every change of a class's cost (a member evicted, classes merged, a
/// member brought back) recomputes theirs, so the cached costs stay exact
/// and a decision never walks the graph.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "memplan/fwd.hpp"
#include "memplan/graph/vocabulary.hpp"
#include "memplan/planners/dtr/lineage.hpp"
#include "memplan/problem.hpp"

namespace memplan::detail::dtr {

/// Where a tensor is.
enum class residence : std::uint8_t {
  unmade,     ///< its producer has not run yet
  resident,   ///< on the device
  evicted,    ///< released without a copy (or dead): recompute to bring back
  offloaded,  ///< released with a host copy: reload (or recompute) to bring back
};

class online_state {
 public:
  /// Staleness floor (µs), so that a tensor touched just now has a finite score.
  static constexpr float min_staleness_us = 1e-3F;

  /// Tensors without a producer are resident; everything else is unmade.
  /// \param offloads whether tensors that cannot be recomputed may still be
  ///        released (by offloading): DELTA yes, DTR no.
  online_state(const problem& p, bytes_t budget, bool offloads)
      : p_(&p), budget_(budget), offloads_(offloads), where_(p.num_tensors(), residence::unmade),
        pins_(p.num_tensors(), 0), host_copy_(p.num_tensors(), 0), in_flight_(p.num_tensors(), 0),
        last_access_(p.num_tensors(), 0), position_(p.num_tensors(), no_index), node_(p.num_tensors(), no_index),
        own_cost_(p.num_tensors(), 0), seen_(p.num_tensors(), 0) {
    for (std::size_t t = 0; t < p.num_tensors(); ++t) {
      const index_t made = p.producer[t];
      own_cost_[t] = made != no_index && p.recomputable[static_cast<std::size_t>(made)] != 0
                         ? static_cast<float>(p.time_us[static_cast<std::size_t>(made)])
                         : std::numeric_limits<float>::infinity();
      if (made == no_index) make_resident(static_cast<index_t>(t));
    }
  }

  // ---- what policies read ----

  [[nodiscard]] const problem& prob() const noexcept { return *p_; }
  [[nodiscard]] bytes_t budget() const noexcept { return budget_; }
  [[nodiscard]] bytes_t used() const noexcept { return used_; }
  [[nodiscard]] double now_us() const noexcept { return now_us_; }
  [[nodiscard]] index_t step() const noexcept { return step_; }
  [[nodiscard]] residence where(index_t t) const { return where_[at(t)]; }
  [[nodiscard]] bool pinned(index_t t) const { return pins_[at(t)] > 0; }
  /// A host copy made by an earlier offload is still valid (tensors never change).
  [[nodiscard]] bool has_host_copy(index_t t) const { return host_copy_[at(t)] != 0; }
  /// Reloaded by a prefetch and not read since.
  [[nodiscard]] bool in_flight(index_t t) const { return in_flight_[at(t)] != 0; }
  /// Its producer may run again (DELTA's "not uncomputable").
  [[nodiscard]] bool recomputable(index_t t) const { return own_cost_[at(t)] != std::numeric_limits<float>::infinity(); }
  /// Compute-stream time since t was last made or read (µs).
  [[nodiscard]] double staleness_us(index_t t) const { return now_us_ - last_access_[at(t)]; }
  /// c(t) of DTR / c_r(t) of DELTA Eq. 5, exact now: t's producer time plus
  /// the cost of each evicted class next to it (infinite when t cannot be
  /// recomputed). `best_candidate` scores with the cached value.
  [[nodiscard]] float cost_us(index_t t) const { return neighbourhood_cost(t); }

  /// The tensors a policy may release now: resident, not pinned, not
  /// persistent, not empty, and recomputable or (when offloading) any.
  [[nodiscard]] std::span<const index_t> candidates() const noexcept { return cand_; }
  [[nodiscard]] bool candidate(index_t t) const { return position_[at(t)] != no_index; }

  /// The candidate with the smallest `score(cost_us, bytes, staleness_us)`,
  /// or no_index when there is none. One pass over contiguous floats.
  template <class Score>
  [[nodiscard]] index_t best_candidate(Score score) const {
    const std::size_t n = cand_.size();
    if (n == 0) return no_index;
    scores_.resize(n);
    const auto now = static_cast<float>(now_us_);
    const float* cost = cand_cost_.data();
    const float* bytes = cand_bytes_.data();
    const float* last = cand_last_.data();
    float* out = scores_.data();
    // Scores first (a loop the compiler vectorises), then the minimum in
    // `lanes` independent chains (no loop-carried dependence on one value),
    // ties to the lowest index.
    for (std::size_t i = 0; i < n; ++i) out[i] = score(cost[i], bytes[i], now - last[i] + min_staleness_us);
    constexpr std::size_t lanes = 8;
    std::array<float, lanes> low;
    std::array<std::size_t, lanes> at_low{};
    low.fill(std::numeric_limits<float>::infinity());
    std::size_t i = 0;
    for (; i + lanes <= n; i += lanes) {
      for (std::size_t j = 0; j < lanes; ++j) {
        const bool better = out[i + j] < low[j];
        low[j] = better ? out[i + j] : low[j];
        at_low[j] = better ? i + j : at_low[j];
      }
    }
    std::size_t best = 0;
    float value = std::numeric_limits<float>::infinity();
    for (std::size_t j = 0; j < lanes; ++j) {
      if (low[j] < value || (low[j] == value && at_low[j] < best)) value = low[j], best = at_low[j];
    }
    for (; i < n; ++i) {  // the tail: later indices, so only a smaller score wins
      if (out[i] < value) value = out[i], best = i;
    }
    return cand_[best];
  }

  // ---- transitions (the runtime's; tests build states with them) ----

  void set_step(index_t s) noexcept { step_ = s; }
  /// Advances the compute-stream clock by `us`.
  void advance(double us) noexcept { now_us_ += us; }
  /// t was made or read now.
  void touch(index_t t) {
    last_access_[at(t)] = now_us_;
    in_flight_[at(t)] = 0;
    if (const index_t i = position_[at(t)]; i != no_index) cand_last_[static_cast<std::size_t>(i)] = static_cast<float>(now_us_);
  }
  void pin(index_t t) {
    if (pins_[at(t)]++ == 0) leave_index(t);
  }
  void unpin(index_t t) {
    if (--pins_[at(t)] == 0) enter_index(t);
  }
  /// t is on the device again (made, recomputed or reloaded).
  void make_resident(index_t t, bool by_prefetch = false) {
    const std::size_t ti = at(t);
    if (where_[ti] == residence::resident) return;
    where_[ti] = residence::resident;
    used_ += p_->bytes[ti];
    peak_ = std::max(peak_, used_);
    in_flight_[ti] = by_prefetch ? 1 : 0;
    last_access_[ti] = now_us_;
    index_t left = no_index;
    if (node_[ti] != no_index) {  // DTR: leave the class, taking t's cost out of it
      left = find(node_[ti]);
      class_cost_[static_cast<std::size_t>(left)] -= own_cost_[ti];
      node_[ti] = no_index;
    }
    enter_index(t);
    if (left != no_index) refresh_border(left);
  }
  /// t leaves the device (or its host copy is dropped) without a copy; a
  /// recomputable t joins the evicted classes.
  void make_evicted(index_t t) {
    release(t, residence::evicted);
    if (!recomputable(t)) return;
    const std::size_t ti = at(t);
    node_[ti] = static_cast<index_t>(uf_parent_.size());
    uf_parent_.push_back(node_[ti]);
    class_cost_.push_back(own_cost_[ti]);
    border_.emplace_back();
    for_each_neighbour(t, [&](index_t n) {
      if (node_[at(n)] != no_index && n != t) unite(node_[ti], node_[at(n)]);
    });
    const index_t r = find(node_[ti]);
    for_each_neighbour(t, [&](index_t n) {
      if (position_[at(n)] != no_index) border_[static_cast<std::size_t>(r)].push_back(n);
    });
    refresh_border(r);
  }
  /// t leaves the device with a host copy.
  void make_offloaded(index_t t) {
    release(t, residence::offloaded);  // no class: DTR counts evicted neighbours only
    host_copy_[at(t)] = 1;
  }
  /// Memory the current op needs beyond its tensors (workspace), held for
  /// its duration: counts towards the peak.
  void hold(bytes_t b) {
    used_ += b;
    peak_ = std::max(peak_, used_);
  }
  void drop(bytes_t b) noexcept { used_ -= b; }
  [[nodiscard]] bytes_t peak() const noexcept { return peak_; }

 private:
  [[nodiscard]] static std::size_t at(index_t t) { return static_cast<std::size_t>(t); }

  void release(index_t t, residence to) {
    const std::size_t ti = at(t);
    leave_index(t);
    if (where_[ti] == residence::resident) used_ -= p_->bytes[ti];
    where_[ti] = to;
    in_flight_[ti] = 0;
  }
  [[nodiscard]] bool eligible(index_t t) const {
    const std::size_t ti = at(t);
    return where_[ti] == residence::resident && pins_[ti] == 0 && !p_->persistent(t) && p_->bytes[ti] > 0 &&
           (offloads_ || recomputable(t));
  }
  void enter_index(index_t t) {
    if (position_[at(t)] != no_index || !eligible(t)) return;
    position_[at(t)] = static_cast<index_t>(cand_.size());
    cand_.push_back(t);
    cand_cost_.push_back(neighbourhood_cost(t, true));
    cand_bytes_.push_back(static_cast<float>(p_->bytes[at(t)]));
    cand_last_.push_back(static_cast<float>(last_access_[at(t)]));
  }
  void leave_index(index_t t) {  // swap with the last entry
    const index_t i = position_[at(t)];
    if (i == no_index) return;
    const auto ii = static_cast<std::size_t>(i);
    const index_t moved = cand_.back();
    cand_[ii] = moved;
    cand_cost_[ii] = cand_cost_.back();
    cand_bytes_[ii] = cand_bytes_.back();
    cand_last_[ii] = cand_last_.back();
    position_[at(moved)] = i;
    cand_.pop_back();
    cand_cost_.pop_back();
    cand_bytes_.pop_back();
    cand_last_.pop_back();
    position_[at(t)] = no_index;
  }

  /// t's neighbours now (lineage.hpp).
  template <class F>
  void for_each_neighbour(index_t t, F f) const {
    detail::dtr::for_each_neighbour(*p_, t, step_, f);
  }

  /// c0(t) plus each distinct evicted class next to t; `enlist` records t
  /// on the border of those classes.
  [[nodiscard]] float neighbourhood_cost(index_t t, bool enlist = false) const {
    float cost = own_cost_[at(t)];
    roots_.clear();
    for_each_neighbour(t, [&](index_t n) {
      const index_t node = node_[at(n)];
      if (node == no_index) return;
      const index_t r = find(node);
      if (std::ranges::find(roots_, r) != roots_.end()) return;
      roots_.push_back(r);
      cost += class_cost_[static_cast<std::size_t>(r)];
    });
    if (enlist) {
      for (const index_t r : roots_) border_[static_cast<std::size_t>(r)].push_back(t);
    }
    return cost;
  }
  /// Recomputes the cached cost of every candidate on the border of class
  /// r, whose cost changed, and drops the entries that are no longer
  /// candidates or repeat.
  void refresh_border(index_t r) {
    auto& list = border_[static_cast<std::size_t>(r)];
    ++stamp_;
    std::size_t kept = 0;
    for (const index_t n : list) {
      const index_t i = position_[at(n)];
      if (i == no_index || seen_[at(n)] == stamp_) continue;
      seen_[at(n)] = stamp_;
      cand_cost_[static_cast<std::size_t>(i)] = neighbourhood_cost(n);
      list[kept++] = n;
    }
    list.resize(kept);
  }
  [[nodiscard]] index_t find(index_t x) const {
    while (uf_parent_[static_cast<std::size_t>(x)] != x) {
      auto& up = uf_parent_[static_cast<std::size_t>(x)];
      up = uf_parent_[static_cast<std::size_t>(up)];  // path halving
      x = up;
    }
    return x;
  }
  void unite(index_t a, index_t b) {
    a = find(a);
    b = find(b);
    if (a == b) return;
    // The root with the longer border list stays root: lists move small to large.
    if (border_[static_cast<std::size_t>(a)].size() < border_[static_cast<std::size_t>(b)].size()) std::swap(a, b);
    uf_parent_[static_cast<std::size_t>(b)] = a;
    class_cost_[static_cast<std::size_t>(a)] += class_cost_[static_cast<std::size_t>(b)];
    auto& into = border_[static_cast<std::size_t>(a)];
    auto& from = border_[static_cast<std::size_t>(b)];
    into.insert(into.end(), from.begin(), from.end());
    from.clear();
    from.shrink_to_fit();
  }

  const problem* p_;
  bytes_t budget_;
  bool offloads_;
  bytes_t used_ = 0;
  bytes_t peak_ = 0;
  double now_us_ = 0;
  index_t step_ = 0;
  // Per tensor.
  std::vector<residence> where_;
  std::vector<std::int32_t> pins_;
  std::vector<std::uint8_t> host_copy_;
  std::vector<std::uint8_t> in_flight_;
  std::vector<double> last_access_;
  std::vector<index_t> position_;  ///< in the candidate index, or no_index
  std::vector<index_t> node_;      ///< union-find node while evicted, or no_index
  std::vector<float> own_cost_;    ///< c0: producer time, infinite when not recomputable
  // The candidate index (struct of arrays).
  std::vector<index_t> cand_;
  std::vector<float> cand_cost_;
  std::vector<float> cand_bytes_;
  std::vector<float> cand_last_;
  mutable std::vector<float> scores_;
  // Evicted classes (union-find over eviction events).
  mutable std::vector<index_t> uf_parent_;
  std::vector<float> class_cost_;
  /// Per class root: tensors that were candidates next to the class when
  /// last seen (kept so that a change of its cost reaches them).
  mutable std::vector<std::vector<index_t>> border_;
  std::vector<std::uint32_t> seen_;  ///< per tensor: refresh_border's stamp
  std::uint32_t stamp_ = 0;
  mutable std::vector<index_t> roots_;
};

}  // namespace memplan::detail::dtr
