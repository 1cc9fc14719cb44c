#pragma once
/// \file
/// Floors under the peak of a HOME placement's plan, found without
/// simulating it (issue 29): the evaluator answers from them where they
/// already decide Algo 3's comparison or prove the budget cannot hold.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "memplan/cost/device.hpp"
#include "memplan/planners/baselines/common.hpp"
#include "memplan/planners/home/feature_maps.hpp"
#include "memplan/problem.hpp"

namespace memplan::detail::home {

/// A timing-free proof that a placement does not fit (issue 29): while
/// the op of step s runs, every tensor live at s by DESIGN.md §4's rule is
/// on the device but the evicted feature maps after the forward pass is
/// done with them, until the first op that reads one again: brought back
/// for it, a map stays until its last reader — the plan frees or swaps out
/// nothing else, and an evicted map stays until its last forward reader
/// has run. None of them can be freed before the op starts (it or a later
/// op holds each), so if their bytes exceed the budget at some step, the
/// op can never start and the simulation under the budget would fail. A
/// retained tensor that a recomputation reads stays too, until that
/// recomputation, which no step before the first to read a recomputed map
/// can start (only such a read starts one).
///
/// Without a budget the ops before the first that reads an evicted map are
/// timed exactly without simulating them: they run back to back from 0,
/// and the swap-outs, issued in the order the forward pass is done with
/// their maps, run one after another on the copy stream, each once its
/// map's maker has ended. A swapped map is still on the device when such
/// an op starts before its swap-out ends (frees at an instant come first),
/// which tightens the floor under the peak of that run.
class residency_bound {
 public:
  residency_bound(const problem& p, const feature_maps& fm, const device_spec& dev)
      : p_(&p), live_(p.baseline_memory()), swap_order_(fm.done_list) {
    const baselines::forward_backward_uses uses(p);
    for (std::size_t j = 0; j < fm.size(); ++j) {
      const index_t t = fm.tensor[j];
      evicted_from_.push_back(uses.forward_done(p, t) + 1);
      evicted_to_.push_back(p.live_end(t) + 1);
      bytes_.push_back(p.bytes[static_cast<std::size_t>(t)]);
      const auto uses_t = p.uses(t);
      const auto read = std::ranges::find_if(uses_t, [&](index_t s) { return s >= evicted_from_.back(); });
      back_at_.push_back(read != uses_t.end() ? std::min(*read, evicted_to_.back()) : evicted_to_.back());
    }
    find_recompute_sources(p, fm);
    time_steps(p, fm, dev);
  }

  /// Two floors under the peak of a placement's plan.
  struct floors {
    /// The bytes on the device while some op runs, in any run of it (with
    /// or without a budget).
    bytes_t any_run = 0;
    /// Under the peak of the run without a budget: at least `any_run`, and
    /// the swapped maps still being copied out when an op starts.
    bytes_t unbounded = 0;
  };
  /// Both floors of placement `x`, from one count of its evictions.
  [[nodiscard]] floors floors_of(std::span<const placement> x) {
    count_evictions(x);
    count_recompute_sources(x);
    count_copies_in_flight();
    return highest();
  }

