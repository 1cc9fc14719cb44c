#pragma once
/// \file
/// Capuchin (Peng et al., ASPLOS 2020) §4.4 and §5.3: guided execution.
/// The policy's evictions become actions, iterations are simulated, and
/// in-triggers are adjusted from the feedback until they are stable.
///
/// - Decoupled swap-out (§5.3): a swap-out runs on the d2h stream beside
///   the computation; the compute stream waits for one only when an
///   allocation does not fit, and then for the earliest that frees enough
///   (the simulator's memory waits, DESIGN.md §5).
/// - Recomputation is on demand at the back-access, from the lineage's
///   sources (§4.4); collective recomputation (§5.3) keeps the other
///   recomputation targets the lineage makes on the way while the inferred
///   memory has room for them until their own back-access, and releases
///   them otherwise.
/// - Feedback (§4.4): a tensor whose swap-in is still in flight when its
///   back-access is ready to run moves its in-trigger earlier by 5 % of its
///   swap time in the next iteration; it never moves before its
///   evicted-access or into the peak period. The triggers are stable when
///   no tensor is late or none of the late ones can move.

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "memplan/cost/device.hpp"
#include "memplan/plan.hpp"
#include "memplan/planners/capuchin/measured.hpp"
#include "memplan/planners/capuchin/policy.hpp"
#include "memplan/planners/capuchin/swap.hpp"
#include "memplan/planners/baselines/common.hpp"
#include "memplan/problem.hpp"
#include "memplan/sim/simulator.hpp"

namespace memplan::detail::capuchin {

/// The in-trigger moves earlier by this fraction of the swap time per late iteration (§4.4).
inline constexpr double feedback_step = 0.05;

/// One guided iteration's action list, with what feedback needs to find.
struct emitted_plan {
  plan result;
  std::vector<index_t> swap_in;        ///< per eviction: its prefetch, or no_index
  std::vector<index_t> back_ready;     ///< per eviction: the compute-stream action before its back-access, or no_index
  /// Swapped tensors that a recomputation needed back before their
  /// in-trigger, so that they came back on demand.
  std::vector<index_t> on_demand;
};

/// The action list of one guided iteration (emit_guided), step by step:
/// the lineage of missing inputs recomputed, the op, its dead tensors
/// released, then the evictions after it and the swap-ins it triggers.
class guided_emitter {
 public:
  guided_emitter(const problem& p, const policy& pol, std::span<const index_t> triggers, bytes_t budget,
                 bool keep_sources)
      : p_(&p), pol_(&pol), keep_sources_(keep_sources), evict_after_(p.num_steps()),
        prefetch_after_(p.num_steps()), recompute_target_(p.num_tensors(), no_index), room_(pol.memory),
        em_(p, "capuchin", budget), compute_action_(p.num_steps(), no_index),
        made_in_chain_(p.num_tensors(), no_index), chain_uses_(p.num_tensors(), 0),
        chain_seen_(p.num_steps(), no_index) {
    for (std::size_t i = 0; i < pol.evictions.size(); ++i) {
      const eviction& ev = pol.evictions[i];
      evict_after_[static_cast<std::size_t>(ev.pair.evicted_access)].push_back(static_cast<index_t>(i));
      if (ev.how == regeneration::swap) {
        prefetch_after_[static_cast<std::size_t>(triggers[i])].push_back(static_cast<index_t>(i));
      } else {
        recompute_target_[static_cast<std::size_t>(ev.pair.tensor)] = static_cast<index_t>(i);
        recomputes_ = true;
      }
    }
    out_.swap_in.assign(pol.evictions.size(), no_index);
  }

  [[nodiscard]] emitted_plan run() && {
    for (std::size_t s = 0; s < p_->num_steps(); ++s) {
      const auto si = static_cast<index_t>(s);
      recompute_missing_inputs(si);
      em_.bring_inputs(si);  // swapped inputs not yet back come back on demand
      compute_action_[s] = em_.compute(si);
      release_past_last_access(si);
      evict_and_prefetch(s);
    }
    for (const eviction& ev : pol_->evictions) {
      if (ev.how == regeneration::swap && em_.needed_at()[static_cast<std::size_t>(ev.pair.tensor)] != no_index) {
        out_.on_demand.push_back(ev.pair.tensor);
      }
    }
    out_.result = std::move(em_).take();
    find_back_ready();
    return std::move(out_);
  }

 private:
  /// §4.4 on demand, §5.3 collectively: the lineage of every input of step
  /// s that is not on the device runs again in schedule order; each target
  /// it makes on the way is kept while there is room until its own
  /// back-access, and released as soon as the lineage is done with it
  /// otherwise.
  void recompute_missing_inputs(index_t s) {
    const problem& p = *p_;
    chain_.clear();
    for (const index_t t : p.inputs(s)) collect_lineage(t, s);
    std::ranges::sort(chain_);
    for (const index_t op : chain_) {
      for (const index_t x : p.inputs(op)) {
        if (made_in_chain_[static_cast<std::size_t>(x)] == s) ++chain_uses_[static_cast<std::size_t>(x)];
      }
      for (const index_t y : p.outputs(op)) made_in_chain_[static_cast<std::size_t>(y)] = s;
    }
    for (const index_t x : p.inputs(s)) chain_uses_[static_cast<std::size_t>(x)] += 1 << 20;  // never released here
    for (const index_t op : chain_) recompute(op, s);
    for (const index_t x : p.inputs(s)) chain_uses_[static_cast<std::size_t>(x)] = 0;
  }

