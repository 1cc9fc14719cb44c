#pragma once
/// \file
/// `memplan::problem`: a training graph compiled against a schedule into
/// flat arrays (struct of arrays), the input of every planner and of the
/// simulator. Steps are positions in the schedule; tensors keep the graph's
/// dense indices.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <ranges>
#include <span>
#include <string>
#include <vector>

#include "memplan/error.hpp"
#include "memplan/graph/schedule.hpp"
#include "memplan/graph/training_graph.hpp"
#include "memplan/graph/vocabulary.hpp"

namespace memplan {

/// A training graph compiled against a schedule (`compile`): per step and
/// per tensor, every number a planner or the simulator reads, in flat
/// vectors. Step s runs op `op[s]`; tensor t is the graph's tensor t.
struct problem {
  std::string name;  ///< the graph's name, where it has one
  /// Samples in the iteration: the largest leading dimension of the graph's
  /// `input` tensors whose shapes it knows (images, tokens, labels; inputs
  /// broadcast over the batch, as position ids, have 1); 0 when none is
  /// known. A split op's micro-batches cut it (plan.hpp), so an op is split
  /// into at most this many parts.
  std::int64_t batch = 0;

  // Per step s (schedule position).
  std::vector<index_t> op;            ///< dense graph op index run at step s
  std::vector<std::int64_t> op_id;    ///< the op's id in files
  std::vector<std::string> op_name;   ///< the op's name (op_name query)
  std::vector<std::string> op_type;   ///< the op's kernel ("conv2d", ...; op_type query)
  std::vector<phase> op_phase;        ///< forward, backward or update
  std::vector<double> time_us;        ///< compute time on the target device
  std::vector<bytes_t> workspace;     ///< scratch bytes, allocated for the op's duration
  std::vector<std::uint8_t> recomputable;  ///< 1 if the op may be run again (op_recomputable)
  /// 1 if the op communicates with other ranks (a collective or a send or
  /// receive: `is_communication` of its type), so it runs on the
  /// communication stream (plan.hpp); empty: no op does.
  std::vector<std::uint8_t> comm;
  std::vector<index_t> input_begin;   ///< CSR offsets into `input_tensors` (steps + 1)
  std::vector<index_t> input_tensors;   ///< per step, the tensors its op reads (`inputs(s)`)
  std::vector<index_t> output_begin;  ///< CSR offsets into `output_tensors` (steps + 1)
  std::vector<index_t> output_tensors;  ///< per step, the tensors its op writes (`outputs(s)`)
  std::vector<index_t> split_begin;   ///< CSR offsets into `split_dim_list` (steps + 1)
  std::vector<int> split_dim_list;      ///< per step, its op's split dimensions (`split_dims(s)`)

  // Per tensor t.
  std::vector<std::int64_t> tensor_id;  ///< the tensor's id in files
  std::vector<std::string> tensor_name;  ///< the tensor's name
  std::vector<bytes_t> bytes;            ///< its size, bytes
  std::vector<tensor_kind> kind;         ///< its kind, which decides whether it persists
  std::vector<index_t> producer;   ///< step writing t, or no_index
  std::vector<index_t> use_begin;  ///< CSR offsets into `use_steps` (tensors + 1)
  std::vector<index_t> use_steps;  ///< steps reading t, ascending, each once
  std::vector<index_t> last_use;   ///< last step reading t, or no_index
  /// The step after which the framework drops its last reference to t
  /// (tensor_info::released_after), or no_index; empty: none known.
  std::vector<index_t> release;

  /// How many steps (= ops).
  [[nodiscard]] std::size_t num_steps() const noexcept { return op.size(); }
  /// How many tensors.
  [[nodiscard]] std::size_t num_tensors() const noexcept { return bytes.size(); }
  /// The tensors step `s`'s op reads.
  [[nodiscard]] std::span<const index_t> inputs(index_t s) const { return csr(input_begin, input_tensors, s); }
  /// The tensors step `s`'s op writes.
  [[nodiscard]] std::span<const index_t> outputs(index_t s) const { return csr(output_begin, output_tensors, s); }
  /// The output dimensions along which step `s`'s op may be split (0: the batch).
  [[nodiscard]] std::span<const int> split_dims(index_t s) const { return csr(split_begin, split_dim_list, s); }
  /// The steps reading tensor `t`, ascending, each once.
  [[nodiscard]] std::span<const index_t> uses(index_t t) const { return csr(use_begin, use_steps, t); }
  /// Whether `t` is a parameter or optimizer state: live across iterations, never lost.
  [[nodiscard]] bool persistent(index_t t) const { return is_persistent(kind[static_cast<std::size_t>(t)]); }
  /// Step s's op communicates with other ranks (`comm`).
  [[nodiscard]] bool communicates(index_t s) const { return !comm.empty() && comm[static_cast<std::size_t>(s)] != 0; }