 private:
  /// `change_`: per step, the evicted feature maps' bytes from there on;
  /// `roots_`, the maps placed recompute that an op reads again; `first_`,
  /// the first such op; `timed_`, the first op that reads an evicted map;
  /// `swapped_`, the maps placed swap, in the order of their swap-outs.
  void count_evictions(std::span<const placement> x) {
    const std::size_t steps = live_.size();
    change_.assign(steps + 1, 0);
    in_flight_.assign(steps + 1, 0);
    roots_.clear();
    swapped_.clear();
    first_ = static_cast<index_t>(steps);
    timed_ = static_cast<index_t>(steps);
    for (const index_t jj : swap_order_) {
      const auto j = static_cast<std::size_t>(jj);
      if (x[j] == placement::retain) continue;
      // A map made after the forward pass started something else is left
      // out: its copy counts nowhere, and the later ones are timed earlier.
      if (x[j] == placement::swap && made_us_[j] != untimed) swapped_.push_back(jj);
      if (evicted_from_[j] >= evicted_to_[j]) continue;
      change_[static_cast<std::size_t>(evicted_from_[j])] += bytes_[j];
      change_[static_cast<std::size_t>(back_at_[j])] -= bytes_[j];
      if (back_at_[j] == evicted_to_[j]) continue;  // not read again
      timed_ = std::min(timed_, back_at_[j]);
      if (x[j] != placement::recompute) continue;
      first_ = std::min(first_, back_at_[j]);
      roots_.push_back(static_cast<index_t>(j));
    }
  }
  /// Keeps in `change_`, past their last use, the tensors the
  /// recomputations will read that the placement leaves on the device: the
  /// inputs of a recomputed map's maker, and through an input that is
  /// recomputed in turn (HOME §2.2's chain FM1 -> FM2 -> FM3), that one's
  /// maker's inputs — until the step whose preparation runs that chain.
  void count_recompute_sources(std::span<const placement> x) {
    if (roots_.empty()) return;
    ++stamp_;
    held_.clear();
    for (const index_t j : roots_) count_chain(x, static_cast<std::size_t>(j), first_);
    for (const index_t t : held_) {
      const auto ti = static_cast<std::size_t>(t);
      change_[static_cast<std::size_t>(dies_[ti])] -= p_->bytes[ti];
      change_[static_cast<std::size_t>(held_until_[ti])] += p_->bytes[ti];
    }
  }
  /// The chain that preparing step `back_at_[root]` runs, the first to read
  /// the root since it was evicted: the root is off the device then (a
  /// chain that recomputed it before released it again, as the step did not
  /// read it), and so is each map of the chain placed recompute, unless it
  /// came back for a read of its own before that step (then it stays, and
  /// the chain ends there). A map whose maker makes another map may have
  /// come back with it; its maker's inputs are held only until `first`, the
  /// first step whose preparation recomputes anything.
  void count_chain(std::span<const placement> x, std::size_t root, index_t first) {
    const index_t at = back_at_[root];
    ++visit_;
    chain_.assign(1, static_cast<index_t>(root));
    while (!chain_.empty()) {
      const auto j = static_cast<std::size_t>(chain_.back());
      chain_.pop_back();
      const index_t until = has_sibling_[j] != 0 ? first : at;
      for (auto k = static_cast<std::size_t>(source_begin_[j]); k < static_cast<std::size_t>(source_begin_[j + 1]); ++k) {
        const recompute_source& src = sources_[k];
        const placement placed = src.map != no_index ? x[static_cast<std::size_t>(src.map)] : placement::retain;
        if (placed == placement::recompute) {
          const auto m = static_cast<std::size_t>(src.map);
          const bool back_before = back_at_[m] < evicted_to_[m] && back_at_[m] < at;
          if (!back_before && visited_[m] != visit_) {
            visited_[m] = visit_;
            chain_.push_back(src.map);
          }
        }
        if (placed == placement::retain && dies_[static_cast<std::size_t>(src.tensor)] < until) hold(src.tensor, until);
      }
    }
  }
  /// Retained tensor t stays at least until step `until`.
  void hold(index_t t, index_t until) {
    const auto ti = static_cast<std::size_t>(t);
    if (counted_[ti] != stamp_) {
      counted_[ti] = stamp_;
      held_until_[ti] = until;
      held_.push_back(t);
    } else {
      held_until_[ti] = std::max(held_until_[ti], until);
    }
  }
  /// Counts in `in_flight_` the swapped maps whose swap-out, timed as the
  /// simulator's run without a budget times it (resolver::begin: the
  /// stream's end or the waited-for action's, whichever is later), has not
  /// ended when an op starts, of the ops before the first that reads an
  /// evicted map: those run back to back from 0 (nothing they read is
  /// evicted, and no recomputation runs before such a read).
  void count_copies_in_flight() {
    const auto ops = static_cast<std::size_t>(timed_);
    double copy_stream_end = 0;
    std::size_t until = 0;
    for (const index_t jj : swapped_) {
      const auto j = static_cast<std::size_t>(jj);
      const double end = std::max(copy_stream_end, made_us_[j]) + copy_us_[j];
      copy_stream_end = end;
      // On the device from the first op after the forward pass is done with
      // it to the first that starts once it is copied out, live or not (a
      // map the backward pass does not read is held by its swap-out too).
      // The copies end in order, so that op only moves on.
      while (until < ops && start_us_[until] < end) ++until;
      const auto from = static_cast<std::size_t>(evicted_from_[j]);
      if (from >= until) continue;
      in_flight_[from] += bytes_[j];
      in_flight_[until] -= bytes_[j];
    }
  }
  /// The highest level over the steps without and with the copies in flight.
  [[nodiscard]] floors highest() const {
    bytes_t evicted = 0;
    bytes_t copying = 0;
    floors f;
    for (std::size_t s = 0; s < live_.size(); ++s) {
      evicted += change_[s];
      copying += in_flight_[s];
      const bytes_t level = live_[s] - evicted;
      f.any_run = std::max(f.any_run, level);
      f.unbounded = std::max(f.unbounded, level + copying);
    }
    return f;
  }
  /// Per feature map, the inputs of its maker that die before the end
  /// (DESIGN.md §4), which recomputing it reads again.
  void find_recompute_sources(const problem& p, const feature_maps& fm) {
    const std::vector<index_t>& map_of = fm.map_of;
    source_begin_.assign(1, 0);
    for (std::size_t j = 0; j < fm.size(); ++j) {
      const index_t made = p.producer[static_cast<std::size_t>(fm.tensor[j])];
      has_sibling_.push_back(made != no_index && std::ranges::any_of(p.outputs(made), [&](index_t t) {
        return t != fm.tensor[j] && map_of[static_cast<std::size_t>(t)] != no_index;
      }));
      if (made != no_index && fm.can_recompute[j] != 0) {
        for (const index_t t : p.inputs(made)) {
          const index_t map = map_of[static_cast<std::size_t>(t)];
          if (static_cast<std::size_t>(p.live_end(t)) + 1 >= p.num_steps() && map == no_index) continue;
          sources_.push_back({t, map});
        }
      }
      source_begin_.push_back(static_cast<index_t>(sources_.size()));
    }
    for (std::size_t t = 0; t < p.num_tensors(); ++t) dies_.push_back(p.live_end(static_cast<index_t>(t)) + 1);
    counted_.assign(p.num_tensors(), 0);
    held_until_.assign(p.num_tensors(), 0);
    visited_.assign(fm.size(), 0);
  }
  /// `start_us_`, every step's start if the ops ran back to back, and per
  /// feature map made by a leading forward step when its maker ends, and
  /// how long its swap-out runs.
  void time_steps(const problem& p, const feature_maps& fm, const device_spec& dev) {
    double compute_end = 0;
    std::vector<double> end_us;
    for (std::size_t s = 0; s < p.num_steps(); ++s) {
      start_us_.push_back(compute_end);
      compute_end += p.time_us[s];  // the simulator's op_time of a whole op
      end_us.push_back(compute_end);
    }
    std::size_t leading = 0;
    while (leading < p.num_steps() && p.op_phase[leading] == phase::forward) ++leading;
    for (std::size_t j = 0; j < fm.size(); ++j) {
      const index_t made = p.producer[static_cast<std::size_t>(fm.tensor[j])];
      const bool timed = made == no_index || static_cast<std::size_t>(made) < leading;
      made_us_.push_back(made == no_index ? 0.0 : timed ? end_us[static_cast<std::size_t>(made)] : untimed);
      copy_us_.push_back(dev.d2h.transfer_us(bytes_[j]));
    }
  }

