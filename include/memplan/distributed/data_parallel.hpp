#pragma once
/// \file
/// One rank's iteration under data parallelism, as an ordinary graph
/// (DESIGN.md §7a): the single-GPU graph of the rank's micro-batch with the
/// communication PyTorch's DDP or ZeRO (stages 1-3, as DeepSpeed and FSDP
/// shard) adds, as ops of `communication_types` that run on the
/// communication stream. Every planner plans it unchanged.
///
/// - DDP: parameter gradients fill buckets in the order backward makes them
///   (DDP rebuilds its buckets in that order after the first iteration),
///   up to `bucket_cap` bytes (`bucket_cap_mb`, 25 MiB; the first bucket
///   1 MiB, `first_bucket_bytes_cap`); a bucket is all-reduced as soon as
///   its last gradient exists, into the bucket's own buffer (DDP copies the
///   gradients in, `gradient_as_bucket_view=False`). Backward ends with
///   DDP's `finalize_backward` op: on the compute stream, it waits for
///   every all-reduce and reads every reduced bucket, as DDP waits for them
///   and copies them back into the gradients before `backward()` returns;
///   the updates then read the buckets.
/// - ZeRO-1: optimizer state sharded over the ranks: each rank updates its
///   1/n of the parameters (1/n of the update time and the state), then the
///   updated parameters are all-gathered.
/// - ZeRO-2: gradients sharded too: buckets are reduce-scattered into the
///   rank's 1/n shard.
/// - ZeRO-3: parameters sharded too: each parameter is all-gathered before
///   its first forward use and again before its first backward use, and
///   freed after its phase's last use (transient tensors); a gather is
///   issued two parameter-reading ops ahead of its reader (a zero-byte
///   token orders it: ZeRO-3's prefetch of the next module); nothing is
///   gathered after the update.
///
/// The rank's ops are listed in the order they run: the single-GPU schedule
/// with each collective right after what it needs, and the update-phase
/// ops last (the optimizer steps after backward, as `optimizer.step()`).
/// Compile the result in array order (`listed_order`).

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "memplan/cost/cluster.hpp"
#include "memplan/error.hpp"
#include "memplan/graph/graph.hpp"
#include "memplan/graph/schedule.hpp"

namespace memplan::distributed {

/// What is sharded over the data-parallel ranks.
enum class data_parallel : std::uint8_t { ddp, zero1, zero2, zero3 };
/// Modes as the CLI spells them.
inline constexpr std::array<std::string_view, 4> data_parallel_names{"ddp", "zero1", "zero2", "zero3"};

/// The mode spelled `name`, or nothing.
[[nodiscard]] constexpr std::optional<data_parallel> parse_data_parallel(std::string_view name) noexcept {
  for (std::size_t i = 0; i < data_parallel_names.size(); ++i) {
    if (data_parallel_names[i] == name) return static_cast<data_parallel>(i);
  }
  return std::nullopt;
}

/// A data-parallel configuration.
struct data_parallel_options {
  data_parallel mode = data_parallel::ddp;  ///< what is sharded
  rank_group group;                        ///< the ranks and their cluster
  bytes_t bucket_cap = bytes_t{25} << 20;  ///< DDP's bucket_cap_mb
  bytes_t first_bucket_cap = bytes_t{1} << 20;  ///< DDP's first_bucket_bytes_cap
};

/// The schedule of a graph whose ops are listed in the order they run.
[[nodiscard]] inline schedule listed_order(const graph& g) {
  schedule order(g.num_ops());
  std::iota(order.begin(), order.end(), index_t{0});
  return order;
}

namespace detail {

/// A tensor the rank adds (a bucket, a gathered parameter, a token).
[[nodiscard]] inline tensor_info added_tensor(std::string name, bytes_t bytes, tensor_kind kind) {
  return {.id = auto_id, .name = std::move(name), .bytes = bytes, .kind = kind, .shape = {}, .dtype = {},
          .released_after = no_index};
}

/// An op that communicates (`communication_types`), taking `time_us`.
[[nodiscard]] inline op_info communication_op(std::string name, std::string type, phase ph, double time_us,
                                              std::vector<index_t> in, std::vector<index_t> out, bool recomputable) {
  return {.id = auto_id, .name = std::move(name), .type = std::move(type), .phase = ph, .time_us = time_us,
          .workspace_bytes = 0, .inputs = std::move(in), .outputs = std::move(out), .recomputable = recomputable,
          .split_dims = {}};
}

/// ceil(bytes / n): one rank's shard.
[[nodiscard]] constexpr bytes_t shard_bytes(bytes_t bytes, int n) noexcept { return (bytes + n - 1) / n; }

/// Builds one rank's graph from the single-GPU graph `g` run in `order`.
class data_parallel_builder {
 public:
  data_parallel_builder(const graph& g, const schedule& order, const data_parallel_options& o)
      : g_(&g), order_(&order), o_(&o), n_(o.group.ranks), step_of_(g.num_ops(), no_index) {
    MEMPLAN_EXPECTS(o.group.cluster != nullptr && o.group.ranks >= 1, invalid_argument,
                    "data parallel: the group needs a cluster and at least 1 rank, got ", o.group.ranks, " ranks");
    MEMPLAN_EXPECTS(order.size() == g.num_ops(), invalid_graph, "data parallel: the schedule lists ", order.size(),
                    " ops, but the graph has ", g.num_ops());
    MEMPLAN_EXPECTS(o.bucket_cap > 0 && o.first_bucket_cap > 0, invalid_argument,
                    "data parallel: bucket caps must be positive, got ", o.first_bucket_cap, " and ", o.bucket_cap);
    for (std::size_t s = 0; s < order.size(); ++s) step_of_[static_cast<std::size_t>(order[s])] = static_cast<index_t>(s);
  }

