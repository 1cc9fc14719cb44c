#pragma once
/// \file
/// Shrinking a failing graph: the smallest graph found by greedy deletion
/// for which a predicate still fails, as QuickCheck and Hypothesis shrink
/// a counterexample before showing it. Deletions are tried in chunks
/// (halves, quarters, ... single ops, as in delta debugging), then inputs
/// and outputs one by one, then sizes, times and workspaces are made trivial.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "memplan/graph/graph.hpp"

namespace memplan::testing {

namespace detail {

/// `g` without the ops in [first, last): the tensors they wrote become
/// inputs, and tensors no op mentions any more are dropped.
inline graph without_ops(const graph& g, std::size_t first, std::size_t last) {
  const std::size_t n = g.num_ops();
  std::vector<std::uint8_t> mentioned(g.num_tensors(), 0), made(g.num_tensors(), 0);
  for (std::size_t v = 0; v < n; ++v) {
    if (v >= first && v < last) continue;
    const op_info& o = g.op(static_cast<index_t>(v));
    for (const index_t t : o.inputs) mentioned[static_cast<std::size_t>(t)] = 1;
    for (const index_t t : o.outputs) mentioned[static_cast<std::size_t>(t)] = made[static_cast<std::size_t>(t)] = 1;
  }
  graph out(g.name());
  std::vector<index_t> renamed(g.num_tensors(), no_index);
  for (std::size_t t = 0; t < g.num_tensors(); ++t) {
    if (!mentioned[t]) continue;
    tensor_info info = g.tensor(static_cast<index_t>(t));
    if (!made[t] && g.producer(static_cast<index_t>(t)) != no_index) info.kind = tensor_kind::input;
    renamed[t] = out.add_tensor(std::move(info));
  }
  for (std::size_t v = 0; v < n; ++v) {
    if (v >= first && v < last) continue;
    op_info o = g.op(static_cast<index_t>(v));
    for (index_t& t : o.inputs) t = renamed[static_cast<std::size_t>(t)];
    for (index_t& t : o.outputs) t = renamed[static_cast<std::size_t>(t)];
    out.add_op(std::move(o));
  }
  return out;
}

/// `g` with `edit(ops, tensors)` applied to copies of its ops and tensors.
template <class Edit>
graph edited(const graph& g, Edit edit) {
  std::vector<op_info> ops;
  std::vector<tensor_info> tensors;
  for (std::size_t v = 0; v < g.num_ops(); ++v) ops.push_back(g.op(static_cast<index_t>(v)));
  for (std::size_t t = 0; t < g.num_tensors(); ++t) tensors.push_back(g.tensor(static_cast<index_t>(t)));
  edit(ops, tensors);
  graph out(g.name());
  for (auto& t : tensors) out.add_tensor(std::move(t));
  for (auto& o : ops) out.add_op(std::move(o));
  return out;
}

}  // namespace detail

/// Greedily shrinks `g` while `fails(candidate)` stays true.
/// \param g a graph for which `fails(g)` is true, ops in a topological order.
/// \param fails a predicate on graphs; it must not throw.
/// \param max_tries calls of `fails` after which the smallest graph so far is returned.
/// \returns a graph, no larger in ops, tensors, bytes, times or workspace,
///          for which `fails` is true.
template <class Predicate>
graph shrink(graph g, Predicate fails, int max_tries = 2000) {
  int tries = 0;
  const auto attempt = [&](graph candidate) {
    if (tries >= max_tries) return false;
    ++tries;
    if (!fails(candidate)) return false;
    g = std::move(candidate);
    return true;
  };
  for (bool progress = true; progress && tries < max_tries;) {
    progress = false;
    // Ops, in chunks from half the graph down to one op, last ops first
    // (the backward and updates go before the forward they depend on).
    for (std::size_t chunk = g.num_ops() / 2; chunk >= 1; chunk /= 2) {
      for (std::size_t end = g.num_ops(); end >= chunk && tries < max_tries;) {
        if (attempt(detail::without_ops(g, end - chunk, end))) {
          progress = true;
          end = std::min(end - chunk, g.num_ops());
        } else {
          --end;
          if (chunk > 1) end -= std::min(end, chunk - 1);
        }
      }
    }
    // One input at a time, then one output (which becomes a graph input).
    for (std::size_t v = 0; v < g.num_ops(); ++v) {
      for (std::size_t k = 0; k < g.op(static_cast<index_t>(v)).inputs.size() && tries < max_tries;) {
        if (attempt(detail::edited(g, [&](std::vector<op_info>& ops, std::vector<tensor_info>&) {
              ops[v].inputs.erase(ops[v].inputs.begin() + static_cast<std::ptrdiff_t>(k));
            }))) {
          progress = true;
        } else {
          ++k;
        }
      }
      for (std::size_t k = 0; k < g.op(static_cast<index_t>(v)).outputs.size() && tries < max_tries;) {
        if (attempt(detail::edited(g, [&](std::vector<op_info>& ops, std::vector<tensor_info>& ts) {
              const auto out = ops[v].outputs.begin() + static_cast<std::ptrdiff_t>(k);
              ts[static_cast<std::size_t>(*out)].kind = tensor_kind::input;
              ops[v].outputs.erase(out);
            }))) {
          progress = true;
        } else {
          ++k;
        }
      }
    }
    // Sizes to 0 or halved, times to 1 µs, workspace to 0.
    for (std::size_t t = 0; t < g.num_tensors(); ++t) {
      const bytes_t b = g.tensor(static_cast<index_t>(t)).bytes;
      for (const bytes_t smaller : {bytes_t{0}, b / 2}) {
        if (smaller < b && attempt(detail::edited(g, [&](std::vector<op_info>&, std::vector<tensor_info>& ts) {
              ts[t].bytes = smaller;
            }))) {
          progress = true;
          break;
        }
      }
    }
    for (std::size_t v = 0; v < g.num_ops(); ++v) {
      const op_info& o = g.op(static_cast<index_t>(v));
      if (o.time_us != 1 && attempt(detail::edited(g, [&](std::vector<op_info>& ops, std::vector<tensor_info>&) {
            ops[v].time_us = 1;
          }))) {
        progress = true;
      }
      if (g.op(static_cast<index_t>(v)).workspace_bytes != 0 &&
          attempt(detail::edited(g, [&](std::vector<op_info>& ops, std::vector<tensor_info>&) {
            ops[v].workspace_bytes = 0;
          }))) {
        progress = true;
      }
    }
  }
  return g;
}

}  // namespace memplan::testing
