#pragma once
/// \file
/// memplan's own training graph: ops and tensors in flat vectors, with the
/// op-to-op edges (one per tensor read) kept both ways so that it models
/// Boost.Graph's VertexListGraph and BidirectionalGraph.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <boost/graph/graph_traits.hpp>
#include <boost/iterator/counting_iterator.hpp>

#include "memplan/error.hpp"
#include "memplan/fwd.hpp"
#include "memplan/graph/vocabulary.hpp"

namespace memplan {

/// An id left to the graph: `graph::add_tensor` and `add_op` give one more
/// than the largest id added so far (0 first).
inline constexpr std::int64_t auto_id = std::numeric_limits<std::int64_t>::min();

/// A tensor: a buffer with one producer op or none.
struct tensor_info {
  std::int64_t id = auto_id;  ///< the id used in files; the graph indexes tensors densely
  std::string name;           ///< for messages and files; need not be unique
  bytes_t bytes = 0;          ///< its size on the device, >= 0
  tensor_kind kind = tensor_kind::other;  ///< decides its lifetime (persistent or not) and how it may be dropped
  std::vector<std::int64_t> shape;  ///< empty when unknown
  std::string dtype;                ///< empty when unknown
  /// The op (dense index) after which the framework that ran the graph drops
  /// its last reference to the tensor (a DTR log's RELEASE); no_index: after
  /// its last reader. Only `dtr`, which runs inside the framework, keeps a
  /// tensor that long (problem::held_until).
  index_t released_after = no_index;
};

/// Elements of a tensor: the product of its shape when known, else its bytes
/// over its dtype's size, else its bytes over 4 (fp32 assumed).
[[nodiscard]] inline std::int64_t element_count(const tensor_info& t) {
  if (!t.shape.empty()) {
    std::int64_t n = 1;
    for (const std::int64_t d : t.shape) n *= d;
    return n;
  }
  return t.bytes / dtype_bytes(t.dtype).value_or(4);
}

/// An op: reads `inputs`, writes `outputs` (dense tensor indices).
struct op_info {
  std::int64_t id = auto_id;  ///< the id used in files
  std::string name;           ///< for messages and files; need not be unique
  std::string type;           ///< the kernel ("conv2d", "relu_backward", ...); cost/roofline.hpp prices by it
  memplan::phase phase = phase::forward;  ///< the part of the iteration it runs in
  double time_us = 0;                     ///< its run time on the device, µs, >= 0
  bytes_t workspace_bytes = 0;  ///< scratch memory it needs while it runs (freed after), >= 0
  std::vector<index_t> inputs;   ///< the tensors it reads
  std::vector<index_t> outputs;  ///< the tensors it writes; each has this op as its only producer
  bool recomputable = true;  ///< whether a planner may run it again to remake a dropped output
  std::vector<int> split_dims;  ///< output dimensions along which the op may be split
};

/// An edge u -> v: op v reads `tensor`, which op u writes.
struct edge {
  index_t source = no_index;  ///< op u, the producer
  index_t target = no_index;  ///< op v, the reader
  index_t tensor = no_index;  ///< the tensor u writes and v reads
  /// Same ops and tensor.
  friend bool operator==(const edge&, const edge&) = default;
};

/// memplan's training graph. Tensors are added first, then ops; every
/// addition is checked, so a `graph` is always well formed (tensor references
/// resolve, one producer per tensor) though not necessarily acyclic — the
/// schedule checks that.
class graph {
 public:
  graph() = default;
  /// An empty graph called `name`.
  explicit graph(std::string name) : name_(std::move(name)) {}

  /// The model's name, for messages and files ("resnet50", ...).
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  /// Renames the graph.
  void set_name(std::string name) { name_ = std::move(name); }

  /// Adds a tensor and returns its dense index; an `auto_id` becomes the next id.
  /// \throws invalid_graph if its bytes are negative.
  index_t add_tensor(tensor_info t) {
    MEMPLAN_EXPECTS(t.bytes >= 0, invalid_graph, "tensor '", t.name, "': bytes must be non-negative, got ",
                    t.bytes);
    t.id = take_id(t.id, next_tensor_id_);
    tensors_.push_back(std::move(t));
    producer_.push_back(no_index);
    consumers_.emplace_back();
    return static_cast<index_t>(tensors_.size() - 1);
  }

