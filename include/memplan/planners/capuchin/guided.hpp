#pragma once
/// \file
/// Capuchin's guided execution (§4.4, §5.3): the policy's evictions become
/// actions, iterations are simulated, and in-triggers are adjusted from
/// the feedback until they are stable.
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

/// Emits the actions of `pol` with the in-triggers `triggers` (one per
/// eviction). `keep_sources`: a tensor past its last access stays on the
/// device while a recomputation still reads it (the simulator frees it
/// after that read), instead of being gone as in a framework (§4.4).
[[nodiscard]] inline emitted_plan emit_guided(const problem& p, const policy& pol, std::span<const index_t> triggers,
                                             bytes_t budget, bool keep_sources = false) {
  const std::size_t n = p.num_steps();
  const std::size_t count = pol.evictions.size();
  std::vector<std::vector<index_t>> evict_after(n);
  std::vector<std::vector<index_t>> prefetch_after(n);
  std::vector<index_t> recompute_target(p.num_tensors(), no_index);
  bool recomputes = false;
  for (std::size_t i = 0; i < count; ++i) {
    const eviction& ev = pol.evictions[i];
    evict_after[static_cast<std::size_t>(ev.pair.evicted_access)].push_back(static_cast<index_t>(i));
    if (ev.how == regeneration::swap) {
      prefetch_after[static_cast<std::size_t>(triggers[i])].push_back(static_cast<index_t>(i));
    } else {
      recompute_target[static_cast<std::size_t>(ev.pair.tensor)] = static_cast<index_t>(i);
      recomputes = true;
    }
  }
  memory_estimate room = pol.memory;
  detail::baselines::emitter em(p, "capuchin", budget);
  emitted_plan out;
  out.swap_in.assign(count, no_index);
  std::vector<index_t> compute_action(n, no_index);
  std::vector<index_t> chain;  // the ops that recompute the current step's missing inputs
  std::vector<index_t> made_in_chain(p.num_tensors(), no_index);  // per tensor: the step whose chain made it
  std::vector<index_t> chain_uses(p.num_tensors(), 0);  // per tensor: its readers left in the chain
  std::vector<index_t> chain_seen(n, no_index);
  index_t current = no_index;
  std::vector<index_t> stack;
  // The ops that must run again to make t, found through inputs that are gone.
  const auto collect_lineage = [&](index_t t) {
    stack.assign(1, t);
    while (!stack.empty()) {
      const index_t x = stack.back();
      stack.pop_back();
      if (em.where(x) != detail::baselines::residence::freed) continue;
      const index_t op = p.producer[static_cast<std::size_t>(x)];
      if (chain_seen[static_cast<std::size_t>(op)] == current) continue;
      chain_seen[static_cast<std::size_t>(op)] = current;
      chain.push_back(op);
      for (const index_t in : p.inputs(op)) stack.push_back(in);
    }
  };
  for (std::size_t s = 0; s < n; ++s) {
    const auto si = static_cast<index_t>(s);
    current = si;
    // §4.4 on demand, §5.3 collectively: the lineage of every input that is
    // not on the device runs again in schedule order; each target it makes
    // on the way is kept while there is room until its own back-access, and
    // released as soon as the lineage is done with it otherwise.
    chain.clear();
    for (const index_t t : p.inputs(si)) collect_lineage(t);
    std::ranges::sort(chain);
    for (const index_t op : chain) {
      for (const index_t x : p.inputs(op)) {
        if (made_in_chain[static_cast<std::size_t>(x)] == si) ++chain_uses[static_cast<std::size_t>(x)];
      }
      for (const index_t y : p.outputs(op)) made_in_chain[static_cast<std::size_t>(y)] = si;
    }
    for (const index_t x : p.inputs(si)) chain_uses[static_cast<std::size_t>(x)] += 1 << 20;  // never released here
    for (const index_t op : chain) {
      const std::size_t before = em.recomputed().size();
      for (const index_t y : p.outputs(op)) {
        if (em.where(y) == detail::baselines::residence::freed) {
          em.bring(y);  // its inputs are back: one recompute
          break;
        }
      }
      const auto made = std::span(em.recomputed()).subspan(before);
      const auto done = [&](index_t x) {
        const bytes_t bytes = p.bytes[static_cast<std::size_t>(x)];
        const index_t i = recompute_target[static_cast<std::size_t>(x)];
        const index_t back = i == no_index ? no_index : pol.evictions[static_cast<std::size_t>(i)].pair.back_access;
        if (back > si && room.max_over(si, back - 1) + bytes <= room.budget()) {
          room.add(si, back - 1, bytes);
        } else {
          em.free(x);
        }
      };
      for (const index_t x : p.inputs(op)) {
        if (made_in_chain[static_cast<std::size_t>(x)] == si && --chain_uses[static_cast<std::size_t>(x)] == 0) done(x);
      }
      for (const index_t y : made) {
        if (chain_uses[static_cast<std::size_t>(y)] == 0) done(y);
      }
    }
    for (const index_t x : p.inputs(si)) chain_uses[static_cast<std::size_t>(x)] = 0;
    em.bring_inputs(si);  // swapped inputs not yet back come back on demand
    compute_action[s] = em.compute(si);
    // A tensor past its last access is gone; a recomputation that starts
    // from it later must make it again (§4.4). Unless `keep_sources`.
    for (const auto list : {p.inputs(si), p.outputs(si)}) {
      for (const index_t t : list) {
        const index_t made = p.producer[static_cast<std::size_t>(t)];
        if (recomputes && !keep_sources && p.live_end(t) == si && !p.persistent(t) && made != no_index &&
            p.recomputable[static_cast<std::size_t>(made)] && em.where(t) == detail::baselines::residence::device) {
          em.release_dead(t);
        }
      }
    }
    for (const index_t i : evict_after[s]) {
      const eviction& ev = pol.evictions[static_cast<std::size_t>(i)];
      if (ev.how == regeneration::swap) {
        em.swap_out(ev.pair.tensor);
      } else {
        em.free(ev.pair.tensor);
      }
    }
    for (const index_t i : prefetch_after[s]) {
      out.swap_in[static_cast<std::size_t>(i)] = em.prefetch(pol.evictions[static_cast<std::size_t>(i)].pair.tensor);
    }
  }
  for (std::size_t i = 0; i < count; ++i) {
    const eviction& ev = pol.evictions[i];
    if (ev.how == regeneration::swap && em.needed_at()[static_cast<std::size_t>(ev.pair.tensor)] != no_index) {
      out.on_demand.push_back(ev.pair.tensor);
    }
  }
  out.result = std::move(em).take();
  // The compute-stream action just before each back-access: when it ends,
  // the back-access could run if its tensor were there.
  std::vector<index_t> last_on_compute(out.result.actions.size(), no_index);
  index_t last_compute_stream = no_index;
  for (std::size_t a = 0; a < out.result.actions.size(); ++a) {
    last_on_compute[a] = last_compute_stream;
    if (stream_of(out.result.actions[a].kind) == stream_kind::compute) last_compute_stream = static_cast<index_t>(a);
  }
  out.back_ready.assign(count, no_index);
  for (std::size_t i = 0; i < count; ++i) {
    const auto b = static_cast<std::size_t>(pol.evictions[i].pair.back_access);
    out.back_ready[i] = last_on_compute[static_cast<std::size_t>(compute_action[b])];
  }
  return out;
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