  graph build() && {
    out_.set_name(memplan::detail::concat(g_->name(), "-", data_parallel_names[static_cast<std::size_t>(o_->mode)], "-r",
                                 n_, "-", o_->group.cluster->name));
    copy_tensors();
    fill_buckets();
    if (o_->mode == data_parallel::zero3) plan_gathers();
    std::vector<index_t> updates;
    for (const index_t v : *order_) {
      if (g_->op(v).phase == phase::update) {
        updates.push_back(v);
        continue;
      }
      emit_gathers_before(v);
      emit(v);
      emit_reductions_after(v);
    }
    if (!sharded_gradients()) finalize_backward();
    for (const index_t v : updates) emit(v);
    if (o_->mode == data_parallel::zero1 || o_->mode == data_parallel::zero2) gather_updated_parameters();
    return std::move(out_);
  }

 private:
  struct bucket {
    std::vector<index_t> gradients;
    bytes_t bytes = 0;
    index_t reduced = no_index;  ///< the tensor the collective makes
  };
  /// A ZeRO-3 gather of parameter `param` before op `reader` in one phase.
  struct gather {
    index_t param;
    index_t full = no_index;   ///< the gathered tensor
    index_t token = no_index;  ///< the zero-byte tensor it waits for (prefetch), or no_index
  };

  [[nodiscard]] std::size_t at(index_t i) const { return static_cast<std::size_t>(i); }
  [[nodiscard]] bool sharded_state() const { return o_->mode != data_parallel::ddp; }
  [[nodiscard]] bool sharded_gradients() const {
    return o_->mode == data_parallel::zero2 || o_->mode == data_parallel::zero3;
  }

  void copy_tensors() {
    for (std::size_t t = 0; t < g_->num_tensors(); ++t) {
      tensor_info info = g_->tensor(static_cast<index_t>(t));
      info.released_after = no_index;
      const bool shard = (info.kind == tensor_kind::optimizer_state && sharded_state()) ||
                         (info.kind == tensor_kind::parameter && o_->mode == data_parallel::zero3);
      if (shard) {
        info.bytes = shard_bytes(info.bytes, n_);
        info.shape.clear();
      }
      out_.add_tensor(std::move(info));
    }
    replace_.assign(g_->num_tensors(), no_index);
  }

