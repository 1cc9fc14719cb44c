#pragma once
/// \file
/// One stage's iteration of pipeline-parallel training with the 1F1B
/// schedule (PipeDream-Flush, as Megatron-LM and torch.distributed.pipelining
/// run it), as an ordinary graph (DESIGN.md §7a).
///
/// The single-GPU graph is one micro-batch's iteration. Its forward ops are
/// cut into `stages` contiguous runs of about equal time; a backward op runs
/// on the stage of the forward tensors and parameters it reads (the latest
/// of them), one that reads none (a sum of partial gradients) on the
/// earliest stage of the gradients it reads; an update on every stage that
/// holds its parameter. A parameter read on several stages (tied
/// embeddings) has a copy, with its optimizer state, on each, and each
/// updates it with the summed gradient, received after the last micro-batch
/// (as Megatron-LM all-reduces the embedding's gradient between its stages). A tensor one stage makes and another
/// reads crosses with a `send` op after its maker and a `recv` op on the
/// reader's stage (activations forward, gradients backward); a received
/// activation that the stage's backward reads is the stage's stash.
///
/// Stage k runs m micro-batches in 1F1B order: min(p - k - 1, m) forwards to
/// fill the pipeline, then one forward and one backward in turn, then the
/// remaining backwards; at most p - k micro-batches' activations are in
/// flight. Each micro-batch has its own copy of every tensor but the
/// persistent ones; a parameter gradient accumulates: micro-batch i > 0's op
/// that makes it reads micro-batch i - 1's sum and makes the new one
/// (`W.grad@i`), which the update reads after the last. The updates run
/// last. The stage's inputs without a maker (data, targets) are there from
/// the start, one per micro-batch.

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "memplan/cost/cluster.hpp"
#include "memplan/distributed/data_parallel.hpp"
#include "memplan/error.hpp"
#include "memplan/graph/graph.hpp"
#include "memplan/graph/schedule.hpp"

namespace memplan::distributed {

/// A pipeline configuration: which stage of how many, over how many
/// micro-batches, on which machines (stages sit on consecutive GPUs).
struct pipeline_options {
  int stages = 2;         ///< p: pipeline stages, one GPU each, in [1, 64]
  int stage = 0;          ///< the stage this graph is for, in [0, stages)
  int micro_batches = 4;  ///< m: micro-batches per iteration
  const cluster_spec* cluster = nullptr;  ///< the machines, for the transfers' cost
};

namespace detail {

/// Which stage each op of a single-GPU graph runs on (the file comment).
class stage_assignment {
 public:
  stage_assignment(const graph& g, const schedule& order, int stages)
      : g_(&g), order_(&order), p_(stages), of_op_(g.num_ops(), -1), home_(g.num_tensors(), -1) {
    cut_forward();
    place_backward_and_updates();
    find_holders();
    check_directions();
  }
  [[nodiscard]] int of_op(index_t v) const { return of_op_[static_cast<std::size_t>(v)]; }
  /// Op v runs on stage k: its own, or for an update, a stage holding one of its parameters.
  [[nodiscard]] bool runs_on(index_t v, int k) const {
    if (op(v).phase != phase::update) return of_op(v) == k;
    return std::ranges::any_of(op(v).inputs, [&](index_t t) { return held_on(t, k); });
  }
  /// Persistent tensor t has a copy on stage k: an op there (not an update) reads it.
  [[nodiscard]] bool held_on(index_t t, int k) const { return (holders_[static_cast<std::size_t>(t)] >> k & 1U) != 0; }
  /// The stage of t's maker, or of a tensor without one: its first forward reader's (-1: none).
  [[nodiscard]] int home(index_t t) const { return home_[static_cast<std::size_t>(t)]; }

 private:
  [[nodiscard]] const op_info& op(index_t v) const { return g_->op(v); }

