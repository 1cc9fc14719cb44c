#pragma once
/// \file
/// The model-zoo builder: layer helpers with shape inference that add each
/// forward op and record what its backward keeps; `finish()` then generates
/// the backward ops in reverse (gradients sized exactly, accumulated where a
/// tensor feeds several ops), the parameter gradients, and the optimizer
/// update ops with their state.
///
/// What each backward keeps follows PyTorch's autograd (the `SavedVariable`s
/// of each `*Backward` node):
///
/// | op            | backward keeps                        | recomputable | split dims      |
/// |---------------|---------------------------------------|--------------|-----------------|
/// | conv2d        | input, weight                         | yes          | batch, channels |
/// | batch_norm    | input, weight, saved mean/invstd      | yes          | channels        |
/// | relu, relu6   | output                                | yes          | batch, channels |
/// | max_pool      | input, indices (int64)                | yes          | batch, channels |
/// | avg_pool      | nothing (shapes only)                 | yes          | batch, channels |
/// | linear        | input, weight                         | yes          | batch, features |
/// | matmul        | both operands                         | yes          | batch, rows     |
/// | dropout       | mask (1 byte per element)             | **no**       | batch, channels |
/// | softmax       | output                                | yes          | batch           |
/// | cross_entropy | log-probabilities, labels             | yes          | batch           |
/// | layer_norm    | input, weight, saved mean/rstd        | yes          | batch, sequence |
/// | gelu          | input                                 | yes          | batch, sequence |
/// | tanh          | output                                | yes          | batch           |
/// | attention     | q, k, v, softmax output, dropout mask | no if p > 0  | batch, seq, heads |
/// | embedding     | indices                               | yes          | batch, sequence |
/// | concat, add   | nothing                               | yes          | batch           |
///
/// Dropout draws fresh random bits, so recomputing it would produce a
/// different mask: it is not recomputable unless the framework saves its RNG
/// seed (PyTorch's `checkpoint(preserve_rng_state=True)` does). The zoo
/// assumes it does not.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "memplan/cost/device.hpp"
#include "memplan/cost/roofline.hpp"
#include "memplan/error.hpp"
#include "memplan/fwd.hpp"
#include "memplan/graph/graph.hpp"
#include "memplan/model/options.hpp"

namespace memplan::model {

/// A tensor shape, outermost dimension first (NCHW for images, [B, S, D] for sequences).
using shape_t = std::vector<std::int64_t>;

/// Number of elements of `s`.
[[nodiscard]] inline std::int64_t numel(const shape_t& s) noexcept {
  std::int64_t n = 1;
  for (const auto d : s) n *= d;
  return n;
}

/// How a tensor's elements are stored.
enum class element : unsigned char {
  activation,  ///< the model's `options::type`
  fp32,        ///< statistics kept in FP32 whatever the model type
  int64,       ///< labels, token ids, max-pool indices
  boolean,     ///< dropout masks, one byte per element
};

/// A tensor as the builder sees it: the graph's tensor index and the logical
/// shape (views such as `flatten` share the index).
struct value {
  index_t id = no_index;  ///< the graph's tensor index
  shape_t shape;          ///< the logical shape, which a view may change without a new tensor
};

/// A 2-D window: kernel, stride and padding per axis.
struct kernel2d {
  ///@{
  /// Per axis (height, width), in elements: the window's size, its stride, and
  /// the zero padding on each side (an output extent is (in + 2 pad - k) / stride + 1).
  int h = 1, w = 1;
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;
  ///@}
  /// A k x k window.
  [[nodiscard]] static constexpr kernel2d square(int k, int stride = 1, int pad = 0) noexcept {
    return {k, k, stride, stride, pad, pad};
  }
  /// A kh x kw window with "same" padding and stride 1 (Inception's 1x7 / 7x1).
  [[nodiscard]] static constexpr kernel2d rect(int kh, int kw) noexcept { return {kh, kw, 1, 1, kh / 2, kw / 2}; }
};

/// A model's training graph and the counts the tests check against papers.
struct built_model {
  memplan::graph graph;                   ///< one training iteration: forward, backward, update
  std::int64_t parameters = 0;            ///< trainable parameters (BN running stats excluded)
  std::int64_t task_head_parameters = 0;  ///< of which: a task head added for training (BERT's classifier)
  double forward_flops = 0;               ///< every forward op, FLOPs (2 per multiply-add)
  double forward_macs = 0;                ///< multiply-adds of conv, linear, matmul and attention
};

/// Builds one training iteration. Layer helpers check shapes and throw
/// `invalid_argument` naming the layer; `finish()` returns the graph.
class builder {
 public:
  /// \param name the graph's name (`resnet50-b32`).
  /// \param opt the batch, width factor, element type, optimizer and input size.
  /// \param dev the device whose roofline prices each op (op_info::time_us).
  builder(std::string name, const options& opt, const device_spec& dev)
      : opt_(opt), dev_(dev), graph_(std::move(name)) {
    switch (opt.type) {
      case dtype::fp32: act_bytes_ = 4; act_dtype_ = "float32"; break;
      case dtype::fp16: act_bytes_ = 2; act_dtype_ = "float16"; break;
      case dtype::bf16: act_bytes_ = 2; act_dtype_ = "bfloat16"; break;
    }
  }

