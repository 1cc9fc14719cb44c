#pragma once
// The trainers' networks as memplan graphs: an MLP (linear, ReLU) and a
// small CNN (conv, batch norm, ReLU, max pooling, linear), both ending in
// softmax cross-entropy and updated by SGD. `net_builder` records the
// forward layers, then emits the loss, the backward ops in reverse and one
// update op per parameter, so the graph is one whole training iteration.
//
// Every op but batch norm and the updates works sample by sample: it may be
// split along the batch (split_dims {0}). Batch norm uses statistics over
// the whole batch and is never split; it keeps no running statistics, so it
// is a pure function of its inputs and may be recomputed, and its backward
// op computes the statistics again from its input (as cuDNN does when given
// no saved statistics) rather than keeping them in a tensor of their own. Parameters are
// separate tensors from the updated parameters the update ops write (the
// trainer feeds the latter back as the next iteration's parameters).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "memplan/compile.hpp"
#include "memplan/cost/device.hpp"
#include "memplan/cost/roofline.hpp"
#include "memplan/graph/graph.hpp"
#include "memplan/graph/schedule.hpp"
#include "memplan/problem.hpp"

namespace memplan::trainers {

/// What an op of the trainers' graphs computes (kernels.hpp gives each one's contract).
enum class layer_op : std::uint8_t {
  conv, conv_grad_x, conv_grad_w,
  batchnorm, batchnorm_grad,
  relu, relu_grad,
  maxpool, maxpool_grad,
  linear, linear_grad_x, linear_grad_w,
  loss,  // softmax cross-entropy: the logits' gradient and each sample's log-likelihood
  sgd
};

/// Dimensions of one sample at an op: channels in and out, height and width
/// of its input (linear: in = c_in, out = c_out, h = w = 1). Convolutions
/// are 3x3, stride 1, padding 1; pooling is 2x2, stride 2.
struct dims {
  int c_in = 1;
  int c_out = 1;
  int h = 1;
  int w = 1;
  int batch = 1;    ///< the whole batch (batch norm, the loss's mean)
  float lr = 0.0f;  ///< sgd: the learning rate
  [[nodiscard]] std::size_t in_elements() const { return static_cast<std::size_t>(c_in) * h * w; }
};

/// Batch norm's epsilon (cuDNN's smallest allowed is 1e-5).
inline constexpr double batchnorm_epsilon = 1e-5;

struct layer_call {
  layer_op kind = layer_op::relu;
  dims d;
};

/// A network's training iteration: the graph, its compiled problem, what
/// each op computes, and the tensors a trainer feeds and reads.
struct network {
  std::string name;
  int batch = 0;
  int classes = 0;
  graph g{"trainer"};
  problem p;
  std::vector<layer_call> calls;  ///< per graph op
  index_t images = no_index;      ///< input, batch x in_elements floats
  index_t onehot = no_index;      ///< input, batch x classes floats (the labels)
  index_t log_likelihood = no_index;  ///< per sample: log p(true class), written by the loss op
  std::vector<index_t> parameters;    ///< read by the first op that uses each
  std::vector<index_t> updated;       ///< per parameter: the update op's output
};

/// Work of an op for the roofline: FLOPs and bytes moved.
struct op_work {
  double flops = 0;
  double bytes = 0;
};

/// An op's workspace as a kernel set needs it: bytes for (kind, dims).
using workspace_fn = std::function<bytes_t(layer_op, const dims&)>;

/// Builds a network layer by layer; `finish` adds loss, backward and updates.
/// Op times are the roofline of `timing` (or measured later: trainer.hpp).
class net_builder {
 public:
  net_builder(std::string name, int batch, int channels, int height, int width, const device_spec& timing,
              workspace_fn workspace)
      : timing_(timing), workspace_(std::move(workspace)) {
    n_.name = std::move(name);
    n_.g = graph(n_.name);
    n_.batch = batch;
    cur_ = {.c_in = channels, .c_out = channels, .h = height, .w = width, .batch = batch};
    n_.images = tensor("images", static_cast<std::size_t>(batch) * cur_.in_elements(), tensor_kind::input);
    x_ = n_.images;
  }