  void cut_forward() {
    double total = 0;
    for (const index_t v : *order_) total += op(v).phase == phase::forward ? op(v).time_us : 0;
    double done = 0;
    int forward_ops = 0;
    for (const index_t v : *order_) {
      if (op(v).phase != phase::forward) continue;
      // The stage whose share of the time the op's midpoint falls in.
      const double mid = total > 0 ? (done + op(v).time_us / 2) / total : 0;
      of_op_[static_cast<std::size_t>(v)] = std::min(p_ - 1, static_cast<int>(mid * p_));
      done += op(v).time_us;
      ++forward_ops;
      for (const index_t t : op(v).inputs) {
        if (g_->producer(t) == no_index && home_[static_cast<std::size_t>(t)] < 0) home_[static_cast<std::size_t>(t)] = of_op(v);
      }
      for (const index_t t : op(v).outputs) home_[static_cast<std::size_t>(t)] = of_op(v);
    }
    MEMPLAN_EXPECTS(forward_ops >= p_, invalid_graph, "pipeline: ", p_, " stages need at least as many forward ops; '",
                    g_->name(), "' has ", forward_ops);
  }

  void place_backward_and_updates() {
    for (const index_t v : *order_) {
      const op_info& o = op(v);
      if (o.phase == phase::forward) continue;
      int forward_home = -1;
      int made_after = p_;
      for (const index_t t : o.inputs) {
        const bool forward_made = g_->producer(t) != no_index && op(g_->producer(t)).phase == phase::forward;
        if (forward_made || is_persistent(g_->tensor(t).kind)) forward_home = std::max(forward_home, home(t));
        else if (g_->producer(t) != no_index) made_after = std::min(made_after, of_op(g_->producer(t)));
      }
      if (o.phase == phase::update) forward_home = -1;  // on every stage holding its parameter (`runs_on`)
      int s = forward_home >= 0 ? forward_home : made_after < p_ ? made_after : p_ - 1;
      of_op_[static_cast<std::size_t>(v)] = s;
      for (const index_t t : o.outputs) home_[static_cast<std::size_t>(t)] = s;
    }
  }

  void find_holders() {
    holders_.assign(g_->num_tensors(), 0);
    for (std::size_t v = 0; v < g_->num_ops(); ++v) {
      if (op(static_cast<index_t>(v)).phase == phase::update) continue;
      for (const index_t t : op(static_cast<index_t>(v)).inputs) {
        if (is_persistent(g_->tensor(t).kind)) holders_[static_cast<std::size_t>(t)] |= 1U << of_op_[v];
      }
    }
  }

  /// Forward tensors flow to later stages, gradients to earlier ones (an
  /// update receives its summed gradient from any stage).
  void check_directions() const {
    for (std::size_t v = 0; v < g_->num_ops(); ++v) {
      const op_info& o = op(static_cast<index_t>(v));
      if (o.phase == phase::update) continue;
      const int s = of_op_[v];
      for (const index_t t : o.inputs) {
        const index_t maker = g_->producer(t);
        const int from = home(t);
        if (maker == no_index || from == s) continue;
        const bool ok = op(maker).phase == phase::forward ? from < s : from > s;
        MEMPLAN_EXPECTS(ok, invalid_graph, "pipeline: op '", o.name, "' on stage ", s, " reads tensor '",
                        g_->tensor(t).name, "' of stage ", from, " against the pipeline's direction");
      }
    }
  }

  const graph* g_;
  const schedule* order_;
  int p_;
  std::vector<int> of_op_;
  std::vector<int> home_;
  std::vector<std::uint64_t> holders_;  ///< per persistent tensor, a bit per stage that holds a copy
};

/// Builds stage k's graph (the file comment).
class pipeline_builder {
 public:
  pipeline_builder(const graph& g, const schedule& order, const pipeline_options& o)
      : g_(&g), order_(&order), o_(&o), stages_(g, order, o.stages) {}