  /// DDP's buckets, in the order backward makes the parameter gradients.
  void fill_buckets() {
    std::vector<index_t> grads;
    for (std::size_t t = 0; t < g_->num_tensors(); ++t) {
      const auto ti = static_cast<index_t>(t);
      if (g_->tensor(ti).kind == tensor_kind::parameter_gradient && g_->producer(ti) != no_index) grads.push_back(ti);
    }
    std::ranges::stable_sort(grads, {}, [&](index_t t) { return step_of_[at(g_->producer(t))]; });
    for (const index_t t : grads) {
      const bytes_t cap = buckets_.size() == 1 ? o_->first_bucket_cap : o_->bucket_cap;
      if (buckets_.empty() || (buckets_.back().bytes > 0 && buckets_.back().bytes + g_->tensor(t).bytes > cap)) {
        buckets_.emplace_back();
      }
      buckets_.back().gradients.push_back(t);
      buckets_.back().bytes += g_->tensor(t).bytes;
    }
    closes_after_.assign(g_->num_ops(), {});
    for (std::size_t b = 0; b < buckets_.size(); ++b) {
      index_t last = no_index;
      for (const index_t t : buckets_[b].gradients) {
        const index_t v = g_->producer(t);
        if (last == no_index || step_of_[at(v)] > step_of_[at(last)]) last = v;
      }
      closes_after_[at(last)].push_back(static_cast<index_t>(b));
    }
  }

  /// After op v: the collectives of the buckets whose last gradient v makes.
  void emit_reductions_after(index_t v) {
    for (const index_t b : closes_after_[at(v)]) {
      bucket& k = buckets_[at(b)];
      const bool scatter = sharded_gradients();
      k.reduced = out_.add_tensor(added_tensor(memplan::detail::concat("bucket", b, scatter ? ".shard" : ".reduced"),
                                               scatter ? shard_bytes(k.bytes, n_) : k.bytes,
                                               tensor_kind::parameter_gradient));
      for (const index_t t : k.gradients) replace_[at(t)] = k.reduced;
      const collective c = scatter ? collective::reduce_scatter : collective::all_reduce;
      add_comm(memplan::detail::concat(scatter ? "reduce_scatter.bucket" : "all_reduce.bucket", b),
               scatter ? "reduce_scatter" : "all_reduce", phase::backward, c, k.bytes, k.gradients, {k.reduced}, false);
    }
  }

  /// DDP's end of backward: every bucket's all-reduce waited for and its
  /// values copied back into the gradients (a read and a write of each
  /// bucket's bytes at the GPU's memory bandwidth, a kernel per bucket).
  void finalize_backward() {
    if (buckets_.empty()) return;
    const device_spec gpu = o_->group.rank_device();
    op_info op{.id = auto_id, .name = "finalize_backward", .type = "finalize_backward", .phase = phase::backward,
               .time_us = 0, .workspace_bytes = 0, .inputs = {}, .outputs = {}, .recomputable = false,
               .split_dims = {}};
    for (const bucket& k : buckets_) {
      op.inputs.push_back(k.reduced);
      op.time_us += gpu.launch_overhead_us + 2 * static_cast<double>(k.bytes) / (gpu.memory_bandwidth_gb_s * 1e3);
    }
    out_.add_op(std::move(op));
  }

  /// ZeRO-3: which parameters each op reads first in its phase, and the
  /// prefetch token each gather waits for.
  void plan_gathers() {
    gathers_before_.assign(g_->num_ops(), {});
    token_of_.assign(g_->num_ops(), no_index);
    for (const phase ph : {phase::forward, phase::backward}) {
      std::vector<index_t> readers;  // ops of this phase that read a parameter, in schedule order
      std::vector<index_t> gathered(g_->num_tensors(), no_index);
      for (const index_t v : *order_) {
        const op_info& op = g_->op(v);
        if (op.phase != ph) continue;
        bool reads = false;
        for (const index_t t : op.inputs) {
          if (g_->tensor(t).kind != tensor_kind::parameter) continue;
          reads = true;
          if (gathered[at(t)] != no_index) continue;
          gathered[at(t)] = v;
          gathers_before_[at(v)].push_back({t});
        }
        if (!reads) continue;
        readers.push_back(v);
        if (readers.size() >= 3) {
          const index_t ahead = readers[readers.size() - 3];
          for (gather& x : gathers_before_[at(v)]) x.token = token(ahead);
        }
      }
    }
  }
  /// The zero-byte tensor op v makes for the gathers that wait for it.
  index_t token(index_t v) {
    index_t& t = token_of_[at(v)];
    if (t == no_index) {
      t = out_.add_tensor(added_tensor("after." + g_->op(v).name, 0, tensor_kind::other));
    }
    return t;
  }