  /// Adds an op and the edges it creates, and returns its dense index; an
  /// `auto_id` becomes the next id.
  /// \throws invalid_graph on an unknown tensor, a second producer, an op that
  ///         reads its own output, or a negative time or workspace.
  index_t add_op(op_info o) {
    const auto v = static_cast<index_t>(ops_.size());
    MEMPLAN_EXPECTS(std::isfinite(o.time_us) && o.time_us >= 0, invalid_graph, "op '", o.name,
                    "': time_us must be a non-negative number, got ", o.time_us);
    MEMPLAN_EXPECTS(o.workspace_bytes >= 0, invalid_graph, "op '", o.name,
                    "': workspace_bytes must be non-negative, got ", o.workspace_bytes);
    for (const index_t t : o.inputs) check_tensor(o, t, "inputs");
    for (const index_t t : o.outputs) {
      check_tensor(o, t, "outputs");
      MEMPLAN_EXPECTS(producer_[t] == no_index, invalid_graph, "tensor '", tensors_[t].name,
                      "' has two producers: op '", ops_[producer_[t]].name, "' and op '", o.name, "'");
      for (const index_t in : o.inputs) {
        MEMPLAN_EXPECTS(in != t, invalid_graph, "op '", o.name, "' reads its own output tensor '",
                        tensors_[t].name, "'");
      }
    }
    out_.emplace_back();
    in_.emplace_back();
    for (const index_t t : o.outputs) {
      producer_[t] = v;
      for (const index_t c : consumers_[t]) connect(v, c, t);
    }
    for (const index_t t : o.inputs) {
      consumers_[t].push_back(v);
      if (producer_[t] != no_index) connect(producer_[t], v, t);
    }
    o.id = take_id(o.id, next_op_id_);
    ops_.push_back(std::move(o));
    return v;
  }

  /// Records that the framework drops tensor `t` after op `v` (tensor_info::released_after).
  /// \throws invalid_graph if `v` is not an op of the graph.
  void set_released_after(index_t t, index_t v) {
    MEMPLAN_EXPECTS(v >= 0 && static_cast<std::size_t>(v) < ops_.size(), invalid_graph, "tensor '",
                    tensors_[static_cast<std::size_t>(t)].name, "': released_after names op index ", v,
                    ", which the graph does not have (", ops_.size(), " ops)");
    tensors_[static_cast<std::size_t>(t)].released_after = v;
  }

  /// How many ops; their dense indices are 0 .. num_ops()-1.
  [[nodiscard]] std::size_t num_ops() const noexcept { return ops_.size(); }
  /// How many tensors; their dense indices are 0 .. num_tensors()-1.
  [[nodiscard]] std::size_t num_tensors() const noexcept { return tensors_.size(); }
  /// Op `v` (a dense index, unchecked).
  [[nodiscard]] const op_info& op(index_t v) const { return ops_[static_cast<std::size_t>(v)]; }
  /// Tensor `t` (a dense index, unchecked).
  [[nodiscard]] const tensor_info& tensor(index_t t) const { return tensors_[static_cast<std::size_t>(t)]; }
  /// The op writing tensor `t`, or `no_index` for inputs, parameters and state.
  [[nodiscard]] index_t producer(index_t t) const { return producer_[static_cast<std::size_t>(t)]; }
  /// The ops reading tensor `t`, in the order they were added.
  [[nodiscard]] const std::vector<index_t>& consumers(index_t t) const {
    return consumers_[static_cast<std::size_t>(t)];
  }
  /// The edges from op `v`: one per (reader, tensor) of each tensor it writes.
  [[nodiscard]] const std::vector<edge>& out_edges_of(index_t v) const { return out_[static_cast<std::size_t>(v)]; }
  /// The edges into op `v`: one per input of `v` that has a producer.
  [[nodiscard]] const std::vector<edge>& in_edges_of(index_t v) const { return in_[static_cast<std::size_t>(v)]; }