  graph build() && {
    out_.set_name(memplan::detail::concat(g_->name(), "-pipeline-s", o_->stage, "of", o_->stages, "-m",
                                          o_->micro_batches));
    const std::vector<item> run = sequence();
    const std::vector<bool> before_receive = precedes_receive(run);
    for (std::size_t j = 0; j < run.size(); ++j) {
      for (const index_t t : op(run[j].op).inputs) receive(t, run[j].micro_batch, op(run[j].op).phase);
      emit(run[j].op, run[j].micro_batch, before_receive[j]);
      for (const index_t t : op(run[j].op).outputs) send(t, run[j].micro_batch);
    }
    return std::move(out_);
  }

 private:
  /// One op of the single-GPU graph for one micro-batch.
  struct item {
    index_t op;
    int micro_batch;
  };

  [[nodiscard]] const op_info& op(index_t v) const { return g_->op(v); }
  [[nodiscard]] bool on_stage(index_t v) const { return stages_.runs_on(v, o_->stage); }
  [[nodiscard]] rank_group link() const { return {o_->cluster, o_->stages}; }

  /// This stage's ops in 1F1B order, then the updates.
  [[nodiscard]] std::vector<item> sequence() const {
    std::vector<item> run;
    const auto pass = [&](int i, phase ph) {
      for (const index_t v : *order_) {
        if (op(v).phase == ph && on_stage(v)) run.push_back({v, i});
      }
    };
    const int m = o_->micro_batches;
    const int warm = std::min(o_->stages - o_->stage - 1, m);
    for (int i = 0; i < warm; ++i) pass(i, phase::forward);
    for (int i = 0; i + warm < m; ++i) {
      pass(i + warm, phase::forward);
      pass(i, phase::backward);
    }
    for (int i = std::max(0, m - warm); i < m; ++i) pass(i, phase::backward);
    pass(m - 1, phase::update);
    return run;
  }
  /// Per item: the next one receives a tensor. A receive is posted when the
  /// stage gets there (a blocking recv in program order): it waits for a
  /// zero-byte token of the op before it, or the communication stream would
  /// receive every micro-batch at the start.
  [[nodiscard]] std::vector<bool> precedes_receive(const std::vector<item>& run) const {
    std::vector<bool> before(run.size(), false);
    std::map<std::pair<index_t, int>, bool> received;
    for (std::size_t j = 0; j < run.size(); ++j) {
      for (const index_t t : op(run[j].op).inputs) {
        const index_t maker = g_->producer(t);
        if (maker == no_index || on_stage(maker) || received[{t, run[j].micro_batch}]) continue;
        received[{t, run[j].micro_batch}] = true;
        if (j > 0) before[j - 1] = true;
      }
    }
    return before;
  }

  /// t's copy for micro-batch i on this stage (made once).
  index_t copy_of(index_t t, int i) {
    const tensor_info& info = g_->tensor(t);
    if (is_persistent(info.kind)) return persistent(t);
    const auto key = std::pair{t, i};
    const auto it = copies_.find(key);
    if (it != copies_.end()) return it->second;
    tensor_info c = info;
    c.id = auto_id;
    c.released_after = no_index;
    c.name = memplan::detail::concat(info.name, "@", i);
    return copies_[key] = out_.add_tensor(std::move(c));
  }
  index_t persistent(index_t t) {
    const auto it = persistent_.find(t);
    if (it != persistent_.end()) return it->second;
    tensor_info c = g_->tensor(t);
    c.id = auto_id;
    return persistent_[t] = out_.add_tensor(std::move(c));
  }

  /// A tensor another stage makes arrives before its first reader here,
  /// once the op before it has ended (its token).
  void receive(index_t t, int i, phase ph) {
    const index_t maker = g_->producer(t);
    if (maker == no_index || on_stage(maker) || copies_.contains({t, i})) return;
    const index_t c = copy_of(t, i);
    std::vector<index_t> after;
    if (token_ != no_index) after.push_back(token_);
    add_transfer(memplan::detail::concat("recv.", g_->tensor(t).name, "@", i), "recv", ph, t, std::move(after), {c});
  }
  /// t, made here, goes once to each other stage that reads it (an
  /// update, the last micro-batch's sum only).
  void send(index_t t, int i) {
    std::vector<int> to;
    for (const index_t r : g_->consumers(t)) {
      if (op(r).phase == phase::update && i + 1 < o_->micro_batches) continue;
      for (int k = 0; k < o_->stages; ++k) {
        if (k != o_->stage && stages_.runs_on(r, k) && std::ranges::find(to, k) == to.end()) to.push_back(k);
      }
    }
    for (const int s : to) {
      add_transfer(memplan::detail::concat("send.", g_->tensor(t).name, "@", i, ".to", s), "send",
                   op(g_->producer(t)).phase, t, {copy_of(t, i)}, {});
    }
  }

