#pragma once
/// \file
/// `checkpoint`: sqrt(n) gradient checkpointing (Chen, Xu, Zhang, Guestrin,
/// "Training Deep Nets with Sublinear Memory Cost", 2016, §4.1).
///
/// The n forward ops are cut into segments of about sqrt(n) ops; only the
/// tensor at each segment boundary (the checkpoint) is kept through the
/// forward pass, every other activation saved for the backward pass is
/// freed once the forward pass is done with it. When a backward op needs a
/// freed tensor, its whole segment is recomputed from the checkpoint before
/// it (Chen §4.1: "recompute the segment, then backprop through it"), so a
/// forward op runs at most twice and the peak is about 2 sqrt(n) layers.
///
/// Non-linear graphs: boundaries may only be placed where a single tensor
/// crosses the cut (an articulation point of the forward graph), the
/// "memory" mode of OpenAI's gradient-checkpointing (Capuchin §6.1). Here a
/// cut after forward step k qualifies when at most one droppable tensor
/// made at or before k is read by a forward op after k, and that tensor is
/// made by k itself. Tensors whose producer is not recomputable are always
/// kept.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstddef>
#include <vector>

#include "memplan/planners/baselines/common.hpp"
#include "memplan/planners/planner.hpp"

namespace memplan {

/// The `checkpoint` planner: sqrt(n) segments (see the file comment).
struct checkpoint_planner {
  /// Plans `p` on `dev` with checkpoints about sqrt(n) forward ops apart;
  /// the budget decides only the verdict, not the segments.
  plan operator()(const problem& p, const device_spec& dev, bytes_t budget, const planner_options&) const {
    const std::size_t n = p.num_steps();
    const baseline_uses uses(p);
    std::vector<index_t> forward_steps;
    for (std::size_t s = 0; s < n; ++s) {
      if (p.op_phase[s] == phase::forward) forward_steps.push_back(static_cast<index_t>(s));
    }
    // Per cut after step k: how many droppable tensors cross it, and the
    // sum of their indices (the tensor itself when exactly one does).
    std::vector<std::int64_t> crossing(n + 1, 0);
    std::vector<std::int64_t> crossing_sum(n + 1, 0);
    for (std::size_t t = 0; t < p.num_tensors(); ++t) {
      const auto ti = static_cast<index_t>(t);
      const index_t last = uses.last_forward[t];
      if (!uses.droppable(p, ti) || last == no_index) continue;
      const auto made = static_cast<std::size_t>(p.producer[t]);
      ++crossing[made];
      --crossing[static_cast<std::size_t>(last)];
      crossing_sum[made] += ti;
      crossing_sum[static_cast<std::size_t>(last)] -= ti;
    }
    for (std::size_t s = 1; s <= n; ++s) {
      crossing[s] += crossing[s - 1];
      crossing_sum[s] += crossing_sum[s - 1];
    }
    // Chen §4.1: segments of sqrt(n) forward ops; cut at the first
    // qualifying step at least that far after the previous cut.
    const auto segment_ops =
        std::max<index_t>(1, static_cast<index_t>(std::lround(std::sqrt(static_cast<double>(forward_steps.size())))));
    std::vector<index_t> segment_of(n, 0);  // per step: its segment
    std::vector<std::uint8_t> kept(p.num_tensors(), 0);
    index_t segment = 0;
    index_t ops_in_segment = 0;
    for (const index_t k : forward_steps) {
      const auto ki = static_cast<std::size_t>(k);
      segment_of[ki] = segment;
      ++ops_in_segment;
      const bool single = crossing[ki] == 0 ||
                          (crossing[ki] == 1 && p.producer[static_cast<std::size_t>(crossing_sum[ki])] == k);
      if (ops_in_segment < segment_ops || !single) continue;
      if (crossing[ki] == 1) kept[static_cast<std::size_t>(crossing_sum[ki])] = 1;
      // The boundary op's outputs that no later forward op reads (the last
      // layer's output, read by the backward pass) are kept as well.
      for (const index_t t : p.outputs(k)) kept[static_cast<std::size_t>(t)] = 1;
      ++segment;
      ops_in_segment = 0;
    }

    std::vector<std::vector<index_t>> free_after(n);
    for (std::size_t t = 0; t < p.num_tensors(); ++t) {
      const auto ti = static_cast<index_t>(t);
      if (kept[t] || !uses.droppable(p, ti)) continue;
      free_after[static_cast<std::size_t>(uses.forward_done(p, ti))].push_back(ti);
    }

    detail::baselines::emitter em(p, "checkpoint", budget);
    for (std::size_t s = 0; s < n; ++s) {
      const auto si = static_cast<index_t>(s);
      // Recompute the segment of every freed input, in forward order, with
      // every freed output of it that is still to be read.
      for (const index_t t : p.inputs(si)) {
        if (em.where(t) != detail::baselines::residence::freed) continue;
        const index_t seg = segment_of[static_cast<std::size_t>(p.producer[static_cast<std::size_t>(t)])];
        for (const index_t k : forward_steps) {
          if (segment_of[static_cast<std::size_t>(k)] != seg) continue;
          for (const index_t out : p.outputs(k)) {
            if (em.where(out) == detail::baselines::residence::freed && p.last_use[static_cast<std::size_t>(out)] >= si) {
              em.bring(out);
            }
          }
        }
      }
      em.bring_inputs(si);
      em.compute(si);
      for (const index_t t : free_after[s]) em.free(t);
    }
    return std::move(em).finish(dev);
  }

 private:
  using baseline_uses = detail::baselines::forward_backward_uses;
};
static_assert(planner<checkpoint_planner>);

}  // namespace memplan