  /// First step at which t is live: its producer, or 0 (DESIGN.md §4).
  [[nodiscard]] index_t live_begin(index_t t) const {
    const index_t p = producer[static_cast<std::size_t>(t)];
    return p == no_index ? 0 : p;
  }
  /// Last step at which t is live: the end for persistent tensors, else its
  /// last use, else the step it is made.
  [[nodiscard]] index_t live_end(index_t t) const {
    if (persistent(t)) return static_cast<index_t>(num_steps()) - 1;
    const index_t u = last_use[static_cast<std::size_t>(t)];
    return u == no_index ? live_begin(t) : u;
  }

  /// Last step at which the framework running the graph still holds t: its
  /// release where the graph records one (a DTR log), else live_end. A
  /// planner running inside the framework (DTR) counts t's bytes until then
  /// unless it evicts t; the simulator frees t after its last reader.
  [[nodiscard]] index_t held_until(index_t t) const {
    const index_t r = release.empty() ? no_index : release[static_cast<std::size_t>(t)];
    return std::max(live_end(t), r);
  }

  /// Bytes live during each step, workspace included, with no planning.
  [[nodiscard]] std::vector<bytes_t> baseline_memory() const {
    std::vector<bytes_t> live;
    live_changes(live);
    bytes_t running = 0;
    for (std::size_t s = 0; s < num_steps(); ++s) {
      running += live[s];
      live[s] = running + workspace[s];
    }
    live.resize(num_steps());
    return live;
  }
  /// Peak device memory with no planning (DESIGN.md §4's liveness rule).
  [[nodiscard]] bytes_t baseline_peak() const {
    std::vector<bytes_t> scratch;
    return baseline_peak(scratch);
  }
  /// `baseline_peak()` with a buffer a caller reuses across calls (the simulator's).
  [[nodiscard]] bytes_t baseline_peak(std::vector<bytes_t>& scratch) const {
    live_changes(scratch);
    bytes_t running = 0;
    bytes_t peak = 0;
    for (std::size_t s = 0; s < num_steps(); ++s) {
      running += scratch[s];
      peak = std::max(peak, running + workspace[s]);
    }
    return peak;
  }
  /// The iteration time with no planning: the sum of op times, or, where
  /// ops communicate, when the last op ends with the communication ops on
  /// their own stream (plan.hpp): each op starts once the previous op of
  /// its stream and the makers of its inputs have ended.
  [[nodiscard]] double baseline_time_us() const {
    if (comm.empty()) {
      double sum = 0;
      for (const double t : time_us) sum += t;
      return sum;
    }
    std::vector<double> end(num_steps(), 0);
    double stream_end[2] = {0, 0};  // compute, communication
    for (std::size_t s = 0; s < num_steps(); ++s) {
      double& free_at = stream_end[comm[s]];
      double start = free_at;
      for (const index_t t : inputs(static_cast<index_t>(s))) {
        const index_t maker = producer[static_cast<std::size_t>(t)];
        if (maker != no_index) start = std::max(start, end[static_cast<std::size_t>(maker)]);
      }
      end[s] = free_at = start + time_us[s];
    }
    return std::max(stream_end[0], stream_end[1]);
  }

 private:
  /// Per step (one more at the end), the bytes that become live there less
  /// those freed after the step before.
  void live_changes(std::vector<bytes_t>& delta) const {
    delta.assign(num_steps() + 1, 0);
    if (num_steps() == 0) return;
    for (std::size_t t = 0; t < num_tensors(); ++t) {
      delta[static_cast<std::size_t>(live_begin(static_cast<index_t>(t)))] += bytes[t];
      delta[static_cast<std::size_t>(live_end(static_cast<index_t>(t))) + 1] -= bytes[t];
    }
  }
  template <class T>
  static std::span<const T> csr(const std::vector<index_t>& begin, const std::vector<T>& list, index_t i) {
    const auto b = static_cast<std::size_t>(begin[static_cast<std::size_t>(i)]);
    const auto e = static_cast<std::size_t>(begin[static_cast<std::size_t>(i) + 1]);
    return {list.data() + b, e - b};
  }
};

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
