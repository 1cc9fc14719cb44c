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
/// Without a budget the forward pass is timed exactly without simulating
/// it: its ops run back to back from 0 (nothing they read is evicted), and
/// the swap-outs, issued in the order the forward pass is done with their
/// maps, run one after another on the copy stream, each once its map's
/// maker has ended. A swapped map is still on the device when a forward op
/// starts before its swap-out ends (frees at an instant come first), which
/// tightens the floor under the peak of that run.
class residency_bound {
 public:
  residency_bound(const problem& p, const feature_maps& fm, const device_spec& dev)
      : live_(p.baseline_memory()), swap_order_(fm.done_list) {
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
    time_forward_pass(p, fm, dev);
  }

  /// Two floors under the peak of a placement's plan.
  struct floors {
    /// The bytes on the device while some op runs, in any run of it (with
    /// or without a budget).
    bytes_t any_run = 0;
    /// Under the peak of the run without a budget: at least `any_run`, and
    /// the swapped maps still being copied out when a forward op starts.
    bytes_t unbounded = 0;
  };
  /// Both floors of placement `x`, from one count of its evictions.
  [[nodiscard]] floors floors_of(std::span<const placement> x) {
    count_evictions(x);
    const bytes_t any_run = highest();
    count_copies_in_flight(x);
    return {any_run, highest()};
  }

 private:
  /// `change_`: per step, the evicted feature maps' bytes from there on.
  void count_evictions(std::span<const placement> x) {
    change_.assign(live_.size() + 1, 0);
    for (std::size_t j = 0; j < x.size(); ++j) {
      if (x[j] == placement::retain || evicted_from_[j] >= evicted_to_[j]) continue;
      change_[static_cast<std::size_t>(evicted_from_[j])] += bytes_[j];
      change_[static_cast<std::size_t>(back_at_[j])] -= bytes_[j];
    }
    count_recompute_sources(x);
  }
  /// Keeps in `change_`, past their last use and until the first step that
  /// reads a recomputed map, the tensors the recomputations will read that
  /// the placement leaves on the device: the inputs of a recomputed map's
  /// maker, and through an input that is recomputed in turn (HOME §2.2's
  /// chain FM1 -> FM2 -> FM3), that one's maker's inputs. A map placed
  /// `recompute` that another recomputation reads is off the device when
  /// that one runs unless recomputed before, so its maker runs again either
  /// way, and no recomputation starts before that first step.
  void count_recompute_sources(std::span<const placement> x) {
    index_t first = std::numeric_limits<index_t>::max();
    for (std::size_t j = 0; j < x.size(); ++j) {
      if (x[j] == placement::recompute && back_at_[j] < evicted_to_[j]) first = std::min(first, back_at_[j]);
    }
    if (first == std::numeric_limits<index_t>::max()) return;
    ++stamp_;
    for (std::size_t j = 0; j < x.size(); ++j) {
      if (x[j] == placement::recompute && back_at_[j] < evicted_to_[j]) count_chain(x, j, first);
    }
  }
  /// count_recompute_sources for the chain that recomputing map `root` runs.
  void count_chain(std::span<const placement> x, std::size_t root, index_t first) {
    chain_.assign(1, static_cast<index_t>(root));
    while (!chain_.empty()) {
      const auto j = static_cast<std::size_t>(chain_.back());
      chain_.pop_back();
      if (expanded_[j] == stamp_) continue;
      expanded_[j] = stamp_;
      for (auto k = static_cast<std::size_t>(source_begin_[j]); k < static_cast<std::size_t>(source_begin_[j + 1]); ++k) {
        const recompute_source& src = sources_[k];
        const placement at = src.map != no_index ? x[static_cast<std::size_t>(src.map)] : placement::retain;
        if (at == placement::recompute) chain_.push_back(src.map);
        if (at != placement::retain || src.dies >= first) continue;
        if (counted_[static_cast<std::size_t>(src.tensor)] == stamp_) continue;
        counted_[static_cast<std::size_t>(src.tensor)] = stamp_;
        change_[static_cast<std::size_t>(src.dies)] -= src.bytes;
        change_[static_cast<std::size_t>(first)] += src.bytes;
      }
    }
  }
  /// Takes out of `change_` the swapped maps whose swap-out, timed as the
  /// simulator's run without a budget times it (resolver::begin: the
  /// stream's end or the waited-for action's, whichever is later), has not
  /// ended when a forward op starts.
  void count_copies_in_flight(std::span<const placement> x) {
    double copy_stream_end = 0;
    for (const index_t jj : swap_order_) {
      const auto j = static_cast<std::size_t>(jj);
      // A map made after the forward pass started something else is left
      // out: its copy counts nowhere, and the later ones are timed earlier.
      if (x[j] != placement::swap || made_us_[j] == untimed) continue;
      const double end = std::max(copy_stream_end, made_us_[j]) + copy_us_[j];
      copy_stream_end = end;
      // On the device from the first op after the forward pass is done with
      // it to the first that starts once it is copied out, live or not (a
      // map the backward pass does not read is held by its swap-out too).
      const auto until = static_cast<std::size_t>(std::ranges::lower_bound(start_us_, end) - start_us_.begin());
      const auto from = static_cast<std::size_t>(evicted_from_[j]);
      if (from >= until) continue;
      change_[from] -= bytes_[j];
      change_[until] += bytes_[j];
    }
  }
  [[nodiscard]] bytes_t highest() const {
    bytes_t evicted = 0;
    bytes_t least = 0;
    for (std::size_t s = 0; s < live_.size(); ++s) {
      evicted += change_[s];
      least = std::max(least, live_[s] - evicted);
    }
    return least;
  }
  /// Per feature map, the inputs of its maker that die before the end
  /// (DESIGN.md §4), which recomputing it reads again.
  void find_recompute_sources(const problem& p, const feature_maps& fm) {
    std::vector<index_t> map_of(p.num_tensors(), no_index);
    for (std::size_t j = 0; j < fm.size(); ++j) map_of[static_cast<std::size_t>(fm.tensor[j])] = static_cast<index_t>(j);
    source_begin_.assign(1, 0);
    for (std::size_t j = 0; j < fm.size(); ++j) {
      const index_t made = p.producer[static_cast<std::size_t>(fm.tensor[j])];
      if (made != no_index && fm.can_recompute[j] != 0) {
        for (const index_t t : p.inputs(made)) {
          const index_t dies = p.live_end(t) + 1;
          const index_t map = map_of[static_cast<std::size_t>(t)];
          if (static_cast<std::size_t>(dies) >= p.num_steps() && map == no_index) continue;
          sources_.push_back({t, map, dies, p.bytes[static_cast<std::size_t>(t)]});
        }
      }
      source_begin_.push_back(static_cast<index_t>(sources_.size()));
    }
    counted_.assign(p.num_tensors(), 0);
    expanded_.assign(fm.size(), 0);
  }
  /// `start_us_` for the steps before the first that is not a forward op,
  /// and per feature map when its maker ends and how long its swap-out runs.
  void time_forward_pass(const problem& p, const feature_maps& fm, const device_spec& dev) {
    double compute_end = 0;
    std::vector<double> end_us;
    for (std::size_t s = 0; s < p.num_steps() && p.op_phase[s] == phase::forward; ++s) {
      start_us_.push_back(compute_end);
      compute_end += p.time_us[s];  // the simulator's op_time of a whole op
      end_us.push_back(compute_end);
    }
    for (std::size_t j = 0; j < fm.size(); ++j) {
      const index_t made = p.producer[static_cast<std::size_t>(fm.tensor[j])];
      const bool timed = made == no_index || static_cast<std::size_t>(made) < end_us.size();
      made_us_.push_back(made == no_index ? 0.0 : timed ? end_us[static_cast<std::size_t>(made)] : untimed);
      copy_us_.push_back(dev.d2h.transfer_us(bytes_[j]));
    }
  }

