#pragma once
/// \file
/// Random training graphs for property tests, fuzz corpora and benchmarks:
/// a forward pass of a chosen shape (chain, residual blocks, inception-like
/// branches, transformer-like blocks, a random DAG), a loss, the backward
/// pass derived from it (gradient accumulation where an activation has
/// several readers) and optimizer updates — the structure the zoo's models
/// have, with sizes, times and op flags drawn at random so that planners
/// meet what the zoo never shows them: zero-byte tensors, sizes spread over
/// many orders of magnitude, ops with many outputs, ops that may not be
/// recomputed or split.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "memplan/error.hpp"
#include "memplan/fwd.hpp"
#include "memplan/graph/graph.hpp"
#include "memplan/problem.hpp"

/// Test support: random training graphs, the properties every plan must
/// have, shrinking a failing case, and HOME's golden results.
namespace memplan::testing {

/// The forward pass's shape.
enum class graph_shape : std::uint8_t { chain, residual, inception, transformer, random_dag };
/// Shapes by their value, as test names and failure messages spell them.
inline constexpr std::array<std::string_view, 5> graph_shape_names{"chain", "residual", "inception", "transformer",
                                                                   "random-dag"};
/// `s` as `graph_shape_names` spells it.
[[nodiscard]] constexpr std::string_view to_string(graph_shape s) noexcept {
  return graph_shape_names[static_cast<std::size_t>(s)];
}

/// What `random_training_graph` draws.
struct graph_options {
  graph_shape shape = graph_shape::chain;  ///< the forward pass's shape; the backward pass mirrors it
  int forward_ops = 16;                  ///< at least this many forward ops (blocks are finished)
  bytes_t min_bytes = 256;               ///< tensor sizes are log-uniform in [min_bytes, max_bytes]
  bytes_t max_bytes = bytes_t{256} << 20;  ///< see `min_bytes`
  double zero_bytes_fraction = 0.05;     ///< tensors of 0 bytes
  double not_recomputable_fraction = 0.15;  ///< forward ops that may not be recomputed
  double not_splittable_fraction = 0.3;     ///< ops without split dimensions
  double workspace_fraction = 0.2;       ///< ops with workspace (log-uniform, like tensors)
  int max_outputs = 4;                   ///< forward ops write 1..max_outputs tensors
  bool updates = true;                   ///< optimizer updates with momentum state
};

namespace detail {

using memplan::detail::concat;

/// Builds one graph: forward ops recorded on a tape, then loss, backward and
/// updates derived from the tape.
class graph_generator {
 public:
  graph_generator(const graph_options& o, std::uint64_t seed) : o_(o), rng_(seed), g_(name_of(o, seed)) {
    MEMPLAN_EXPECTS(o.min_bytes >= 1 && o.max_bytes >= o.min_bytes, invalid_argument,
                    "random_training_graph: need 1 <= min_bytes <= max_bytes, got ", o.min_bytes, " and ",
                    o.max_bytes);
    MEMPLAN_EXPECTS(o.forward_ops >= 1 && o.max_outputs >= 1, invalid_argument,
                    "random_training_graph: forward_ops and max_outputs must be positive, got ", o.forward_ops,
                    " and ", o.max_outputs);
  }

  graph build() && {
    const index_t x = tensor("x", size(), tensor_kind::input);
    std::vector<index_t> frontier{x};
    while (static_cast<int>(tape_.size()) < o_.forward_ops) frontier = block(frontier);
    finish();
    return std::move(g_);
  }

 private:
  struct layer {
    index_t op = no_index;
    std::vector<index_t> inputs;   ///< activations read (get a gradient unless they are the graph input)
    std::vector<index_t> params;
    std::vector<index_t> outputs;
  };