 private:
  void check_tensor(const op_info& o, index_t t, const char* field) const {
    MEMPLAN_EXPECTS(t >= 0 && static_cast<std::size_t>(t) < tensors_.size(), invalid_graph, "op '", o.name,
                    "': ", field, " names tensor index ", t, ", but the graph has ", tensors_.size(),
                    " tensors");
  }
  void connect(index_t u, index_t v, index_t t) {
    out_[static_cast<std::size_t>(u)].push_back({u, v, t});
    in_[static_cast<std::size_t>(v)].push_back({u, v, t});
  }
  /// `id`, or the next id where it is `auto_id`; `next` stays above every id taken.
  static std::int64_t take_id(std::int64_t id, std::int64_t& next) noexcept {
    if (id == auto_id) id = next;
    if (id >= next && id < std::numeric_limits<std::int64_t>::max()) next = id + 1;
    return id;
  }

  std::string name_;
  std::vector<op_info> ops_;
  std::vector<tensor_info> tensors_;
  std::vector<index_t> producer_;
  std::vector<std::vector<index_t>> consumers_;
  std::vector<std::vector<edge>> out_;
  std::vector<std::vector<edge>> in_;
  std::int64_t next_tensor_id_ = 0;
  std::int64_t next_op_id_ = 0;
};

// Boost.Graph interface (VertexListGraph + BidirectionalGraph), found by ADL.
/// Boost.Graph: the ops, as dense indices 0 .. num_ops()-1.
inline auto vertices(const graph& g) {
  using it = boost::counting_iterator<index_t>;
  return std::pair{it{0}, it{static_cast<index_t>(g.num_ops())}};
}
/// Boost.Graph: the number of ops.
inline std::size_t num_vertices(const graph& g) noexcept { return g.num_ops(); }
/// Boost.Graph: `graph::out_edges_of(v)` as an iterator pair.
inline auto out_edges(index_t v, const graph& g) {
  const auto& e = g.out_edges_of(v);
  return std::pair{e.begin(), e.end()};
}
/// Boost.Graph: `graph::in_edges_of(v)` as an iterator pair.
inline auto in_edges(index_t v, const graph& g) {
  const auto& e = g.in_edges_of(v);
  return std::pair{e.begin(), e.end()};
}
/// Boost.Graph: the number of edges from op `v`.
inline std::size_t out_degree(index_t v, const graph& g) { return g.out_edges_of(v).size(); }
/// Boost.Graph: the number of edges into op `v`.
inline std::size_t in_degree(index_t v, const graph& g) { return g.in_edges_of(v).size(); }
/// Boost.Graph: edges from and into op `v`.
inline std::size_t degree(index_t v, const graph& g) { return out_degree(v, g) + in_degree(v, g); }
/// Boost.Graph: the op that writes the edge's tensor.
inline index_t source(const edge& e, const graph&) noexcept { return e.source; }
/// Boost.Graph: the op that reads the edge's tensor.
inline index_t target(const edge& e, const graph&) noexcept { return e.target; }

}  // namespace memplan

namespace boost {
/// Makes `memplan::graph` a Boost.Graph VertexListGraph and BidirectionalGraph:
/// vertices are ops (dense indices), edges `memplan::edge`s.
template <>
struct graph_traits<memplan::graph> {
  /// VertexListGraph + BidirectionalGraph.
  struct traversal_category : vertex_list_graph_tag, bidirectional_graph_tag {};
  using vertex_descriptor = memplan::index_t;      ///< an op's dense index
  using edge_descriptor = memplan::edge;           ///< (producer, reader, tensor)
  using directed_category = bidirectional_tag;     ///< directed, with in-edges
  using edge_parallel_category = allow_parallel_edge_tag;  ///< one edge per tensor: two ops may share several
  using vertex_iterator = counting_iterator<memplan::index_t>;  ///< over 0 .. num_ops()-1
  using out_edge_iterator = std::vector<memplan::edge>::const_iterator;  ///< into graph::out_edges_of
  using in_edge_iterator = std::vector<memplan::edge>::const_iterator;   ///< into graph::in_edges_of
  using adjacency_iterator = void;          ///< not an AdjacencyGraph
  using vertices_size_type = std::size_t;   ///< a count of ops
  using edges_size_type = std::size_t;      ///< a count of edges
  using degree_size_type = std::size_t;     ///< a count of an op's edges
  /// No op (`memplan::no_index`).
  static constexpr vertex_descriptor null_vertex() noexcept { return memplan::no_index; }
};
}  // namespace boost