  /// Op v for micro-batch i; a parameter gradient accumulates over the
  /// micro-batches. `token`: it also makes a zero-byte tensor the next
  /// receive waits for.
  void emit(index_t v, int i, bool token) {
    op_info o = op(v);
    o.id = auto_id;
    if (o.phase != phase::update) o.name = memplan::detail::concat(o.name, "@", i);
    for (index_t& t : o.inputs) t = copy_of(t, i);
    for (index_t& t : o.outputs) {
      if (g_->tensor(t).kind == tensor_kind::parameter_gradient && o.phase != phase::update && i > 0) {
        o.inputs.push_back(copy_of(t, i - 1));  // the sum so far, into which this micro-batch's part is added
      }
      t = copy_of(t, i);
    }
    token_ = no_index;
    if (token) {
      token_ = out_.add_tensor(added_tensor("after." + o.name, 0, tensor_kind::other));
      o.outputs.push_back(token_);
    }
    out_.add_op(std::move(o));
  }

  void add_transfer(std::string name, std::string type, phase ph, index_t t, std::vector<index_t> in,
                    std::vector<index_t> out) {
    out_.add_op(communication_op(std::move(name), std::move(type), ph,
                                 collective_us(link(), collective::send_recv, g_->tensor(t).bytes), std::move(in),
                                 std::move(out), false));
  }

  const graph* g_;
  const schedule* order_;
  const pipeline_options* o_;
  stage_assignment stages_;
  graph out_;
  std::map<std::pair<index_t, int>, index_t> copies_;  ///< (tensor, micro-batch) -> its copy here
  std::map<index_t, index_t> persistent_;              ///< persistent tensor -> its one copy here
  index_t token_ = no_index;  ///< the token of the op emitted last, or no_index
};

}  // namespace detail

/// Stage `o.stage`'s iteration of 1F1B pipeline training over
/// `o.micro_batches` micro-batches (the file comment): `g` is one
/// micro-batch's single-GPU graph, run in `order`.
/// \returns a graph whose ops are listed in the order they run (compile it
///          with `listed_order`).
/// \throws invalid_argument for a stage outside [0, stages), fewer than 1
///         micro-batch or no cluster; invalid_graph for a graph that does
///         not pipeline (fewer forward ops than stages, tied weights, a
///         gradient flowing to a later stage), naming the op and tensor.
[[nodiscard]] inline graph pipeline_stage(const graph& g, const schedule& order, const pipeline_options& o) {
  MEMPLAN_EXPECTS(o.stages >= 1 && o.stages <= 64, invalid_argument, "pipeline: stages must be in [1, 64], got ",
                  o.stages);
  MEMPLAN_EXPECTS(o.stage >= 0 && o.stage < o.stages, invalid_argument, "pipeline: stage ", o.stage,
                  " is outside [0, ", o.stages, ")");
  MEMPLAN_EXPECTS(o.micro_batches >= 1, invalid_argument, "pipeline: micro_batches must be >= 1, got ",
                  o.micro_batches);
  MEMPLAN_EXPECTS(o.cluster != nullptr, invalid_argument, "pipeline: no cluster given");
  MEMPLAN_EXPECTS(order.size() == g.num_ops(), invalid_graph, "pipeline: the schedule lists ", order.size(),
                  " ops, but the graph has ", g.num_ops());
  return detail::pipeline_builder(g, order, o).build();
}

}  // namespace memplan::distributed