  /// The options the model is built with.
  [[nodiscard]] const options& opts() const noexcept { return opt_; }
  /// The batch size (`options::batch`): every source's outermost dimension.
  [[nodiscard]] std::int64_t batch() const noexcept { return opt_.batch; }
  /// `c` channels (or features) scaled by the width factor k, at least 1.
  [[nodiscard]] std::int64_t width(std::int64_t c) const noexcept {
    return std::max<std::int64_t>(1, std::llround(static_cast<double>(c) * opt_.scale));
  }

  /// Routes the parameters created until `false` into `task_head_parameters`.
  void set_task_head(bool on) noexcept { in_task_head_ = on; }

  // ---- sources -------------------------------------------------------------

  /// An image-classification batch: NCHW images, int64 labels, class count.
  struct image_batch {
    value images;                 ///< [batch, 3, resolution, resolution], the activation type
    value labels;                 ///< [batch], int64 class indices
    std::int64_t classes = 1000;  ///< 1000 (ImageNet) or 10 (CIFAR-10)
  };
  /// Images at `options::resolution` (else `default_resolution`, or 32 for
  /// CIFAR) with ImageNet's 1000 classes or CIFAR-10's 10.
  /// `cifar_resolution` is the CIFAR input size (32, or 299 where the model
  /// needs CIFAR images upsampled, as Inception-v3 does).
  image_batch images(std::int64_t default_resolution, bool cifar_only = false, std::int64_t cifar_resolution = 32) {
    const bool cifar = opt_.cifar || cifar_only;
    const std::int64_t res = opt_.resolution > 0 ? opt_.resolution : cifar ? cifar_resolution : default_resolution;
    const std::int64_t classes = cifar ? 10 : 1000;
    return {input("images", {batch(), 3, res, res}), input("labels", {batch()}, element::int64), classes};
  }

  /// A tensor fed from outside (images, labels, token ids): kind `input`.
  value input(std::string name, shape_t shape, element e = element::activation) {
    const index_t t = add_tensor(std::move(name), shape, e, tensor_kind::input);
    return {t, std::move(shape)};
  }

  /// A trainable parameter: kind `parameter`, FP32 or the model type.
  value parameter(std::string name, shape_t shape) {
    const index_t t = add_tensor(std::move(name), shape, element::activation, tensor_kind::parameter);
    requires_grad_[static_cast<std::size_t>(t)] = 1;
    params_.push_back(t);
    (in_task_head_ ? task_head_parameters_ : parameters_) += numel(shape);
    return {t, std::move(shape)};
  }

  // ---- layers ----------------------------------------------------------------

  /// 2-D convolution over NCHW (`groups` = channels makes it depthwise).
  value conv2d(std::string name, const value& x, std::int64_t out, kernel2d k, std::int64_t groups = 1,
               bool bias = false) {
    expect_rank(name, x, 4);
    const std::int64_t c = x.shape[1];
    MEMPLAN_EXPECTS(groups >= 1 && c % groups == 0 && out % groups == 0, invalid_argument, "layer '", name, "': ",
                    c, " input and ", out, " output channels do not divide into ", groups, " groups");
    const std::int64_t ho = window_out(name, x.shape[2], k.h, k.stride_h, k.pad_h, false);
    const std::int64_t wo = window_out(name, x.shape[3], k.w, k.stride_w, k.pad_w, false);
    layer l = make_layer(name, "conv2d", {x.id});
    l.params.push_back(parameter(name + ".weight", {out, c / groups, k.h, k.w}).id);
    if (bias) l.params.push_back(parameter(name + ".bias", {out}).id);
    const value y = activation(name + ".out", {x.shape[0], out, ho, wo});
    const double macs = static_cast<double>(numel(y.shape)) * static_cast<double>(c / groups * k.h * k.w);
    l.outputs = {y.id};
    l.saved = {x.id, l.params[0]};
    l.flops = 2 * macs + (bias ? static_cast<double>(numel(y.shape)) : 0.0);
    l.backward_flops = l.flops * (requires_grad(x.id) ? 2 : 1);  // data grad + weight grad
    l.macs = macs;
    l.math = opt_.type == dtype::fp32 ? math_mode::tf32 : math_mode::half;  // cuDNN allows TF32 by default
    l.gemm = true;
    l.split_dims = {0, 1};
    record(std::move(l));
    return y;
  }

