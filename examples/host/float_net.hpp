#pragma once
// A framework's side of memplan, in miniature: a training step of float
// matrices — a chain (MLP) or a residual network of matmul, relu and add,
// with loss gradient, backward and SGD update ops — built as a
// memplan::graph so that planners have something to plan, and the op
// callback the executor calls. `make_float_workload` also evaluates the
// step once in schedule order with no planning (`values`): the reference
// every planned run must match bit for bit (tests/test_executor.cpp) and
// the trainer (train.cpp) prints. Ops honour `parts` by computing their
// output rows in that many row blocks, and use their workspace as scratch,
// so a workspace overlapping a live tensor would corrupt results. A
// micro-op (op_call::part >= 0) computes the rows of its batch slice: it
// reads and writes the rows of its regions, wherever their pieces lie, and
// adds its share to a whole output (a weight gradient) that micro-op 0 made.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "memplan/compile.hpp"
#include "memplan/error.hpp"
#include "memplan/graph/graph.hpp"
#include "memplan/plan.hpp"
#include "memplan/problem.hpp"
#include "memplan/runtime/executor.hpp"

namespace memplan::example {

enum class float_op : std::uint8_t {
  matmul,         // out = in0 · in1                (B×D · D×D)
  matmul_grad_x,  // out = in0 · in1ᵀ               (gz · Wᵀ)
  matmul_grad_w,  // out = in0ᵀ · in1               (hᵀ · gz), D×D
  relu,           // out = max(in0, 0)
  relu_grad,      // out = in0 where in1 > 0, else 0
  add,            // out = in0 + in1
  loss_grad,      // out = in0 − in1                (h − target)
  sgd             // out = in0 − 0.01 · in1         (W − lr · gW)
};

struct float_workload {
  int batch = 8;
  int width = 32;
  graph g{"float-workload"};
  std::vector<float_op> kind;  ///< per graph op
  problem p;
  std::vector<std::vector<float>> values;  ///< per tensor: the reference values
  std::vector<index_t> weights;            ///< the parameters, layer by layer
  std::vector<index_t> updated;            ///< the new parameters the update ops write, layer by layer