  static std::string name_of(const graph_options& o, std::uint64_t seed) {
    return concat(to_string(o.shape), "-", o.forward_ops, "-seed", seed);
  }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  int between(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  double log_uniform(double lo, double hi) {
    return std::exp(std::uniform_real_distribution<double>(std::log(lo), std::log(hi))(rng_));
  }
  bytes_t size() {
    if (chance(o_.zero_bytes_fraction)) return 0;
    const double b = std::round(log_uniform(static_cast<double>(o_.min_bytes), static_cast<double>(o_.max_bytes)));
    return std::clamp(static_cast<bytes_t>(b), o_.min_bytes, o_.max_bytes);
  }
  double time_us() { return std::round(log_uniform(1, 2000) * 10) / 10; }

  index_t tensor(std::string name, bytes_t bytes, tensor_kind kind) {
    return g_.add_tensor({.name = std::move(name),
                          .bytes = bytes, .kind = kind, .shape = {}, .dtype = {}});
  }
  index_t op(std::string name, std::string type, phase ph, std::vector<index_t> in, std::vector<index_t> out,
             bool recomputable) {
    const bool splittable = !chance(o_.not_splittable_fraction);
    const bytes_t workspace = chance(o_.workspace_fraction) ? size() : 0;
    return g_.add_op({.name = std::move(name), .type = std::move(type),
                      .phase = ph, .time_us = time_us(), .workspace_bytes = workspace, .inputs = std::move(in),
                      .outputs = std::move(out), .recomputable = recomputable,
                      .split_dims = splittable ? std::vector<int>{0} : std::vector<int>{}});
  }

  /// A forward op reading `in` (and a parameter, sometimes) and writing
  /// `outputs` new activations.
  std::vector<index_t> forward(std::string_view type, std::vector<index_t> in, int outputs, bool with_param) {
    layer l;
    const std::string name = concat(type, tape_.size());
    l.inputs = std::move(in);
    if (with_param) l.params.push_back(tensor(name + ".w", size(), tensor_kind::parameter));
    for (int k = 0; k < outputs; ++k) l.outputs.push_back(tensor(concat(name, ".out", k), size(), tensor_kind::activation));
    std::vector<index_t> reads = l.inputs;
    reads.insert(reads.end(), l.params.begin(), l.params.end());
    l.op = op(name, std::string(type), phase::forward, std::move(reads), l.outputs, !chance(o_.not_recomputable_fraction));
    tape_.push_back(l);
    return l.outputs;
  }
  std::vector<index_t> unary(std::string_view type, const std::vector<index_t>& in) {
    return forward(type, in, between(1, o_.max_outputs), chance(0.6));
  }

  /// One block of the chosen shape after `in`; returns its outputs.
  std::vector<index_t> block(const std::vector<index_t>& in) {
    switch (o_.shape) {
      case graph_shape::chain: return unary("layer", in);
      case graph_shape::residual: {
        const auto a = forward("conv", in, 1, true);
        const auto b = forward("conv", a, 1, true);
        std::vector<index_t> sum = b;
        sum.push_back(in.front());
        return forward("add", sum, 1, false);
      }
      case graph_shape::inception: {
        std::vector<index_t> ends;
        for (int branch = between(2, 4); branch > 0; --branch) {
          std::vector<index_t> x = in;
          for (int depth = between(1, 3); depth > 0; --depth) x = forward("conv", x, 1, true);
          ends.insert(ends.end(), x.begin(), x.end());
        }
        return forward("concat", ends, 1, false);
      }
      case graph_shape::transformer: {
        const auto qkv = forward("qkv", in, 3, true);  // one op, three outputs
        const auto scores = forward("scores", {qkv[0], qkv[1]}, 1, false);
        const auto probs = forward("softmax", scores, 1, false);
        const auto context = forward("context", {probs[0], qkv[2]}, 1, false);
        const auto proj = forward("proj", context, 1, true);
        const auto h = forward("add", {in.front(), proj[0]}, 1, false);
        const auto up = forward("mlp_up", h, 1, true);
        const auto act = forward("gelu", up, 1, false);
        const auto down = forward("mlp_down", act, 1, true);
        return forward("add", {h[0], down[0]}, 1, false);
      }
      case graph_shape::random_dag: {
        // Reads 1-3 earlier activations, mostly recent ones.
        std::vector<index_t> reads;
        for (int k = between(1, 3); k > 0; --k) {
          const auto back = std::min(static_cast<std::size_t>(std::geometric_distribution<int>(0.3)(rng_)),
                                     activations_made() - 1);
          const index_t t = activation_from_end(back);
          if (std::ranges::find(reads, t) == reads.end()) reads.push_back(t);
        }
        return unary("node", reads);
      }
    }
    return in;
  }
  [[nodiscard]] std::size_t activations_made() const {
    std::size_t n = 1;  // the graph input
    for (const layer& l : tape_) n += l.outputs.size();
    return n;
  }
  /// The `back`-th newest activation (0: the newest; the graph input last).
  [[nodiscard]] index_t activation_from_end(std::size_t back) const {
    for (auto l = tape_.rbegin(); l != tape_.rend(); ++l) {
      if (back < l->outputs.size()) return l->outputs[l->outputs.size() - 1 - back];
      back -= l->outputs.size();
    }
    return 0;
  }

  /// Loss over every activation nobody reads, the backward pass in reverse
  /// tape order, then the updates.
  void finish() {
    const std::size_t tensors = g_.num_tensors();
    std::vector<std::uint8_t> read(tensors, 0);
    for (const layer& l : tape_) {
      for (const index_t t : l.inputs) read[static_cast<std::size_t>(t)] = 1;
    }
    std::vector<std::vector<index_t>> contributions(tensors);
    std::vector<index_t> sinks, seeds;
    for (const layer& l : tape_) {
      for (const index_t t : l.outputs) {
        if (read[static_cast<std::size_t>(t)]) continue;
        sinks.push_back(t);
        seeds.push_back(gradient_of(t));
        contributions[static_cast<std::size_t>(t)].push_back(seeds.back());
      }
    }
    sinks.push_back(tensor("labels", size(), tensor_kind::input));
    op("loss", "loss", phase::backward, sinks, seeds, false);

    std::vector<std::pair<index_t, index_t>> param_grads;
    for (auto l = tape_.rbegin(); l != tape_.rend(); ++l) {
      std::vector<index_t> in;
      for (const index_t t : l->outputs) in.push_back(accumulate(t, contributions[static_cast<std::size_t>(t)]));
      // What the backward keeps: some of the op's inputs and outputs, and its parameters.
      for (const index_t t : l->inputs) {
        if (chance(0.7)) in.push_back(t);
      }
      for (const index_t t : l->outputs) {
        if (chance(0.3)) in.push_back(t);
      }
      in.insert(in.end(), l->params.begin(), l->params.end());
      std::vector<index_t> out;
      for (const index_t t : l->inputs) {
        if (g_.producer(t) == no_index) continue;  // the graph input needs no gradient
        out.push_back(gradient_of(t));
        contributions[static_cast<std::size_t>(t)].push_back(out.back());
      }
      for (const index_t w : l->params) {
        out.push_back(tensor(g_.tensor(w).name + ".grad", g_.tensor(w).bytes, tensor_kind::parameter_gradient));
        param_grads.emplace_back(w, out.back());
      }
      std::ranges::sort(in);
      in.erase(std::ranges::unique(in).begin(), in.end());
      op(g_.op(l->op).name + ".backward", g_.op(l->op).type + "_backward", phase::backward, std::move(in),
         std::move(out), false);
    }
    if (!o_.updates) return;
    for (const auto& [w, grad] : param_grads) {
      const index_t state = tensor(g_.tensor(w).name + ".momentum", g_.tensor(w).bytes, tensor_kind::optimizer_state);
      op(g_.tensor(w).name + ".update", "sgd_momentum", phase::update, {w, grad, state}, {}, false);
    }
  }
  index_t gradient_of(index_t t) { return tensor(g_.tensor(t).name + ".grad", g_.tensor(t).bytes, tensor_kind::gradient); }
  /// The gradient of `t`: its one contribution, or their sum.
  index_t accumulate(index_t t, const std::vector<index_t>& parts) {
    if (parts.size() == 1) return parts.front();
    const index_t sum = gradient_of(t);
    op(g_.tensor(t).name + ".grad_sum", "add", phase::backward, parts, {sum}, false);
    return sum;
  }

  graph_options o_;
  std::mt19937_64 rng_;
  graph g_;
  std::vector<layer> tape_;
};

}  // namespace detail

/// A random training graph of shape `o.shape`, the same for the same options
/// and seed. Ops are added in a topological order (forward, loss, backward,
/// updates); every tensor but the input and labels has a producer.
/// \throws invalid_argument on nonsensical options (sizes below 1, no ops).
[[nodiscard]] inline graph random_training_graph(const graph_options& o, std::uint64_t seed) {
  return detail::graph_generator(o, seed).build();
}

/// A lower bound on the peak of every valid plan of `p`: while step s runs,
/// its distinct inputs and outputs are all on the device, and so is its
/// workspace. An op that may be split needs only one micro-op's share of
/// its workspace and of its tensors that carry samples (input, activation,
/// gradient: plan.hpp's micro-tensors), which more parts make as small as
/// one likes; so for such a step only its other tensors count.
[[nodiscard]] inline bytes_t peak_lower_bound(const problem& p) {
  const auto carries_samples = [](tensor_kind k) {
    return k == tensor_kind::input || k == tensor_kind::activation || k == tensor_kind::gradient;
  };
  bytes_t bound = 0;
  std::vector<index_t> seen;
  for (std::size_t s = 0; s < p.num_steps(); ++s) {
    const auto step = static_cast<index_t>(s);
    const bool splittable = !p.split_dims(step).empty();
    seen.assign(p.inputs(step).begin(), p.inputs(step).end());
    seen.insert(seen.end(), p.outputs(step).begin(), p.outputs(step).end());
    std::ranges::sort(seen);
    seen.erase(std::ranges::unique(seen).begin(), seen.end());
    bytes_t need = splittable ? 0 : p.workspace[s];
    for (const index_t t : seen) {
      if (!splittable || !carries_samples(p.kind[static_cast<std::size_t>(t)])) need += p.bytes[static_cast<std::size_t>(t)];
    }
    bound = std::max(bound, need);
  }
  return bound;
}

}  // namespace memplan::testing
