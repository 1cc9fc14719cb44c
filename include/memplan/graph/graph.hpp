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
  std::string name;
  bytes_t bytes = 0;
  tensor_kind kind = tensor_kind::other;
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
  std::string name;
  std::string type;
  memplan::phase phase = phase::forward;
  double time_us = 0;
  bytes_t workspace_bytes = 0;
  std::vector<index_t> inputs;
  std::vector<index_t> outputs;
  bool recomputable = true;
  std::vector<int> split_dims;  ///< output dimensions along which the op may be split
};

/// An edge u -> v: op v reads `tensor`, which op u writes.
struct edge {
  index_t source = no_index;
  index_t target = no_index;
  index_t tensor = no_index;
  friend bool operator==(const edge&, const edge&) = default;
};

/// memplan's training graph. Tensors are added first, then ops; every
/// addition is checked, so a `graph` is always well formed (tensor references
/// resolve, one producer per tensor) though not necessarily acyclic — the
/// schedule checks that.
class graph {
 public:
  graph() = default;
  explicit graph(std::string name) : name_(std::move(name)) {}

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
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

  [[nodiscard]] std::size_t num_ops() const noexcept { return ops_.size(); }
  [[nodiscard]] std::size_t num_tensors() const noexcept { return tensors_.size(); }
  [[nodiscard]] const op_info& op(index_t v) const { return ops_[static_cast<std::size_t>(v)]; }
  [[nodiscard]] const tensor_info& tensor(index_t t) const { return tensors_[static_cast<std::size_t>(t)]; }
  /// The op writing tensor `t`, or `no_index` for inputs, parameters and state.
  [[nodiscard]] index_t producer(index_t t) const { return producer_[static_cast<std::size_t>(t)]; }
  /// The ops reading tensor `t`, in the order they were added.
  [[nodiscard]] const std::vector<index_t>& consumers(index_t t) const {
    return consumers_[static_cast<std::size_t>(t)];
  }
  [[nodiscard]] const std::vector<edge>& out_edges_of(index_t v) const { return out_[static_cast<std::size_t>(v)]; }
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
inline auto vertices(const graph& g) {
  using it = boost::counting_iterator<index_t>;
  return std::pair{it{0}, it{static_cast<index_t>(g.num_ops())}};
}
inline std::size_t num_vertices(const graph& g) noexcept { return g.num_ops(); }
inline auto out_edges(index_t v, const graph& g) {
  const auto& e = g.out_edges_of(v);
  return std::pair{e.begin(), e.end()};
}
inline auto in_edges(index_t v, const graph& g) {
  const auto& e = g.in_edges_of(v);
  return std::pair{e.begin(), e.end()};
}
inline std::size_t out_degree(index_t v, const graph& g) { return g.out_edges_of(v).size(); }
inline std::size_t in_degree(index_t v, const graph& g) { return g.in_edges_of(v).size(); }
inline std::size_t degree(index_t v, const graph& g) { return out_degree(v, g) + in_degree(v, g); }
inline index_t source(const edge& e, const graph&) noexcept { return e.source; }
inline index_t target(const edge& e, const graph&) noexcept { return e.target; }

}  // namespace memplan

namespace boost {
template <>
struct graph_traits<memplan::graph> {
  struct traversal_category : vertex_list_graph_tag, bidirectional_graph_tag {};
  using vertex_descriptor = memplan::index_t;
  using edge_descriptor = memplan::edge;
  using directed_category = bidirectional_tag;
  using edge_parallel_category = allow_parallel_edge_tag;
  using vertex_iterator = counting_iterator<memplan::index_t>;
  using out_edge_iterator = std::vector<memplan::edge>::const_iterator;
  using in_edge_iterator = std::vector<memplan::edge>::const_iterator;
  using adjacency_iterator = void;
  using vertices_size_type = std::size_t;
  using edges_size_type = std::size_t;
  using degree_size_type = std::size_t;
  static constexpr vertex_descriptor null_vertex() noexcept { return memplan::no_index; }
};
}  // namespace boost