  void conv(int c_out) {
    dims d = cur_;
    d.c_out = c_out;
    const index_t w = parameter(name_of(layer_op::conv) + ".weight", static_cast<std::size_t>(c_out) * d.c_in * 9);
    const double macs = static_cast<double>(d.batch) * c_out * d.h * d.w * d.c_in * 9;
    forward(layer_op::conv, d, {w}, static_cast<std::size_t>(c_out) * d.h * d.w, 2 * macs);
    cur_.c_in = c_out;
  }
  void batchnorm() {
    const dims d = same(cur_);
    const index_t gb = parameter(name_of(layer_op::batchnorm) + ".weight_bias", 2 * static_cast<std::size_t>(d.c_in));
    forward(layer_op::batchnorm, d, {gb}, d.in_elements(), 8.0 * d.batch * d.in_elements());
  }
  void relu() { forward(layer_op::relu, same(cur_), {}, cur_.in_elements(), 1.0 * cur_.batch * cur_.in_elements()); }
  void maxpool() {
    const dims d = same(cur_);
    forward(layer_op::maxpool, d, {}, d.in_elements() / 4, 1.0 * d.batch * d.in_elements());
    cur_.h /= 2;
    cur_.w /= 2;
  }
  void linear(int out) {
    dims d{.c_in = static_cast<int>(cur_.in_elements()), .c_out = out, .h = 1, .w = 1, .batch = cur_.batch};
    const index_t w = parameter(name_of(layer_op::linear) + ".weight_bias", static_cast<std::size_t>(out) * (d.c_in + 1));
    forward(layer_op::linear, d, {w}, static_cast<std::size_t>(out), 2.0 * d.batch * out * d.c_in);
    cur_ = {.c_in = out, .c_out = out, .h = 1, .w = 1, .batch = cur_.batch};
  }

  /// Adds the loss over `classes` logits (the last layer's outputs), the
  /// backward ops in reverse and an SGD update per parameter with `lr`.
  network finish(float lr);

 private:
  /// A forward layer as the backward pass needs it.
  struct record {
    layer_op kind;
    dims d;
    index_t x, y, param;
  };

  static dims same(dims d) {
    d.c_out = d.c_in;
    return d;
  }
  /// The next layer of `kind`'s name: conv1, conv2, bn1, relu1, pool1, fc1, ...
  std::string name_of(layer_op kind) const {
    static constexpr const char* names[] = {"conv", "", "", "bn", "", "relu", "", "pool", "", "fc"};
    const auto same_kind = std::count_if(layers_.begin(), layers_.end(), [&](const record& r) { return r.kind == kind; });
    return names[static_cast<std::size_t>(kind)] + std::to_string(same_kind + 1);
  }

  index_t tensor(const std::string& name, std::size_t floats, tensor_kind kind) {
    return n_.g.add_tensor({.name = name,
                            .bytes = static_cast<bytes_t>(floats * sizeof(float)), .kind = kind,
                            .shape = {static_cast<std::int64_t>(floats)}, .dtype = "float32"});
  }
  index_t parameter(const std::string& name, std::size_t floats) {
    const index_t t = tensor(name, floats, tensor_kind::parameter);
    n_.parameters.push_back(t);
    return t;
  }

  index_t op(const std::string& name, layer_op kind, const dims& d, phase ph, std::vector<index_t> in,
             std::vector<index_t> out, op_work work) {
    static constexpr const char* types[] = {"conv2d",  "conv2d_backward", "conv2d_backward", "batch_norm",
                                            "batch_norm_backward", "relu", "relu_backward", "max_pool",
                                            "max_pool_backward", "linear", "linear_backward", "linear_backward",
                                            "cross_entropy", "sgd"};
    const bool per_sample = kind != layer_op::batchnorm && kind != layer_op::batchnorm_grad && kind != layer_op::sgd;
    for (const index_t t : in) work.bytes += static_cast<double>(n_.g.tensor(t).bytes);
    for (const index_t t : out) work.bytes += static_cast<double>(n_.g.tensor(t).bytes);
    const bool gemm = kind == layer_op::conv || kind == layer_op::conv_grad_x || kind == layer_op::conv_grad_w ||
                      kind == layer_op::linear || kind == layer_op::linear_grad_x || kind == layer_op::linear_grad_w;
    n_.calls.push_back({kind, d});
    return n_.g.add_op({.name = name,
                        .type = types[static_cast<std::size_t>(kind)], .phase = ph,
                        .time_us = roofline_time_us(timing_, work.flops, work.bytes, math_mode::fp32,
                                                    gemm ? gemm_efficiency : elementwise_efficiency),
                        .workspace_bytes = workspace_(kind, d), .inputs = std::move(in), .outputs = std::move(out),
                        .recomputable = ph == phase::forward,
                        .split_dims = per_sample ? std::vector<int>{0} : std::vector<int>{}});
  }

  void forward(layer_op kind, const dims& d, std::vector<index_t> params, std::size_t out_per_sample, double flops) {
    const std::string name = name_of(kind);
    const index_t y = tensor(name + ".out", static_cast<std::size_t>(d.batch) * out_per_sample, tensor_kind::activation);
    std::vector<index_t> in{x_};
    in.insert(in.end(), params.begin(), params.end());
    op(name, kind, d, phase::forward, std::move(in), {y}, {flops, 0});
    layers_.push_back({kind, d, x_, y, params.empty() ? no_index : params[0]});
    x_ = y;
  }

  /// The backward ops of layer `r` given dy; returns dx (no_index for the first layer).
  index_t backward(const record& r, index_t dy, std::vector<index_t>& param_grads);