  /// Batch normalisation over the channels of NCHW (training mode).
  value batch_norm(std::string name, const value& x) {
    expect_rank(name, x, 4);
    layer l = make_layer(name, "batch_norm", {x.id});
    l.params = {parameter(name + ".weight", {x.shape[1]}).id, parameter(name + ".bias", {x.shape[1]}).id};
    const value y = activation(name + ".out", x.shape);
    const index_t stats = add_tensor(name + ".saved_stats", {2, x.shape[1]}, element::fp32, tensor_kind::activation);
    l.outputs = {y.id, stats};
    l.saved = {x.id, l.params[0], stats};
    const auto n = static_cast<double>(numel(x.shape));
    l.flops = 8 * n;
    l.backward_flops = 12 * n;
    l.split_dims = {1};  // batch statistics forbid a batch split
    record(std::move(l));
    return y;
  }

  /// ReLU (or ReLU6 with `six`); the backward keeps the output.
  value relu(std::string name, const value& x, bool six = false) {
    return pointwise(std::move(name), six ? "relu6" : "relu", x, 1, 1, /*keep_output=*/true);
  }
  /// GELU (BERT, GPT-2); the backward keeps the input.
  value gelu(std::string name, const value& x) { return pointwise(std::move(name), "gelu", x, 8, 16, false); }
  /// tanh (BERT's pooler); the backward keeps the output.
  value tanh(std::string name, const value& x) { return pointwise(std::move(name), "tanh", x, 4, 3, true); }

  /// Max pooling; the backward keeps the input and int64 indices.
  value max_pool(std::string name, const value& x, kernel2d k, bool ceil_mode = false) {
    expect_rank(name, x, 4);
    const value y = activation(name + ".out", pooled_shape(name, x, k, ceil_mode));
    const index_t indices = add_tensor(name + ".indices", y.shape, element::int64, tensor_kind::activation);
    layer l = make_layer(name, "max_pool", {x.id});
    l.outputs = {y.id, indices};
    l.saved = {x.id, indices};
    l.flops = static_cast<double>(numel(y.shape) * k.h * k.w);
    l.backward_flops = static_cast<double>(numel(y.shape));
    l.split_dims = {0, 1};
    record(std::move(l));
    return y;
  }

  /// Average pooling; the backward needs shapes only.
  value avg_pool(std::string name, const value& x, kernel2d k, bool ceil_mode = false) {
    expect_rank(name, x, 4);
    const value y = activation(name + ".out", pooled_shape(name, x, k, ceil_mode));
    layer l = make_layer(name, "avg_pool", {x.id});
    l.outputs = {y.id};
    l.flops = static_cast<double>(numel(y.shape) * k.h * k.w);
    l.backward_flops = static_cast<double>(numel(x.shape));
    l.split_dims = {0, 1};
    record(std::move(l));
    return y;
  }

  /// Global average pooling to N x C x 1 x 1 (adaptive_avg_pool2d(1)).
  value global_avg_pool(std::string name, const value& x) {
    expect_rank(name, x, 4);
    return avg_pool(std::move(name), x, {static_cast<int>(x.shape[2]), static_cast<int>(x.shape[3]),
                                         1, 1, 0, 0});
  }

  /// A view as N x (everything else): no op, no copy.
  [[nodiscard]] static value flatten(const value& x) {
    shape_t s{x.shape.front(), 1};
    for (std::size_t i = 1; i < x.shape.size(); ++i) s[1] *= x.shape[i];
    return {x.id, std::move(s)};
  }

  /// y = x W^T + b over the last dimension. `shared_weight` ties the weight
  /// to an existing [out, in] parameter (GPT-2's LM head, the Transformer's
  /// output projection) instead of creating one.
  value linear(std::string name, const value& x, std::int64_t out, bool bias = true,
               const value* shared_weight = nullptr) {
    MEMPLAN_EXPECTS(!x.shape.empty(), invalid_argument, "layer '", name, "': input has no dimensions");
    const std::int64_t in = x.shape.back();
    layer l = make_layer(name, "linear", {x.id});
    if (shared_weight != nullptr) {
      MEMPLAN_EXPECTS(shared_weight->shape == shape_t({out, in}), invalid_argument, "layer '", name,
                      "': the shared weight is not ", out, " x ", in);
      l.params.push_back(shared_weight->id);
    } else {
      l.params.push_back(parameter(name + ".weight", {out, in}).id);
    }
    if (bias) l.params.push_back(parameter(name + ".bias", {out}).id);
    shape_t s = x.shape;
    s.back() = out;
    const value y = activation(name + ".out", s);
    const double macs = static_cast<double>(numel(x.shape) / in) * static_cast<double>(in * out);
    l.outputs = {y.id};
    l.saved = {x.id, l.params[0]};
    l.flops = 2 * macs;
    l.backward_flops = l.flops * (requires_grad(x.id) ? 2 : 1);
    l.macs = macs;
    l.math = opt_.type == dtype::fp32 ? math_mode::fp32 : math_mode::half;  // cuBLAS FP32 GEMM unless told
    l.gemm = true;
    l.split_dims = {0, static_cast<int>(s.size()) - 1};
    record(std::move(l));
    return y;
  }