  /// Before op v (ZeRO-3): the gathers of the parameters it reads first.
  void emit_gathers_before(index_t v) {
    if (o_->mode != data_parallel::zero3) return;
    const bool backward = g_->op(v).phase == phase::backward;
    for (gather& x : gathers_before_[at(v)]) {
      const tensor_info& param = g_->tensor(x.param);
      x.full = out_.add_tensor(
          added_tensor(param.name + (backward ? ".regathered" : ".gathered"), param.bytes, tensor_kind::other));
      full_[{x.param, backward}] = x.full;
      std::vector<index_t> in{x.param};
      if (x.token != no_index) in.push_back(x.token);
      add_comm(memplan::detail::concat(backward ? "regather." : "gather.", param.name), "all_gather",
               backward ? phase::backward : phase::forward, collective::all_gather, param.bytes, in, {x.full}, true);
    }
  }

  /// Copies op v with its inputs as this rank has them.
  void emit(index_t v) {
    op_info op = g_->op(v);
    for (index_t& t : op.inputs) t = input_of(t, op.phase);
    if (token_of_.size() > at(v) && token_of_[at(v)] != no_index) op.outputs.push_back(token_of_[at(v)]);
    if (op.phase == phase::update && sharded_state()) {
      op.time_us /= n_;  // each rank updates its 1/n of the parameters
      op.workspace_bytes = shard_bytes(op.workspace_bytes, n_);
    }
    op.id = auto_id;
    out_.add_op(std::move(op));
  }
  [[nodiscard]] index_t input_of(index_t t, phase ph) const {
    if (ph == phase::update) return replace_[at(t)] == no_index ? t : replace_[at(t)];
    if (o_->mode == data_parallel::zero3 && g_->tensor(t).kind == tensor_kind::parameter) {
      const auto it = full_.find({t, ph == phase::backward});
      if (it != full_.end()) return it->second;
    }
    return t;
  }

  /// ZeRO-1 and 2: every rank gathers the parameters the others updated.
  void gather_updated_parameters() {
    std::vector<index_t> params;
    bytes_t total = 0;
    for (std::size_t t = 0; t < g_->num_tensors(); ++t) {
      if (g_->tensor(static_cast<index_t>(t)).kind != tensor_kind::parameter) continue;
      params.push_back(static_cast<index_t>(t));
      total += g_->tensor(static_cast<index_t>(t)).bytes;
    }
    if (!params.empty()) {
      add_comm("all_gather.parameters", "all_gather", phase::update, collective::all_gather, total, params, {}, false);
    }
  }

  void add_comm(std::string name, std::string type, phase ph, collective c, bytes_t bytes, std::vector<index_t> in,
                std::vector<index_t> out, bool recomputable) {
    out_.add_op(communication_op(std::move(name), std::move(type), ph, collective_us(o_->group, c, bytes),
                                 std::move(in), std::move(out), recomputable));
  }

  const graph* g_;
  const schedule* order_;
  const data_parallel_options* o_;
  int n_;
  std::vector<index_t> step_of_;   ///< per op of g, its step
  graph out_;
  std::vector<bucket> buckets_;
  std::vector<std::vector<index_t>> closes_after_;  ///< per op of g, the buckets it completes
  std::vector<index_t> replace_;   ///< per tensor of g: what update ops read instead (a bucket), or no_index
  std::vector<std::vector<gather>> gathers_before_;  ///< ZeRO-3, per op of g
  std::vector<index_t> token_of_;  ///< ZeRO-3, per op of g: its prefetch token, or no_index
  std::map<std::pair<index_t, bool>, index_t> full_;  ///< (parameter, backward) -> its gathered tensor
};

}  // namespace detail

/// One rank's iteration of data-parallel training (the file comment): `g`
/// is the single-GPU graph of one rank's micro-batch, run in `order`.
/// \returns a graph whose ops are listed in the order they run (compile it
///          with `listed_order`).
/// \throws invalid_argument for a group without ranks or a bucket cap <= 0;
///         invalid_graph if `order` does not list g's ops.
[[nodiscard]] inline graph data_parallel_rank(const graph& g, const schedule& order, const data_parallel_options& o) {
  return detail::data_parallel_builder(g, order, o).build();
}

}  // namespace memplan::distributed