  static constexpr double untimed = -1;  ///< made_us_ of a map made outside the leading forward steps

  /// An input of a recomputable map's maker: a map, or a tensor that dies before the end.
  struct recompute_source {
    index_t tensor;
    index_t map;    ///< its feature map, or no_index
  };

  const problem* p_;
  std::vector<bytes_t> live_;          ///< per step, with no planning
  std::vector<index_t> evicted_from_;  ///< per feature map: the first step it may be off the device
  std::vector<index_t> evicted_to_;    ///< per feature map: one past its last live step
  std::vector<bytes_t> bytes_;         ///< per feature map
  std::vector<index_t> back_at_;       ///< per feature map: the first step reading it while it may be off the device, else evicted_to_
  std::vector<index_t> swap_order_;    ///< feature maps in the order their swap-outs are issued
  std::vector<double> start_us_;       ///< per step: when it starts if the ops run back to back
  std::vector<double> made_us_;        ///< per feature map: when its maker ends (0: none)
  std::vector<double> copy_us_;        ///< per feature map: its swap-out's time
  std::vector<index_t> source_begin_;  ///< per feature map, plus one: into sources_
  std::vector<recompute_source> sources_;
  std::vector<std::uint8_t> has_sibling_;  ///< per feature map: its maker makes another map
  std::vector<index_t> dies_;          ///< per tensor: the first step it is not live (DESIGN.md §4)
  std::vector<std::uint32_t> counted_;  ///< per tensor: the stamp of the count that holds it
  std::vector<index_t> held_until_;    ///< per tensor it holds: until which step
  std::vector<index_t> held_;          ///< the tensors it holds
  std::uint32_t stamp_ = 0;
  std::vector<std::uint32_t> visited_;  ///< per feature map: the chain that reached it
  std::uint32_t visit_ = 0;
  std::vector<index_t> chain_;         ///< count_chain's maps still to expand
  std::vector<bytes_t> change_;        ///< per step: bytes evicted from there on (a difference array)
  std::vector<bytes_t> in_flight_;     ///< per step: bytes still being copied out from there on (one too)
  std::vector<index_t> swapped_;       ///< count_evictions': the maps placed swap, in the order of their swap-outs
  std::vector<index_t> roots_;         ///< count_evictions': the maps placed recompute that an op reads again
  index_t first_ = 0;                  ///< and the first such op
  index_t timed_ = 0;                  ///< and the first op that reads an evicted map
};

}  // namespace memplan::detail::home