  /// Adds to chain_ the ops that must run again to make t, found through
  /// inputs that are gone.
  void collect_lineage(index_t t, index_t s) {
    stack_.assign(1, t);
    while (!stack_.empty()) {
      const index_t x = stack_.back();
      stack_.pop_back();
      if (em_.where(x) != detail::baselines::residence::freed) continue;
      const index_t op = p_->producer[static_cast<std::size_t>(x)];
      if (chain_seen_[static_cast<std::size_t>(op)] == s) continue;
      chain_seen_[static_cast<std::size_t>(op)] = s;
      chain_.push_back(op);
      for (const index_t in : p_->inputs(op)) stack_.push_back(in);
    }
  }

  /// Runs `op` of step s's lineage again, then keeps or releases what the
  /// lineage no longer reads.
  void recompute(index_t op, index_t s) {
    const problem& p = *p_;
    const std::size_t before = em_.recomputed().size();
    for (const index_t y : p.outputs(op)) {
      if (em_.where(y) == detail::baselines::residence::freed) {
        em_.bring(y);  // its inputs are back: one recompute
        break;
      }
    }
    const auto made = std::span(em_.recomputed()).subspan(before);
    for (const index_t x : p.inputs(op)) {
      if (made_in_chain_[static_cast<std::size_t>(x)] == s && --chain_uses_[static_cast<std::size_t>(x)] == 0) {
        keep_or_release(x, s);
      }
    }
    for (const index_t y : made) {
      if (chain_uses_[static_cast<std::size_t>(y)] == 0) keep_or_release(y, s);
    }
  }

  /// x, made by step s's lineage, is read by it no more: a recomputation
  /// target stays until its own back-access where the inferred memory has
  /// room for it (§5.3, collective recomputation); anything else goes.
  void keep_or_release(index_t x, index_t s) {
    const bytes_t bytes = p_->bytes[static_cast<std::size_t>(x)];
    const index_t i = recompute_target_[static_cast<std::size_t>(x)];
    const index_t back = i == no_index ? no_index : pol_->evictions[static_cast<std::size_t>(i)].pair.back_access;
    if (back > s && room_.max_over(s, back - 1) + bytes <= room_.budget()) {
      room_.add(s, back - 1, bytes);
    } else {
      em_.free(x);
    }
  }

  /// A tensor past its last access is gone; a recomputation that starts
  /// from it later must make it again (§4.4). Unless `keep_sources`.
  void release_past_last_access(index_t s) {
    const problem& p = *p_;
    if (!recomputes_ || keep_sources_) return;
    for (const auto list : {p.inputs(s), p.outputs(s)}) {
      for (const index_t t : list) {
        const index_t made = p.producer[static_cast<std::size_t>(t)];
        if (p.live_end(t) == s && !p.persistent(t) && made != no_index &&
            p.recomputable[static_cast<std::size_t>(made)] && em_.where(t) == detail::baselines::residence::device) {
          em_.release_dead(t);
        }
      }
    }
  }

  /// The policy's evictions after step s, and the swap-ins its end triggers.
  void evict_and_prefetch(std::size_t s) {
    for (const index_t i : evict_after_[s]) {
      const eviction& ev = pol_->evictions[static_cast<std::size_t>(i)];
      if (ev.how == regeneration::swap) {
        em_.swap_out(ev.pair.tensor);
      } else {
        em_.free(ev.pair.tensor);
      }
    }
    for (const index_t i : prefetch_after_[s]) {
      const index_t t = pol_->evictions[static_cast<std::size_t>(i)].pair.tensor;
      out_.swap_in[static_cast<std::size_t>(i)] = em_.prefetch(t);
    }
  }

  /// The compute-stream action just before each back-access: when it ends,
  /// the back-access could run if its tensor were there.
  void find_back_ready() {
    const std::vector<action>& actions = out_.result.actions;
    std::vector<index_t> last_on_compute(actions.size(), no_index);
    index_t last_compute_stream = no_index;
    for (std::size_t a = 0; a < actions.size(); ++a) {
      last_on_compute[a] = last_compute_stream;
      if (stream_of(*p_, actions[a]) == stream_kind::compute) last_compute_stream = static_cast<index_t>(a);
    }
    out_.back_ready.assign(pol_->evictions.size(), no_index);
    for (std::size_t i = 0; i < pol_->evictions.size(); ++i) {
      const auto b = static_cast<std::size_t>(pol_->evictions[i].pair.back_access);
      out_.back_ready[i] = last_on_compute[static_cast<std::size_t>(compute_action_[b])];
    }
  }