  static constexpr double untimed = -1;  ///< made_us_ of a map made outside the leading forward steps

  /// An input of a recomputable map's maker that dies before the end.
  struct recompute_source {
    index_t tensor;
    index_t map;    ///< its feature map, or no_index
    index_t dies;   ///< the first step it is not live (DESIGN.md §4)
    bytes_t bytes;
  };

  std::vector<bytes_t> live_;          ///< per step, with no planning
  std::vector<index_t> evicted_from_;  ///< per feature map: the first step it may be off the device
  std::vector<index_t> evicted_to_;    ///< per feature map: one past its last live step
  std::vector<bytes_t> bytes_;         ///< per feature map
  std::vector<index_t> back_at_;       ///< per feature map: the first step reading it while it may be off the device, else evicted_to_
  std::vector<index_t> swap_order_;    ///< feature maps in the order their swap-outs are issued
  std::vector<double> start_us_;       ///< per leading forward step: when it starts without a budget
  std::vector<double> made_us_;        ///< per feature map: when its maker ends (0: none)
  std::vector<double> copy_us_;        ///< per feature map: its swap-out's time
  std::vector<index_t> source_begin_;  ///< per feature map, plus one: into sources_
  std::vector<recompute_source> sources_;
  std::vector<std::uint32_t> counted_;  ///< per tensor: the stamp of the count that kept it
  std::vector<std::uint32_t> expanded_;  ///< per feature map: the stamp of the count that read its maker's inputs
  std::vector<index_t> chain_;           ///< count_chain's maps still to expand
  std::uint32_t stamp_ = 0;
  std::vector<bytes_t> change_;        ///< per step: bytes evicted from there on (a difference array)
};

}  // namespace memplan::detail::home
