#pragma once
// The framework side of an op call: `run_layer` turns the executor's
// op_call into kernel calls of a kernel set (host_kernels.hpp states the
// contract). Per-sample ops run sample by sample over the call's samples
// — the whole batch, or micro-op k's slice (TSPLIT §V-A) — so that a
// micro-batched op computes exactly what the whole op does. A region may
// lie in several pieces (micro-tensors made apart, TSPLIT Fig. 10): each
// sample is found in the piece that holds it.

#include <cstddef>
#include <span>

#include "memplan/error.hpp"
#include "memplan/plan.hpp"
#include "memplan/runtime/executor.hpp"
#include "network.hpp"

namespace memplan::trainers {

namespace detail {

/// Sample `s` of a region whose samples are `sample_bytes` long.
/// \throws invalid_argument if a piece boundary cuts the sample (a micro-batch
///         count that does not divide the batch).
inline float* sample_at(const runtime::region& r, bytes_t sample_bytes, int s) {
  bytes_t offset = static_cast<bytes_t>(s) * sample_bytes;
  for (const runtime::piece& piece : r.pieces) {
    if (offset < piece.bytes) {
      MEMPLAN_EXPECTS(offset + sample_bytes <= piece.bytes, invalid_argument, "trainer: a micro-tensor of ", piece.bytes,
                      " bytes cuts a sample of ", sample_bytes, " bytes (the micro-batch count must divide the batch)");
      return reinterpret_cast<float*>(static_cast<std::byte*>(piece.address) + offset);
    }
    offset -= piece.bytes;
  }
  throw invalid_argument(memplan::detail::concat("trainer: sample ", s, " lies outside its region of ", r.bytes,
                                                 " bytes"));
}

/// The tensors of one call, by position, per sample.
class call_tensors {
 public:
  call_tensors(const network& n, const runtime::op_call& call)
      : n_(&n), call_(&call), inputs_(n.p.inputs(call.step)), outputs_(n.p.outputs(call.step)) {}

  /// Samples in this call: those of its first input, which carries samples.
  [[nodiscard]] int samples() const { return static_cast<int>(call_->input_regions[0].bytes / sample_bytes(inputs_[0])); }

  [[nodiscard]] const float* in(std::size_t i, int s = 0) const {
    return locate(inputs_[i], call_->input_regions[i], call_->inputs[i], s);
  }
  [[nodiscard]] float* out(std::size_t i, int s = 0) const {
    return call_->outputs[i] == nullptr ? nullptr : locate(outputs_[i], call_->output_regions[i], call_->outputs[i], s);
  }

 private:
  [[nodiscard]] bytes_t sample_bytes(index_t t) const {
    return n_->p.bytes[static_cast<std::size_t>(t)] / n_->batch;
  }
  /// A tensor that carries samples: sample s of its region; another (a
  /// parameter, its gradient, batch norm's statistics): the whole tensor.
  [[nodiscard]] float* locate(index_t t, const runtime::region& r, void* whole, int s) const {
    if (!splits_with_batch(n_->p.kind[static_cast<std::size_t>(t)])) return static_cast<float*>(whole);
    return sample_at(r, sample_bytes(t), s);
  }

  const network* n_;
  const runtime::op_call* call_;
  std::span<const index_t> inputs_, outputs_;
};

}  // namespace detail

/// Runs `call` with kernel set `k` (already bound to the call's stream).
/// A recompute that finds its output on the device (null) does nothing.
template <class Kernels>
void run_layer(const network& n, Kernels& k, const runtime::op_call& call) {
  const layer_call& lc = n.calls[static_cast<std::size_t>(call.op)];
  const dims& d = lc.d;
  const detail::call_tensors t(n, call);
  if (t.out(0) == nullptr) return;
  void* ws = call.workspace;
  const bool later_part = call.part > 0;  // a later micro-op adds to the weight gradient micro-op 0 made
  const auto per_sample = [&](auto&& f) {
    for (int s = 0, count = t.samples(); s < count; ++s) f(s);
  };
  switch (lc.kind) {
    case layer_op::conv: per_sample([&](int s) { k.conv_forward(d, t.in(0, s), t.in(1), t.out(0, s), ws); }); break;
    case layer_op::conv_grad_x:
      per_sample([&](int s) { k.conv_backward_data(d, t.in(0, s), t.in(1), t.out(0, s), ws); });
      break;
    case layer_op::conv_grad_w:
      per_sample([&](int s) { k.conv_backward_filter(d, t.in(0, s), t.in(1, s), t.out(0), later_part || s > 0, ws); });
      break;
    case layer_op::maxpool: per_sample([&](int s) { k.maxpool_forward(d, t.in(0, s), t.out(0, s)); }); break;
    case layer_op::maxpool_grad:
      per_sample([&](int s) { k.maxpool_backward(d, t.in(0, s), t.in(1, s), t.in(2, s), t.out(0, s)); });
      break;
    case layer_op::linear: per_sample([&](int s) { k.linear_forward(d, t.in(0, s), t.in(1), t.out(0, s)); }); break;
    case layer_op::linear_grad_x:
      per_sample([&](int s) { k.linear_backward_data(d, t.in(0, s), t.in(1), t.out(0, s)); });
      break;
    case layer_op::linear_grad_w:
      per_sample([&](int s) { k.linear_backward_weights(d, t.in(0, s), t.in(1, s), t.out(0), later_part || s > 0); });
      break;
    case layer_op::loss:
      per_sample([&](int s) { k.loss(d, t.in(0, s), t.in(1, s), t.out(0, s), t.out(1, s), ws); });
      break;
    case layer_op::relu:
      per_sample([&](int s) { k.relu_forward(d.in_elements(), t.in(0, s), t.out(0, s)); });
      break;
    case layer_op::relu_grad:
      per_sample([&](int s) { k.relu_backward(d.in_elements(), t.in(0, s), t.in(1, s), t.out(0, s)); });
      break;
    case layer_op::batchnorm: k.batchnorm_forward(d, t.in(0), t.in(1), t.out(0), ws); break;
    case layer_op::batchnorm_grad: k.batchnorm_backward(d, t.in(0), t.in(1), t.in(2), t.out(0), t.out(1)); break;
    case layer_op::sgd: k.sgd(static_cast<std::size_t>(d.c_in), d.lr, t.in(0), t.in(1), t.out(0)); break;
  }
}

}  // namespace memplan::trainers