  const problem* p_;
  const policy* pol_;
  bool keep_sources_;
  std::vector<std::vector<index_t>> evict_after_;     ///< per step: evictions whose evicted-access it is
  std::vector<std::vector<index_t>> prefetch_after_;  ///< per step: swap-ins it is the in-trigger of
  std::vector<index_t> recompute_target_;             ///< per tensor: its recompute eviction, or no_index
  bool recomputes_ = false;                           ///< some eviction is a recomputation
  memory_estimate room_;                              ///< the inferred memory, with kept targets added
  detail::baselines::emitter em_;
  emitted_plan out_;
  std::vector<index_t> compute_action_;  ///< per step: its compute action
  std::vector<index_t> chain_;           ///< the ops that recompute the current step's missing inputs
  std::vector<index_t> made_in_chain_;   ///< per tensor: the step whose chain made it
  std::vector<index_t> chain_uses_;      ///< per tensor: its readers left in the chain
  std::vector<index_t> chain_seen_;      ///< per step: the step whose chain holds it
  std::vector<index_t> stack_;
};

/// Emits the actions of `pol` with the in-triggers `triggers` (one per
/// eviction). `keep_sources`: a tensor past its last access stays on the
/// device while a recomputation still reads it (the simulator frees it
/// after that read), instead of being gone as in a framework (§4.4).
[[nodiscard]] inline emitted_plan emit_guided(const problem& p, const policy& pol, std::span<const index_t> triggers,
                                             bytes_t budget, bool keep_sources = false) {
  return guided_emitter(p, pol, triggers, budget, keep_sources).run();
}

/// The stable guided plan and how it was reached.
struct guided_execution {
  plan result;
  report sim;                    ///< the simulator's verdict on the last iteration
  index_t iterations = 0;        ///< guided iterations until the in-triggers were stable
  index_t trigger_moves = 0;     ///< in-trigger adjustments the feedback made
  std::vector<index_t> triggers; ///< per eviction: the final in-trigger (swaps)
  std::vector<index_t> on_demand; ///< as `emitted_plan::on_demand`, for the last iteration
  std::vector<search_point> history;  ///< per guided iteration: its simulated time (`plan::history`)
};

/// Runs guided iterations of `pol` under `budget` until the in-triggers are
/// stable, at most `max_iterations`; `keep_sources` as in emit_guided.
[[nodiscard]] inline guided_execution guide(const problem& p, const measured_execution& m, const device_spec& dev,
                                            bytes_t budget, const policy& pol, index_t max_iterations,
                                            simulator& sim, bool keep_sources = false) {
  guided_execution g;
  const std::size_t count = pol.evictions.size();
  g.triggers.resize(count);
  std::vector<double> desired(count, 0);
  for (std::size_t i = 0; i < count; ++i) {
    g.triggers[i] = pol.evictions[i].in_trigger;
    if (g.triggers[i] != no_index) desired[i] = m.end_us[static_cast<std::size_t>(g.triggers[i])];
  }
  const simulate_options record{.record_timeline = true, .record_memory = false};
  emitted_plan e = emit_guided(p, pol, g.triggers, budget, keep_sources);
  g.sim = sim.run(p, e.result, dev, budget, record);
  g.iterations = 1;
  g.history.push_back({g.sim.time_us, 0});
  memory_estimate room = pol.memory;
  std::vector<double> end;
  while (g.sim.feasible && g.iterations < max_iterations) {
    end.assign(e.result.actions.size(), 0);
    for (const action_interval& row : g.sim.timeline) end[static_cast<std::size_t>(row.action)] = row.end_us;
    bool late = false;
    bool moved = false;
    for (std::size_t i = 0; i < count; ++i) {
      const eviction& ev = pol.evictions[i];
      const index_t in = e.swap_in[i];
      if (in == no_index) continue;
      const index_t ready = e.back_ready[i];
      const double ready_us = ready == no_index ? 0 : end[static_cast<std::size_t>(ready)];
      if (end[static_cast<std::size_t>(in)] <= ready_us + 1e-6) continue;
      // Late: move earlier unless it is at its evicted-access or the peak.
      const bytes_t bytes = p.bytes[static_cast<std::size_t>(ev.pair.tensor)];
      index_t& trigger = g.triggers[i];
      if (trigger <= ev.pair.evicted_access || room.at(trigger) + bytes > room.budget()) continue;
      late = true;
      desired[i] -= feedback_step * dev.h2d.transfer_us(bytes);
      const index_t want = std::max(ev.pair.evicted_access, latest_step_ending_by(m, desired[i], trigger));
      if (want < trigger) {
        trigger = room.advance(bytes, trigger, want);
        ++g.trigger_moves;
        moved = true;
      }
    }
    if (!late) break;  // stable
    ++g.iterations;
    if (moved) {
      e = emit_guided(p, pol, g.triggers, budget, keep_sources);
      g.sim = sim.run(p, e.result, dev, budget, record);
    }
    g.history.push_back({g.sim.time_us, 0});
  }
  g.result = std::move(e.result);
  g.on_demand = std::move(e.on_demand);
  return g;
}

}  // namespace memplan::detail::capuchin
