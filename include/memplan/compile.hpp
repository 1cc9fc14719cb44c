#pragma once
/// \file
/// `memplan::compile`: flattens a training graph (any model of
/// `training_graph`, graph/training_graph.hpp) against a schedule into a
/// `problem` (problem.hpp). The one header of the core that needs Boost's
/// graph_traits: problem.hpp, plan.hpp, the simulator and the validator
/// read only the flat arrays.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <ranges>
#include <string>
#include <type_traits>
#include <vector>

#include "memplan/error.hpp"
#include "memplan/graph/graph.hpp"
#include "memplan/graph/schedule.hpp"
#include "memplan/graph/training_graph.hpp"
#include "memplan/graph/vocabulary.hpp"
#include "memplan/problem.hpp"

namespace memplan {

namespace detail {

/// An input tensor of `shape` (outermost first; empty: unknown) shows the batch.
template <class Shape>
void note_batch(problem& p, tensor_kind kind, const Shape& shape) {
  if (kind != tensor_kind::input || std::ranges::empty(shape)) return;
  p.batch = std::max(p.batch, static_cast<std::int64_t>(*std::ranges::begin(shape)));
}

/// compile's first phase: every tensor's id, name, bytes and kind.
/// \returns the bytes of all tensors together.
template <training_graph G>
bytes_t compile_tensors(const G& g, problem& p) {
  const std::size_t tensor_count = num_tensors(g);
  p.tensor_id.resize(tensor_count);
  p.tensor_name.resize(tensor_count);
  p.bytes.resize(tensor_count);
  p.kind.resize(tensor_count);
  p.producer.assign(tensor_count, no_index);
  p.last_use.assign(tensor_count, no_index);
  bytes_t total = 0;
  for (const auto& t : tensors(g)) {
    const std::size_t i = tensor_index(g, t);
    MEMPLAN_EXPECTS(i < tensor_count, invalid_graph, "tensor '", std::string(tensor_name(g, t)), "': tensor_index ",
                    i, " is outside [0, ", tensor_count, ")");
    if constexpr (std::is_same_v<G, graph>) {
      p.tensor_id[i] = g.tensor(t).id;
    } else {
      p.tensor_id[i] = static_cast<std::int64_t>(i);
    }
    p.tensor_name[i] = tensor_name(g, t);
    p.bytes[i] = tensor_bytes(g, t);
    p.kind[i] = tensor_kind_of(g, t);
    note_batch(p, p.kind[i], tensor_shape(g, t));
    MEMPLAN_EXPECTS(p.bytes[i] >= 0, invalid_graph, "tensor '", p.tensor_name[i], "': bytes must be non-negative, got ",
                    p.bytes[i]);
    MEMPLAN_EXPECTS(!__builtin_add_overflow(total, p.bytes[i], &total), invalid_graph,
                    "tensor '", p.tensor_name[i], "': the graph's bytes add up to more than 2^63 - 1");
  }
  return total;
}

/// The attributes of op `v` (graph index `i`), placed at step s.
template <training_graph G>
void compile_op(const G& g, op_descriptor_t<G> v, index_t i, std::size_t s, problem& p) {
  p.op[s] = i;
  if constexpr (std::is_same_v<G, graph>) {
    p.op_id[s] = g.op(i).id;
  } else {
    p.op_id[s] = i;
  }
  p.op_type[s] = op_type(g, v);
  p.op_phase[s] = op_phase(g, v);
  p.time_us[s] = static_cast<double>(op_time_us(g, v));
  p.workspace[s] = op_workspace_bytes(g, v);
  p.recomputable[s] = op_recomputable(g, v) ? 1 : 0;
  if (is_communication(p.op_type[s])) {
    if (p.comm.empty()) p.comm.assign(p.num_steps(), 0);
    p.comm[s] = 1;
  }
  MEMPLAN_EXPECTS(p.time_us[s] >= 0 && std::isfinite(p.time_us[s]), invalid_graph, "op '", p.op_name[s],
                  "': time_us must be a finite non-negative number, got ", p.time_us[s]);
  MEMPLAN_EXPECTS(p.workspace[s] >= 0, invalid_graph, "op '", p.op_name[s],
                  "': workspace_bytes must be non-negative, got ", p.workspace[s]);
}

/// The inputs, outputs and split dims of op `v` at step s, appended to the
/// CSR lists; `last_reader` and `use_count` (per tensor) count the steps
/// that read each tensor.
template <training_graph G>
void compile_op_tensors(const G& g, op_descriptor_t<G> v, std::size_t s, problem& p,
                        std::vector<index_t>& last_reader, std::vector<index_t>& use_count) {
  p.input_begin.push_back(static_cast<index_t>(p.input_tensors.size()));
  for (const auto& t : op_inputs(g, v)) {
    const auto ti = static_cast<index_t>(tensor_index(g, t));
    p.input_tensors.push_back(ti);
    // A tensor read twice by one op is one use.
    if (last_reader[static_cast<std::size_t>(ti)] != static_cast<index_t>(s)) {
      last_reader[static_cast<std::size_t>(ti)] = static_cast<index_t>(s);
      ++use_count[static_cast<std::size_t>(ti)];
    }
  }
  p.output_begin.push_back(static_cast<index_t>(p.output_tensors.size()));
  for (const auto& t : op_outputs(g, v)) {
    const auto ti = static_cast<index_t>(tensor_index(g, t));
    MEMPLAN_EXPECTS(p.producer[static_cast<std::size_t>(ti)] == no_index, invalid_graph, "tensor '",
                    p.tensor_name[static_cast<std::size_t>(ti)], "' has two producers: op '",
                    p.op_name[static_cast<std::size_t>(p.producer[static_cast<std::size_t>(ti)])], "' and op '",
                    p.op_name[s], "'");
    p.producer[static_cast<std::size_t>(ti)] = static_cast<index_t>(s);
    p.output_tensors.push_back(ti);
  }
  p.split_begin.push_back(static_cast<index_t>(p.split_dim_list.size()));
  for (const auto d : op_split_dims(g, v)) p.split_dim_list.push_back(static_cast<int>(d));
}

/// compile's second phase: the ops in `order`, each listed once.
/// \returns per tensor, the number of steps that read it.
template <training_graph G>
std::vector<index_t> compile_ops(const G& g, const schedule& order, const std::vector<op_descriptor_t<G>>& by_index,
                                 problem& p) {
  const std::size_t n = by_index.size();
  p.op.resize(n);
  p.op_id.resize(n);
  p.op_name.resize(n);
  p.op_type.resize(n);
  p.op_phase.resize(n);
  p.time_us.resize(n);
  p.workspace.resize(n);
  p.recomputable.resize(n);
  p.input_begin.reserve(n + 1);
  p.output_begin.reserve(n + 1);
  p.split_begin.reserve(n + 1);
  std::vector<std::uint8_t> placed(n, 0);
  std::vector<index_t> use_count(p.num_tensors(), 0);
  std::vector<index_t> last_reader(p.num_tensors(), no_index);
  double total_time_us = 0;  // every plan's time is at least this sum: it must stay finite
  for (std::size_t s = 0; s < n; ++s) {
    const index_t i = order[s];
    MEMPLAN_EXPECTS(i >= 0 && static_cast<std::size_t>(i) < n, invalid_graph, "schedule[", s, "]: op index ", i,
                    " is outside [0, ", n, ")");
    const auto v = by_index[static_cast<std::size_t>(i)];
    p.op_name[s] = op_name(g, v);
    MEMPLAN_EXPECTS(!placed[static_cast<std::size_t>(i)], invalid_graph, "schedule[", s, "]: op '", p.op_name[s],
                    "' is listed twice");
    placed[static_cast<std::size_t>(i)] = 1;
    compile_op(g, v, i, s, p);
    MEMPLAN_EXPECTS(std::isfinite(total_time_us + p.time_us[s]), invalid_graph, "op '", p.op_name[s], "' at step ", s,
                    ": time_us ", p.time_us[s], " makes the sum of op times infinite (", total_time_us,
                    " us before it)");
    total_time_us += p.time_us[s];
    compile_op_tensors(g, v, s, p, last_reader, use_count);
  }
  p.input_begin.push_back(static_cast<index_t>(p.input_tensors.size()));
  p.output_begin.push_back(static_cast<index_t>(p.output_tensors.size()));
  p.split_begin.push_back(static_cast<index_t>(p.split_dim_list.size()));
  return use_count;
}

/// The steps after which the framework drops each tensor (compile, for
/// memplan's graph, where any tensor records one).
inline void compile_release(const graph& g, const schedule& order, problem& p) {
  std::vector<index_t> step_of(order.size(), no_index);
  for (std::size_t s = 0; s < order.size(); ++s) step_of[static_cast<std::size_t>(order[s])] = static_cast<index_t>(s);
  for (std::size_t t = 0; t < p.num_tensors(); ++t) {
    const index_t after = g.tensor(static_cast<index_t>(t)).released_after;
    if (after == no_index) continue;
    MEMPLAN_EXPECTS(after >= 0 && static_cast<std::size_t>(after) < order.size(), invalid_graph, "tensor '",
                    p.tensor_name[t], "': released_after names op index ", after, ", which the graph does not have");
    if (p.release.empty()) p.release.assign(p.num_tensors(), no_index);
    p.release[t] = step_of[static_cast<std::size_t>(after)];
  }
}

/// compile's last phase: the uses of every tensor, in step order (CSR);
/// every read must come after the tensor is made.
inline void compile_uses(problem& p, const std::vector<index_t>& use_count) {
  const std::size_t tensor_count = p.num_tensors();
  p.use_begin.assign(tensor_count + 1, 0);
  for (std::size_t t = 0; t < tensor_count; ++t) p.use_begin[t + 1] = p.use_begin[t] + use_count[t];
  p.use_steps.resize(static_cast<std::size_t>(p.use_begin[tensor_count]));
  std::vector<index_t> fill(p.use_begin.begin(), p.use_begin.end() - 1);
  for (std::size_t s = 0; s < p.num_steps(); ++s) {
    for (const index_t t : p.inputs(static_cast<index_t>(s))) {
      const auto ti = static_cast<std::size_t>(t);
      const index_t made = p.producer[ti];
      MEMPLAN_EXPECTS(made < static_cast<index_t>(s), invalid_graph, "schedule: op '", p.op_name[s],
                      "' at position ", s, " reads tensor '", p.tensor_name[ti], "' before op '",
                      p.op_name[static_cast<std::size_t>(made)], "' at position ", made,
                      " produces it: the order is not topological");
      if (p.last_use[ti] != static_cast<index_t>(s)) {
        p.use_steps[static_cast<std::size_t>(fill[ti]++)] = static_cast<index_t>(s);
        p.last_use[ti] = static_cast<index_t>(s);
      }
    }
  }
}

}  // namespace detail

/// Compiles `g` against `order` in time linear in ops + uses.
/// \param g any `training_graph` (memplan::graph, or an adapted one).
/// \param order every op index exactly once, each op after the producers of
///        its inputs (any of the builders in schedule.hpp, or a recorded order).
/// \throws invalid_graph if the order is not a topological permutation, a
///         tensor has two producers, an op time is negative or not finite,
///         the op times add up to infinity, or the byte total overflows 63 bits.
template <training_graph G>
problem compile(const G& g, const schedule& order) {
  const auto by_index = detail::descriptors_by_index(g);
  const std::size_t n = by_index.size();
  MEMPLAN_EXPECTS(order.size() == n, invalid_graph, "schedule: lists ", order.size(), " ops, but the graph has ", n);
  problem p;
  if constexpr (requires { g.name(); }) p.name = g.name();
  bytes_t total = detail::compile_tensors(g, p);
  const std::vector<index_t> use_count = detail::compile_ops(g, order, by_index, p);
  bytes_t max_workspace = 0;
  for (const bytes_t w : p.workspace) max_workspace = std::max(max_workspace, w);
  MEMPLAN_EXPECTS(!__builtin_add_overflow(total, max_workspace, &total), invalid_graph,
                  "the graph's bytes and workspace add up to more than 2^63 - 1");
  detail::compile_uses(p, use_count);
  if constexpr (std::is_same_v<G, graph>) detail::compile_release(g, order, p);
  return p;
}

/// Compiles `g` in TSPLIT's DFS order (Algo 1).
template <training_graph G>
problem compile(const G& g) {
  return compile(g, dfs_schedule(g));
}

}  // namespace memplan