  [[nodiscard]] int rows(index_t t) const {
    return static_cast<int>(p.bytes[static_cast<std::size_t>(t)] / (4 * width));
  }
};

namespace detail_workload {

inline index_t matrix(float_workload& w, std::string name, int rows, tensor_kind kind) {
  return w.g.add_tensor({.name = std::move(name),
                         .bytes = static_cast<bytes_t>(rows) * w.width * 4, .kind = kind,
                         .shape = {rows, w.width}, .dtype = "float32"});
}

inline index_t add_op(float_workload& w, std::string name, float_op k, std::vector<index_t> in, index_t out,
                      phase ph) {
  const bool matmul = k == float_op::matmul || k == float_op::matmul_grad_x || k == float_op::matmul_grad_w;
  w.kind.push_back(k);
  return w.g.add_op({.name = std::move(name),
                     .type = matmul ? "matmul" : "elementwise", .phase = ph, .time_us = matmul ? 100.0 : 10.0,
                     .workspace_bytes = matmul ? 512 : 0, .inputs = std::move(in), .outputs = {out},
                     .recomputable = ph == phase::forward, .split_dims = {0}});
}

/// A matrix as pointers to its rows (`width` floats each): a whole tensor,
/// or the rows of a region of one, wherever its pieces lie.
using rows = std::vector<float*>;

/// The reference op: rows [row_begin, row_end) of `out`, using `scratch`
/// (at least `width` floats, or none) for each row on its way. Row indices
/// are those of the tables: a micro-op passes its batch slice. `accumulate`:
/// add to what `out` holds (a later micro-op's share of a weight gradient),
/// continuing the reference's sum in the same order, so the result is the
/// same to the bit.
inline void compute(const float_workload& w, float_op k, std::span<const rows> in, const rows& out, int row_begin,
                    int row_end, bool accumulate, float* scratch, std::size_t scratch_floats) {
  const int d = w.width;
  const auto n = static_cast<std::size_t>(d);
  std::vector<float> row_buffer;
  float* row = scratch;
  if (scratch_floats < n) {
    row_buffer.resize(n);
    row = row_buffer.data();
  }
  const auto at = [](const rows& m, int r) { return m[static_cast<std::size_t>(r)]; };
  const int inner = k == float_op::matmul_grad_w ? static_cast<int>(in[0].size()) : d;
  for (int r = row_begin; r < row_end; ++r) {
    for (int c = 0; c < d; ++c) {
      float v = accumulate ? at(out, r)[c] : 0.0f;
      switch (k) {
        case float_op::matmul:
          for (int j = 0; j < inner; ++j) v += at(in[0], r)[j] * at(in[1], j)[c];
          break;
        case float_op::matmul_grad_x:
          for (int j = 0; j < inner; ++j) v += at(in[0], r)[j] * at(in[1], c)[j];
          break;
        case float_op::matmul_grad_w:
          for (int j = 0; j < inner; ++j) v += at(in[0], j)[r] * at(in[1], j)[c];
          break;
        case float_op::relu: v = std::max(at(in[0], r)[c], 0.0f); break;
        case float_op::relu_grad: v = at(in[1], r)[c] > 0 ? at(in[0], r)[c] : 0.0f; break;
        case float_op::add: v = at(in[0], r)[c] + at(in[1], r)[c]; break;
        case float_op::loss_grad: v = at(in[0], r)[c] - at(in[1], r)[c]; break;
        case float_op::sgd: v = at(in[0], r)[c] - 0.01f * at(in[1], r)[c]; break;
      }
      row[c] = v;
    }
    std::memcpy(at(out, r), row, n * sizeof(float));
  }
}

/// The rows of a contiguous matrix.
inline rows rows_of(const float_workload& w, float* data, int count) {
  rows out(static_cast<std::size_t>(count));
  for (int r = 0; r < count; ++r) out[static_cast<std::size_t>(r)] = data + static_cast<std::size_t>(r) * w.width;
  return out;
}

/// The rows of a region. Micro-tensors split the batch dimension, so a
/// region holds whole rows when `parts` divides the batch; otherwise a row
/// would straddle two micro-tensors and this op cannot run on it.
/// \throws invalid_argument if a row is cut.
inline rows rows_of(const float_workload& w, const runtime::region& region) {
  const bytes_t row_bytes = static_cast<bytes_t>(w.width) * 4;
  MEMPLAN_EXPECTS(region.offset % row_bytes == 0 && region.bytes % row_bytes == 0, invalid_argument,
                  "float op: bytes [", region.offset, ", ", region.offset + region.bytes, ") are not whole rows of ",
                  row_bytes, " bytes");
  rows out;
  for (const runtime::piece& piece : region.pieces) {
    MEMPLAN_EXPECTS(piece.bytes % row_bytes == 0, invalid_argument, "float op: a piece of ", piece.bytes,
                    " bytes cuts a row of ", row_bytes, " bytes");
    for (bytes_t b = 0; b < piece.bytes; b += row_bytes) out.push_back(static_cast<float*>(piece.address) + b / 4);
  }
  return out;
}

}  // namespace detail_workload

/// Builds the workload: `layers` blocks; `residual` adds the skip
/// connections. Schedule: forward, loss, backward in reverse, updates.
inline float_workload make_float_workload(int layers, bool residual, int batch = 8, int width = 32) {
  using namespace detail_workload;
  float_workload w;
  w.batch = batch;
  w.width = width;
  const index_t x = matrix(w, "x", batch, tensor_kind::input);
  const index_t target = matrix(w, "target", batch, tensor_kind::input);
  std::vector<index_t> weight, h{x}, r;
  for (int i = 1; i <= layers; ++i) {
    const std::string n = std::to_string(i);
    weight.push_back(matrix(w, "w" + n, width, tensor_kind::parameter));
    const index_t z = matrix(w, "z" + n, batch, tensor_kind::activation);
    add_op(w, "matmul" + n, float_op::matmul, {h.back(), weight.back()}, z, phase::forward);
    r.push_back(matrix(w, "r" + n, batch, tensor_kind::activation));
    add_op(w, "relu" + n, float_op::relu, {z}, r.back(), phase::forward);
    if (residual) {
      const index_t sum = matrix(w, "h" + n, batch, tensor_kind::activation);
      add_op(w, "add" + n, float_op::add, {h.back(), r.back()}, sum, phase::forward);
      h.push_back(sum);
    } else {
      h.push_back(r.back());
    }
  }
  index_t grad = matrix(w, "g_out", batch, tensor_kind::gradient);
  add_op(w, "loss", float_op::loss_grad, {h.back(), target}, grad, phase::backward);
  std::vector<index_t> weight_grad(static_cast<std::size_t>(layers));
  for (int i = layers; i >= 1; --i) {
    const std::string n = std::to_string(i);
    const auto li = static_cast<std::size_t>(i - 1);
    const index_t gz = matrix(w, "gz" + n, batch, tensor_kind::gradient);
    add_op(w, "relu_grad" + n, float_op::relu_grad, {grad, r[li]}, gz, phase::backward);
    weight_grad[li] = matrix(w, "gw" + n, width, tensor_kind::parameter_gradient);
    add_op(w, "matmul_grad_w" + n, float_op::matmul_grad_w, {h[li], gz}, weight_grad[li], phase::backward);
    const index_t gx = matrix(w, (residual ? "gzx" : "gh") + std::to_string(i - 1), batch, tensor_kind::gradient);
    add_op(w, "matmul_grad_x" + n, float_op::matmul_grad_x, {gz, weight[li]}, gx, phase::backward);
    if (residual) {
      const index_t sum = matrix(w, "gh" + std::to_string(i - 1), batch, tensor_kind::gradient);
      add_op(w, "add_grad" + n, float_op::add, {grad, gx}, sum, phase::backward);
      grad = sum;
    } else {
      grad = gx;
    }
  }
  for (int i = 1; i <= layers; ++i) {
    const auto li = static_cast<std::size_t>(i - 1);
    w.updated.push_back(matrix(w, "w" + std::to_string(i) + "_new", width, tensor_kind::parameter));
    add_op(w, "sgd" + std::to_string(i), float_op::sgd, {weight[li], weight_grad[li]}, w.updated.back(),
           phase::update);
  }
  w.weights = weight;
  schedule order(w.g.num_ops());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<index_t>(i);
  w.p = compile(w.g, order);

  // Inputs and parameters: a fixed pseudo-random pattern (no RNG state to share).
  w.values.resize(w.p.num_tensors());
  for (std::size_t t = 0; t < w.p.num_tensors(); ++t) {
    w.values[t].assign(static_cast<std::size_t>(w.p.bytes[t] / 4), 0.0f);
    if (w.p.producer[t] != no_index) continue;
    std::uint32_t state = 2654435761u * static_cast<std::uint32_t>(t + 1);
    for (float& v : w.values[t]) {
      state = state * 1664525u + 1013904223u;
      v = static_cast<float>(static_cast<int>(state >> 9) % 2001 - 1000) / 4000.0f;
    }
  }
  for (std::size_t s = 0; s < w.p.num_steps(); ++s) {
    std::vector<rows> in;
    for (const index_t t : w.p.inputs(static_cast<index_t>(s))) {
      in.push_back(rows_of(w, w.values[static_cast<std::size_t>(t)].data(), w.rows(t)));
    }
    const index_t out = w.p.outputs(static_cast<index_t>(s))[0];
    compute(w, w.kind[static_cast<std::size_t>(w.p.op[s])], in,
            rows_of(w, w.values[static_cast<std::size_t>(out)].data(), w.rows(out)), 0, w.rows(out), false, nullptr, 0);
  }
  return w;
}

/// Whether micro-op `call` adds its share to its output instead of making it:
/// a later micro-op's whole output (the weight gradient, summed over the batch).
inline bool accumulates(const float_workload& w, const runtime::op_call& call) {
  const index_t out = w.p.outputs(call.step)[0];
  return call.part > 0 && !splits_with_batch(w.p.kind[static_cast<std::size_t>(out)]);
}

/// Runs `call` of the workload on host-addressable buffers: a whole op's
/// output rows in `call.parts` blocks, or micro-op `call.part`'s rows, each
/// through the workspace.
inline void run_float_op(const float_workload& w, const runtime::op_call& call) {
  if (call.outputs[0] == nullptr) return;  // a recompute that finds it on the device
  std::vector<detail_workload::rows> in;
  for (const runtime::region& r : call.input_regions) in.push_back(detail_workload::rows_of(w, r));
  const detail_workload::rows out = detail_workload::rows_of(w, call.output_regions[0]);
  auto* scratch = static_cast<float*>(call.workspace);
  if (scratch != nullptr) std::memset(scratch, 0xAB, static_cast<std::size_t>(call.workspace_bytes));
  const int count = static_cast<int>(out.size());
  const int blocks = call.part == no_index ? static_cast<int>(call.parts) : 1;
  for (int block = 0; block < blocks; ++block) {
    detail_workload::compute(w, w.kind[static_cast<std::size_t>(call.op)], in, out, count * block / blocks,
                             count * (block + 1) / blocks, accumulates(w, call), scratch,
                             static_cast<std::size_t>(call.workspace_bytes) / sizeof(float));
  }
}

/// Whether the bytes at `address` are tensor t's reference values.
inline bool matches(const float_workload& w, index_t t, const void* address) {
  const auto& ref = w.values[static_cast<std::size_t>(t)];
  return std::memcmp(ref.data(), address, ref.size() * sizeof(float)) == 0;
}

/// Whether `region`'s pieces hold tensor t's reference bytes of that region.
inline bool matches(const float_workload& w, index_t t, const runtime::region& region) {
  const auto* ref = reinterpret_cast<const std::byte*>(w.values[static_cast<std::size_t>(t)].data()) + region.offset;
  bytes_t seen = 0;
  for (const runtime::piece& piece : region.pieces) {
    if (std::memcmp(ref + seen, piece.address, static_cast<std::size_t>(piece.bytes)) != 0) return false;
    seen += piece.bytes;
  }
  return seen == region.bytes;
}

}  // namespace memplan::example