  /// Batched matrix product a [.., m, k] x b [.., k, n]; the backward keeps both.
  value matmul(std::string name, const value& a, const value& b) {
    MEMPLAN_EXPECTS(a.shape.size() >= 2 && a.shape.size() == b.shape.size() &&
                        a.shape.back() == b.shape[b.shape.size() - 2],
                    invalid_argument, "layer '", name, "': operands do not multiply");
    shape_t s = a.shape;
    s.back() = b.shape.back();
    const value y = activation(name + ".out", s);
    const double macs = static_cast<double>(numel(s)) * static_cast<double>(a.shape.back());
    layer l = make_layer(name, "matmul", {a.id, b.id});
    l.outputs = {y.id};
    l.saved = {a.id, b.id};
    l.flops = 2 * macs;
    l.backward_flops = 2 * l.flops;
    l.macs = macs;
    l.math = opt_.type == dtype::fp32 ? math_mode::fp32 : math_mode::half;
    l.gemm = true;
    l.split_dims = {0, static_cast<int>(s.size()) - 2};
    record(std::move(l));
    return y;
  }

  /// Dropout with drop probability `p` (`p == 0` adds nothing). Not
  /// recomputable: see the file comment.
  value dropout(std::string name, const value& x, double p) {
    if (p <= 0) return x;
    const value y = activation(name + ".out", x.shape);
    const index_t mask = add_tensor(name + ".mask", x.shape, element::boolean, tensor_kind::activation);
    layer l = make_layer(name, "dropout", {x.id});
    l.outputs = {y.id, mask};
    l.saved = {mask};
    l.flops = 2 * static_cast<double>(numel(x.shape));
    l.backward_flops = static_cast<double>(numel(x.shape));
    l.split_dims = {0, 1};
    l.recomputable = false;
    record(std::move(l));
    return y;
  }

  /// Softmax over the last dimension; the backward keeps the output.
  value softmax(std::string name, const value& x) {
    return pointwise(std::move(name), "softmax", x, 5, 4, true, {0});
  }

  /// Cross-entropy loss of `logits` [.., classes] against int64 `labels`:
  /// the root of the backward pass. The backward keeps the log-probabilities.
  value cross_entropy(std::string name, const value& logits, const value& labels) {
    const value loss = add_value(name + ".loss", {1}, element::fp32);
    const index_t log_probs = add_tensor(name + ".log_probs", logits.shape, element::activation,
                                         tensor_kind::activation);
    layer l = make_layer(name, "cross_entropy", {logits.id});
    l.extra_inputs = {labels.id};
    l.outputs = {loss.id, log_probs};
    l.differentiable_outputs = 0;
    l.loss = true;
    l.saved = {log_probs, labels.id};
    l.flops = 5 * static_cast<double>(numel(logits.shape));
    l.backward_flops = 2 * static_cast<double>(numel(logits.shape));
    l.split_dims = {0};
    record(std::move(l));
    return loss;
  }

  /// Layer normalisation over the last dimension.
  value layer_norm(std::string name, const value& x) {
    const std::int64_t d = x.shape.back();
    layer l = make_layer(name, "layer_norm", {x.id});
    l.params = {parameter(name + ".weight", {d}).id, parameter(name + ".bias", {d}).id};
    const value y = activation(name + ".out", x.shape);
    const index_t stats =
        add_tensor(name + ".saved_stats", {numel(x.shape) / d, 2}, element::fp32, tensor_kind::activation);
    l.outputs = {y.id, stats};
    l.saved = {x.id, l.params[0], stats};
    l.flops = 8 * static_cast<double>(numel(x.shape));
    l.backward_flops = 12 * static_cast<double>(numel(x.shape));
    l.split_dims = sequence_split(x);
    record(std::move(l));
    return y;
  }

