#pragma once
/// \file
/// `vdnn-conv` and `vdnn-all`: vDNN (Rhu et al., "vDNN: Virtualized Deep
/// Neural Networks for Scalable, Memory-Efficient Neural Network Design",
/// MICRO 2016) §III-C, layer-wise offload and prefetch, the baseline TSPLIT
/// and Capuchin compare against.
///
/// Forward: once the last forward layer reading a feature map X has been
/// issued, X is offloaded to the host (vDNN §III-C: offload the input
/// feature maps of CONV layers, or of all layers), overlapping that layer's
/// computation; the next layer waits for the offload to end — vDNN
/// synchronises per layer (TSPLIT §II, Capuchin §2 describe it so), which is
/// where its stalls come from. Backward: X is prefetched one op ahead of the
/// backward op that needs it (vDNN §III-C "prefetching"). Only activations
/// saved for the backward pass move, and only those with at least one op
/// between their last forward read and their first backward read (else the
/// prefetch would have to start before the offload).

#include <cstddef>
#include <string>
#include <vector>

#include "memplan/planners/baselines/common.hpp"
#include "memplan/planners/planner.hpp"

namespace memplan {

namespace detail {
/// vDNN with the offload set: inputs of conv layers, or of every layer.
inline plan vdnn_plan(const problem& p, const device_spec& dev, bytes_t budget, bool conv_only) {
  const baselines::forward_backward_uses uses(p);
  // offload_after[s]: the feature maps whose last forward reader is s.
  std::vector<std::vector<index_t>> offload_after(p.num_steps());
  for (std::size_t t = 0; t < p.num_tensors(); ++t) {
    const auto ti = static_cast<index_t>(t);
    const index_t last = uses.last_forward[t];
    if (last == no_index || !uses.saved_for_backward(p, ti) || uses.first_backward[t] - last < 2) continue;
    bool conv_input = false;
    for (const index_t s : p.uses(ti)) {
      const auto si = static_cast<std::size_t>(s);
      conv_input = conv_input || (p.op_phase[si] == phase::forward && p.op_type[si] == "conv2d");
    }
    if (!conv_only || conv_input) offload_after[static_cast<std::size_t>(last)].push_back(ti);
  }
  const std::string name = conv_only ? "vdnn-conv" : "vdnn-all";
  auto emit = [&](const baselines::prefetch_schedule& prefetches, bool record) {
    baselines::emitter em(p, name, budget, record);
    std::vector<index_t> offloads;  // issued since the last layer: the next one waits for them
    for (std::size_t s = 0; s < p.num_steps(); ++s) {
      const auto si = static_cast<index_t>(s);
      for (const index_t t : prefetches.before(s)) em.prefetch(t);
      em.bring_inputs(si);
      em.compute(si, offloads);
      offloads.clear();
      for (const index_t t : offload_after[s]) offloads.push_back(em.swap_out(t));
    }
    return em;
  };
  const auto first = emit(baselines::prefetch_schedule(), false);
  return emit(baselines::prefetch_schedule(p, first.needed_at()), true).finish(dev);
}
}  // namespace detail

/// vDNN-conv: offloads the inputs of convolution layers.
struct vdnn_conv_planner {
  /// Plans `p` on `dev`: offloads in the forward pass, prefetches for the backward (the file comment).
  plan operator()(const problem& p, const device_spec& dev, bytes_t budget, const planner_options&) const {
    return detail::vdnn_plan(p, dev, budget, true);
  }
};
static_assert(planner<vdnn_conv_planner>);

/// vDNN-all: offloads the inputs of every layer.
struct vdnn_all_planner {
  /// Plans `p` on `dev` as vdnn_conv_planner, for every layer.
  plan operator()(const problem& p, const device_spec& dev, bytes_t budget, const planner_options&) const {
    return detail::vdnn_plan(p, dev, budget, false);
  }
};
static_assert(planner<vdnn_all_planner>);

}  // namespace memplan