  const device_spec& timing_;
  workspace_fn workspace_;
  network n_;
  dims cur_;
  index_t x_ = no_index;
  std::vector<record> layers_;
};

inline index_t net_builder::backward(const record& r, index_t dy, std::vector<index_t>& param_grads) {
  const bool first = r.x == n_.images;
  const double elems = static_cast<double>(r.d.batch) * static_cast<double>(r.d.in_elements());
  const std::string base = n_.g.tensor(r.y).name.substr(0, n_.g.tensor(r.y).name.size() - 4);  // "conv1" of "conv1.out"
  const auto grad_of = [&](index_t t, tensor_kind kind) {
    return tensor(n_.g.tensor(t).name + ".grad", static_cast<std::size_t>(n_.g.tensor(t).bytes) / sizeof(float), kind);
  };
  index_t dx = no_index;
  switch (r.kind) {
    case layer_op::conv: {
      const double flops = 2.0 * r.d.batch * r.d.c_out * r.d.h * r.d.w * r.d.c_in * 9;
      param_grads.push_back(grad_of(r.param, tensor_kind::parameter_gradient));
      op(base + ".grad_weight", layer_op::conv_grad_w, r.d, phase::backward, {r.x, dy}, {param_grads.back()},
         {flops, 0});
      if (!first) {
        dx = grad_of(r.x, tensor_kind::gradient);
        op(base + ".grad_input", layer_op::conv_grad_x, r.d, phase::backward, {dy, r.param}, {dx}, {flops, 0});
      }
      break;
    }
    case layer_op::linear: {
      const double flops = 2.0 * r.d.batch * r.d.c_out * r.d.c_in;
      param_grads.push_back(grad_of(r.param, tensor_kind::parameter_gradient));
      op(base + ".grad_weight", layer_op::linear_grad_w, r.d, phase::backward, {r.x, dy}, {param_grads.back()},
         {flops, 0});
      if (!first) {
        dx = grad_of(r.x, tensor_kind::gradient);
        op(base + ".grad_input", layer_op::linear_grad_x, r.d, phase::backward, {dy, r.param}, {dx}, {flops, 0});
      }
      break;
    }
    case layer_op::batchnorm:
      param_grads.push_back(grad_of(r.param, tensor_kind::parameter_gradient));
      dx = grad_of(r.x, tensor_kind::gradient);
      op(base + ".backward", layer_op::batchnorm_grad, r.d, phase::backward, {r.x, dy, r.param},
         {dx, param_grads.back()}, {10 * elems, 0});
      break;
    case layer_op::relu:
      dx = grad_of(r.x, tensor_kind::gradient);
      op(base + ".backward", layer_op::relu_grad, r.d, phase::backward, {r.y, dy}, {dx}, {elems, 0});
      break;
    case layer_op::maxpool:
      dx = grad_of(r.x, tensor_kind::gradient);
      op(base + ".backward", layer_op::maxpool_grad, r.d, phase::backward, {r.x, r.y, dy}, {dx}, {elems, 0});
      break;
    default: break;
  }
  return dx;
}

inline network net_builder::finish(float lr) {
  n_.classes = cur_.c_in;
  n_.onehot = tensor("labels.onehot", static_cast<std::size_t>(n_.batch) * n_.classes, tensor_kind::input);
  const dims loss_dims{.c_in = n_.classes, .c_out = n_.classes, .h = 1, .w = 1, .batch = n_.batch};
  index_t dy = tensor("logits.grad", static_cast<std::size_t>(n_.batch) * n_.classes, tensor_kind::gradient);
  n_.log_likelihood = tensor("log_likelihood", static_cast<std::size_t>(n_.batch), tensor_kind::activation);
  const double elems = static_cast<double>(n_.batch) * n_.classes;
  op("loss", layer_op::loss, loss_dims, phase::backward, {x_, n_.onehot}, {dy, n_.log_likelihood}, {8 * elems, 0});
  std::vector<index_t> param_grads;  // in the order of layers_ reversed, one per layer with a parameter
  for (std::size_t l = layers_.size(); l-- > 0;) dy = backward(layers_[l], dy, param_grads);
  // Updates in parameter order: param_grads is reversed.
  for (std::size_t i = 0; i < n_.parameters.size(); ++i) {
    const index_t w = n_.parameters[i];
    const index_t g = param_grads[param_grads.size() - 1 - i];
    const auto floats = static_cast<std::size_t>(n_.g.tensor(w).bytes) / sizeof(float);
    n_.updated.push_back(tensor(n_.g.tensor(w).name + ".new", floats, tensor_kind::parameter));
    dims d{.c_in = static_cast<int>(floats), .batch = n_.batch, .lr = lr};
    op(n_.g.tensor(w).name + ".update", layer_op::sgd, d, phase::update, {w, g}, {n_.updated.back()},
       {2.0 * static_cast<double>(floats), 0});
  }
  schedule order(n_.g.num_ops());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<index_t>(i);
  n_.p = compile(n_.g, order);
  return std::move(n_);
}

}  // namespace memplan::trainers