  /// Embedding lookup of int64 `ids` in a [vocab, dim] table (or in
  /// `shared_table`); the backward keeps the ids and writes a dense table gradient.
  value embedding(std::string name, const value& ids, std::int64_t vocab, std::int64_t dim,
                  const value* shared_table = nullptr) {
    layer l = make_layer(name, "embedding", {});
    l.extra_inputs = {ids.id};
    l.params = {shared_table != nullptr ? shared_table->id : parameter(name + ".weight", {vocab, dim}).id};
    shape_t s = ids.shape;
    s.push_back(dim);
    const value y = activation(name + ".out", s);
    l.outputs = {y.id};
    l.saved = {ids.id};
    l.flops = static_cast<double>(numel(s));
    l.backward_flops = static_cast<double>(numel(s));
    l.split_dims = {0, 1};
    record(std::move(l));
    return y;
  }

  /// Scaled dot-product multi-head attention of q [B, Sq, D] over k, v
  /// [B, Sk, D] with `heads` heads, dropout `p` on the probabilities and an
  /// optional causal mask. The backward keeps q, k, v, the softmax output and
  /// the dropout mask.
  value attention(std::string name, const value& q, const value& k, const value& v, std::int64_t heads, double p,
                  bool causal = false) {
    MEMPLAN_EXPECTS(q.shape.size() == 3 && k.shape == v.shape && k.shape.size() == 3 && q.shape[0] == k.shape[0] &&
                        q.shape[2] == k.shape[2] && q.shape[2] % heads == 0,
                    invalid_argument, "layer '", name, "': q, k, v must be [B, S, D] with D divisible by ", heads,
                    " heads");
    const std::int64_t b = q.shape[0], sq = q.shape[1], sk = k.shape[1], d = q.shape[2];
    const value y = activation(name + ".out", q.shape);
    const index_t probs = add_tensor(name + ".probs", {b, heads, sq, sk}, element::activation,
                                     tensor_kind::activation);
    layer l = make_layer(name, causal ? "causal_attention" : "attention", {q.id, k.id, v.id});
    l.outputs = {y.id, probs};
    l.saved = {q.id, k.id, v.id, probs};
    if (p > 0) {
      const index_t mask = add_tensor(name + ".mask", {b, heads, sq, sk}, element::boolean, tensor_kind::activation);
      l.outputs.push_back(mask);
      l.saved.push_back(mask);
      l.recomputable = false;
    }
    const double macs = 2.0 * static_cast<double>(b * sq) * static_cast<double>(sk * d);  // QK^T and PV
    l.flops = 2 * macs + 5.0 * static_cast<double>(b * heads * sq * sk);
    l.backward_flops = 2 * l.flops;
    l.macs = macs;
    l.math = opt_.type == dtype::fp32 ? math_mode::fp32 : math_mode::half;
    l.gemm = true;
    l.split_dims = {0, 1, 2};
    record(std::move(l));
    return y;
  }

  /// Concatenation along `dim` (channels for Inception, DenseNet, SqueezeNet).
  value concat(std::string name, std::initializer_list<value> xs, int dim = 1) {
    return concat(std::move(name), std::vector<value>(xs), dim);
  }
  /// \copydoc concat
  value concat(std::string name, const std::vector<value>& xs, int dim = 1) {
    MEMPLAN_EXPECTS(!xs.empty(), invalid_argument, "layer '", name, "': nothing to concatenate");
    shape_t s = xs.front().shape;
    const auto d = static_cast<std::size_t>(dim);
    s[d] = 0;
    layer l = make_layer(name, "concat", {});
    for (const auto& x : xs) {
      shape_t other = x.shape;
      other[d] = s[d];
      MEMPLAN_EXPECTS(other == s, invalid_argument, "layer '", name, "': inputs differ outside dimension ", dim);
      s[d] += x.shape[d];
      l.inputs.push_back(x.id);
    }
    const value y = activation(name + ".out", s);
    l.outputs = {y.id};
    l.flops = 0;
    l.backward_flops = 0;
    l.split_dims = {0};
    record(std::move(l));
    return y;
  }

  /// a + b, `b` broadcast over leading dimensions (position embeddings).
  value add(std::string name, const value& a, const value& b) {
    MEMPLAN_EXPECTS(b.shape.size() <= a.shape.size() &&
                        std::equal(b.shape.rbegin(), b.shape.rend(), a.shape.rbegin(),
                                   [](auto x, auto y) { return x == y || x == 1; }),
                    invalid_argument, "layer '", name, "': shapes do not broadcast");
    const value y = activation(name + ".out", a.shape);
    layer l = make_layer(name, "add", {a.id, b.id});
    l.outputs = {y.id};
    l.flops = static_cast<double>(numel(a.shape));
    l.backward_flops = static_cast<double>(numel(a.shape));
    l.split_dims = {0};
    record(std::move(l));
    return y;
  }

  // ---- composites --------------------------------------------------------------

