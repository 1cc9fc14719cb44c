#pragma once
/// \file
/// `superneurons`: SuperNeurons' cost-aware memory policy (Wang et al.,
/// "SuperNeurons: Dynamic GPU Memory Management for Training Deep Neural
/// Networks", PPoPP 2018), as TSPLIT §VI and HOME §4.1 use it as a baseline:
/// - the outputs of convolution layers, which are slow to recompute, are
///   offloaded to the host once the forward pass is done with them
///   (asynchronously: SuperNeurons' unified tensor pool overlaps the copies)
///   and prefetched one op ahead of the first op that needs them back;
/// - the outputs of cheap layers (pooling, activation, batch norm, LRN) are
///   freed after their forward use and recomputed when the backward pass
///   needs them (SuperNeurons §3.3, cost-aware recomputation), kept from
///   then on until their last reader ("speed-centric").
/// Everything else is kept; so are outputs of ops that are not recomputable.

#include <algorithm>
#include <array>
#include <cstddef>
#include <string_view>
#include <vector>

#include "memplan/planners/baselines/common.hpp"
#include "memplan/planners/planner.hpp"

namespace memplan {

struct superneurons_planner {
  /// The layers SuperNeurons recomputes rather than stores.
  static constexpr std::array<std::string_view, 9> cheap_types{"max_pool", "avg_pool", "avgpool", "relu", "relu6",
                                                              "batch_norm", "lrn", "tanh", "gelu"};

  plan operator()(const problem& p, const device_spec& dev, bytes_t budget, const planner_options&) const {
    const std::size_t n = p.num_steps();
    const detail::baselines::forward_backward_uses uses(p);
    std::vector<std::vector<index_t>> swap_after(n);
    std::vector<std::vector<index_t>> free_after(n);
    for (std::size_t t = 0; t < p.num_tensors(); ++t) {
      const auto ti = static_cast<index_t>(t);
      const index_t made = p.producer[t];
      if (made == no_index || !uses.saved_for_backward(p, ti)) continue;
      const std::string_view type = p.op_type[static_cast<std::size_t>(made)];
      const auto done = static_cast<std::size_t>(uses.forward_done(p, ti));
      if (type == "conv2d") {
        swap_after[done].push_back(ti);
      } else if (uses.droppable(p, ti) && std::ranges::find(cheap_types, type) != cheap_types.end()) {
        free_after[done].push_back(ti);
      }
    }
    return detail::baselines::emit_evictions(p, "superneurons", budget,
                                            [&](index_t s, detail::baselines::emitter& em) {
                                              const auto si = static_cast<std::size_t>(s);
                                              for (const index_t t : swap_after[si]) em.swap_out(t);
                                              for (const index_t t : free_after[si]) em.free(t);
                                            })
        .finish(dev);
  }
};
static_assert(planner<superneurons_planner>);

}  // namespace memplan
