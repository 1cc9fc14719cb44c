#pragma once
/// \file
/// `memplan::problem`: a training graph compiled against a schedule into
/// flat arrays (struct of arrays), the input of every planner and of the
/// simulator. Steps are positions in the schedule; tensors keep the graph's
/// dense indices.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "memplan/fwd.hpp"
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

}  // namespace memplan