  /// conv2d (no bias) then batch_norm, named `<prefix>.conv` / `<prefix>.bn`.
  value conv_bn(const std::string& prefix, const value& x, std::int64_t out, kernel2d k, std::int64_t groups = 1) {
    return batch_norm(prefix + ".bn", conv2d(prefix + ".conv", x, out, k, groups));
  }
  /// conv_bn then ReLU (Inception's BasicConv2d, MobileNet's blocks).
  value conv_bn_relu(const std::string& prefix, const value& x, std::int64_t out, kernel2d k,
                     std::int64_t groups = 1, bool six = false) {
    return relu(prefix + ".relu", conv_bn(prefix, x, out, k, groups), six);
  }

  /// The standard image-classification tail: global pool, flatten, optional
  /// dropout, linear to `classes`, cross-entropy against `labels`.
  value classifier(const std::string& prefix, const value& features, std::int64_t classes, const value& labels,
                   double drop = 0) {
    value x = flatten(global_avg_pool(prefix + "avgpool", features));
    x = dropout(prefix + "dropout", x, drop);
    return cross_entropy(prefix + "loss", linear(prefix + "fc", x, classes), labels);
  }

  // ---- backward and update -------------------------------------------------------

  /// Generates the backward pass and the optimizer updates and returns the
  /// graph with its counts. The builder is spent afterwards.
  built_model finish() {
    const std::size_t n_tensors = graph_.num_tensors();
    // Which entries run a backward: losses, and entries whose outputs get a gradient.
    std::vector<std::uint8_t> gets_grad(n_tensors, 0);
    std::vector<std::uint8_t> live(tape_.size(), 0);
    for (std::size_t i = tape_.size(); i-- > 0;) {
      const layer& l = tape_[i];
      bool on = l.loss;
      for (int k = 0; k < l.differentiable_outputs; ++k) on = on || gets_grad[to_size(l.outputs[to_size(k)])];
      if (!on) continue;
      live[i] = 1;
      for (const index_t t : l.inputs) {
        if (requires_grad(t)) gets_grad[to_size(t)] = 1;
      }
      for (const index_t t : l.params) gets_grad[to_size(t)] = 1;
    }
    grad_uses_.assign(n_tensors, 0);
    for (std::size_t i = 0; i < tape_.size(); ++i) {
      if (!live[i]) continue;
      for (const index_t t : tape_[i].inputs) {
        if (requires_grad(t)) ++grad_uses_[to_size(t)];
      }
      for (const index_t t : tape_[i].params) ++grad_uses_[to_size(t)];
    }
    grad_.assign(n_tensors, no_index);
    grad_arrived_.assign(n_tensors, 0);

    for (std::size_t i = tape_.size(); i-- > 0;) {
      if (live[i]) emit_backward(tape_[i]);
    }
    emit_updates();

    built_model m;
    m.parameters = parameters_;
    m.task_head_parameters = task_head_parameters_;
    m.forward_flops = forward_flops_;
    m.forward_macs = forward_macs_;
    m.graph = std::move(graph_);
    return m;
  }

 private:
  /// One forward op and what its backward needs.
  struct layer {
    std::string name;
    const char* type = "";
    std::vector<index_t> inputs;        ///< data inputs (get a gradient if they require one)
    std::vector<index_t> params;        ///< parameters read (always get a gradient)
    std::vector<index_t> extra_inputs;  ///< inputs without gradient (labels, ids)
    std::vector<index_t> outputs;       ///< the first `differentiable_outputs` carry gradients
    int differentiable_outputs = 1;
    std::vector<index_t> saved;         ///< what the backward keeps
    double flops = 0;
    double backward_flops = 0;
    double macs = 0;
    math_mode math = math_mode::fp32;
    bool gemm = false;
    bool recomputable = true;
    bool loss = false;
    std::vector<int> split_dims;
  };

  static std::size_t to_size(index_t i) noexcept { return static_cast<std::size_t>(i); }
  [[nodiscard]] bool requires_grad(index_t t) const noexcept { return requires_grad_[to_size(t)] != 0; }

  [[nodiscard]] std::int64_t element_bytes(element e) const noexcept {
    switch (e) {
      case element::activation: return act_bytes_;
      case element::fp32: return 4;
      case element::int64: return 8;
      case element::boolean: return 1;
    }
    return act_bytes_;
  }
  [[nodiscard]] const char* element_name(element e) const noexcept {
    switch (e) {
      case element::activation: return act_dtype_;
      case element::fp32: return "float32";
      case element::int64: return "int64";
      case element::boolean: return "bool";
    }
    return act_dtype_;
  }

  index_t add_tensor(std::string name, const shape_t& shape, element e, tensor_kind kind) {
    tensor_info t;
    t.name = std::move(name);
    t.bytes = numel(shape) * element_bytes(e);
    t.kind = kind;
    t.shape = shape;
    t.dtype = element_name(e);
    requires_grad_.push_back(0);
    return graph_.add_tensor(std::move(t));
  }
  value add_value(std::string name, shape_t shape, element e) {
    const index_t t = add_tensor(std::move(name), shape, e, tensor_kind::activation);
    return {t, std::move(shape)};
  }
  value activation(std::string name, shape_t shape) { return add_value(std::move(name), std::move(shape), element::activation); }

  static layer make_layer(const std::string& name, const char* type, std::vector<index_t> inputs) {
    layer l;
    l.name = name;
    l.type = type;
    l.inputs = std::move(inputs);
    return l;
  }

  static void expect_rank(const std::string& name, const value& x, std::size_t rank) {
    MEMPLAN_EXPECTS(x.shape.size() == rank, invalid_argument, "layer '", name, "': expects a rank-", rank,
                    " input, got rank ", x.shape.size());
  }

  /// Output extent of a window (PyTorch's rule, with ceil_mode's last-window clamp).
  static std::int64_t window_out(const std::string& name, std::int64_t in, int k, int stride, int pad, bool ceil_mode) {
    const std::int64_t span = in + 2 * pad - k;
    MEMPLAN_EXPECTS(span >= 0 && stride >= 1, invalid_argument, "layer '", name, "': input extent ", in,
                    " is smaller than the ", k, "-wide window (padding ", pad, ")");
    std::int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
    if (ceil_mode && (out - 1) * stride >= in + pad) --out;
    return out;
  }
  static shape_t pooled_shape(const std::string& name, const value& x, kernel2d k, bool ceil_mode) {
    return {x.shape[0], x.shape[1], window_out(name, x.shape[2], k.h, k.stride_h, k.pad_h, ceil_mode),
            window_out(name, x.shape[3], k.w, k.stride_w, k.pad_w, ceil_mode)};
  }
  static std::vector<int> sequence_split(const value& x) {
    return x.shape.size() >= 3 ? std::vector<int>{0, 1} : std::vector<int>{0};
  }

  value pointwise(std::string name, const char* type, const value& x, double flops_per, double bwd_per,
                  bool keep_output, std::vector<int> split = {}) {
    const value y = activation(name + ".out", x.shape);
    layer l = make_layer(name, type, {x.id});
    l.outputs = {y.id};
    l.saved = {keep_output ? y.id : x.id};
    l.flops = flops_per * static_cast<double>(numel(x.shape));
    l.backward_flops = bwd_per * static_cast<double>(numel(x.shape));
    l.split_dims = split.empty() ? sequence_split(x) : std::move(split);
    record(std::move(l));
    return y;
  }

  [[nodiscard]] double bytes_of(const std::vector<index_t>& ts) const {
    double b = 0;
    for (const index_t t : ts) b += static_cast<double>(graph_.tensor(t).bytes);
    return b;
  }

  index_t emit(std::string name, std::string type, phase ph, std::vector<index_t> inputs,
               std::vector<index_t> outputs, double flops, double extra_bytes, math_mode math, bool gemm,
               bool recomputable, std::vector<int> split_dims) {
    op_info o;
    o.name = std::move(name);
    o.type = std::move(type);
    o.phase = ph;
    o.time_us = roofline_time_us(dev_, flops, bytes_of(inputs) + bytes_of(outputs) + extra_bytes, math,
                                 gemm ? gemm_efficiency : elementwise_efficiency);
    o.inputs = std::move(inputs);
    o.outputs = std::move(outputs);
    o.recomputable = recomputable;
    o.split_dims = std::move(split_dims);
    return graph_.add_op(std::move(o));
  }

  void record(layer l) {
    bool grad = false;
    for (const index_t t : l.inputs) grad = grad || requires_grad(t);
    grad = grad || !l.params.empty();
    for (int k = 0; k < l.differentiable_outputs; ++k) requires_grad_[to_size(l.outputs[to_size(k)])] = grad ? 1 : 0;
    std::vector<index_t> in = l.inputs;
    in.insert(in.end(), l.params.begin(), l.params.end());
    in.insert(in.end(), l.extra_inputs.begin(), l.extra_inputs.end());
    emit(l.name, l.type, phase::forward, std::move(in), l.outputs, l.flops, 0, l.math, l.gemm, l.recomputable,
         l.split_dims);
    forward_flops_ += l.flops;
    forward_macs_ += l.macs;
    tape_.push_back(std::move(l));
  }

  /// A new gradient tensor for `t` from one of its `grad_uses_` consumers.
  index_t new_grad(index_t t) {
    const tensor_info& fwd = graph_.tensor(t);
    const auto i = to_size(t);
    const bool only = grad_uses_[i] == 1;
    const bool param = fwd.kind == tensor_kind::parameter;
    tensor_info g;
    g.name = only ? fwd.name + ".grad" : fwd.name + ".grad." + std::to_string(grad_arrived_[i] + 1);
    g.bytes = fwd.bytes;
    g.kind = only && param ? tensor_kind::parameter_gradient : tensor_kind::gradient;
    g.shape = fwd.shape;
    g.dtype = fwd.dtype;
    requires_grad_.push_back(0);
    return graph_.add_tensor(std::move(g));
  }

  /// Folds a new partial gradient of `t` into the running sum (progressively,
  /// as autograd's accumulation does, so at most two partials are live).
  void deliver(index_t t, index_t partial, const std::vector<int>& split) {
    const auto i = to_size(t);
    ++grad_arrived_[i];
    if (grad_[i] == no_index) {
      grad_[i] = partial;
      return;
    }
    const tensor_info& fwd = graph_.tensor(t);
    const bool last = grad_arrived_[i] == grad_uses_[i];
    tensor_info s;
    s.name = last ? fwd.name + ".grad" : fwd.name + ".grad.sum" + std::to_string(grad_arrived_[i]);
    s.bytes = fwd.bytes;
    s.kind = last && fwd.kind == tensor_kind::parameter ? tensor_kind::parameter_gradient : tensor_kind::gradient;
    s.shape = fwd.shape;
    s.dtype = fwd.dtype;
    const std::string name = fwd.name + ".accumulate_grad" + std::to_string(grad_arrived_[i]);
    const auto n = static_cast<double>(numel(fwd.shape));
    requires_grad_.push_back(0);
    const index_t sum = graph_.add_tensor(std::move(s));  // invalidates `fwd`
    emit(name, "accumulate_grad", phase::backward, {grad_[i], partial}, {sum}, n, 0, math_mode::fp32, false, false,
         split);
    grad_[i] = sum;
  }

  void emit_backward(const layer& l) {
    std::vector<index_t> in;
    for (int k = 0; k < l.differentiable_outputs; ++k) {
      const index_t g = grad_[to_size(l.outputs[to_size(k)])];
      if (g != no_index) in.push_back(g);
    }
    in.insert(in.end(), l.saved.begin(), l.saved.end());
    std::vector<std::pair<index_t, index_t>> produced;  // (forward tensor, its new gradient)
    for (const index_t t : l.inputs) {
      if (requires_grad(t)) produced.emplace_back(t, new_grad(t));
    }
    for (const index_t t : l.params) produced.emplace_back(t, new_grad(t));
    std::vector<index_t> out;
    out.reserve(produced.size());
    for (const auto& p : produced) out.push_back(p.second);
    emit(l.name + ".backward", std::string(l.type) + "_backward", phase::backward, std::move(in), std::move(out),
         l.backward_flops, 0, l.math, l.gemm, false, l.split_dims);
    for (const auto& [t, g] : produced) deliver(t, g, l.split_dims);
  }

  void emit_updates() {
    const bool adam = opt_.opt == optimizer::adam;
    for (const index_t p : params_) {
      const index_t g = grad_[to_size(p)];
      if (g == no_index) continue;  // a parameter no loss depends on
      const tensor_info& w = graph_.tensor(p);
      const std::string wname = w.name;
      const shape_t shape = w.shape;
      std::vector<index_t> in{p, g};
      static constexpr std::array<const char*, 2> adam_state{".exp_avg", ".exp_avg_sq"};
      static constexpr std::array<const char*, 1> sgd_state{".momentum_buffer"};
      for (const char* state : adam ? std::span<const char* const>(adam_state) : std::span<const char* const>(sgd_state)) {
        in.push_back(add_tensor(wname + state, shape, element::activation, tensor_kind::optimizer_state));
      }
      const double n = static_cast<double>(numel(shape));
      // Writes the parameter and its state back in place: no new tensors.
      const double written = static_cast<double>(graph_.tensor(p).bytes) * static_cast<double>(in.size() - 1);
      emit(wname + ".update", adam ? "adam" : "sgd_momentum", phase::update, std::move(in), {},
           (adam ? 12.0 : 4.0) * n, written, math_mode::fp32, false, false, {0});
    }
  }

  options opt_;
  device_spec dev_;
  memplan::graph graph_;
  std::int64_t act_bytes_ = 4;
  const char* act_dtype_ = "float32";
  std::vector<layer> tape_;
  std::vector<std::uint8_t> requires_grad_;
  std::vector<index_t> params_;
  std::vector<index_t> grad_;
  std::vector<index_t> grad_uses_;
  std::vector<index_t> grad_arrived_;
  std::int64_t parameters_ = 0;
  std::int64_t task_head_parameters_ = 0;
  bool in_task_head_ = false;
  double forward_flops_ = 0;
  double forward_macs_ = 0;
};

}  // namespace memplan::model
