#pragma once
/// \file
/// Reading and writing `memplan-graph` version 1 documents (DESIGN.md §4;
/// the reference with every default and error is docs/formats.md).

#include <algorithm>
#include <array>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "memplan/error.hpp"
#include "memplan/fwd.hpp"
#include "memplan/graph/graph.hpp"
#include "memplan/graph/schedule.hpp"
#include "memplan/graph/vocabulary.hpp"
#include "memplan/io/json_fields.hpp"

/// Files and what the CLI prints: graphs, plans, reports, device profiles
/// and traces as JSON, DTR logs, SVG pictures, sizes, and the runs behind
/// the CLI's commands (CMake component memplan::io, which needs nlohmann_json).
namespace memplan::io {

/// The `format` field of a graph document.
inline constexpr std::string_view graph_format = "memplan-graph";
/// The only `version` of the graph format.
inline constexpr std::int64_t graph_format_version = 1;

/// A graph read from a file and the order its ops run in.
struct graph_document {
  memplan::graph graph;        ///< the ops and tensors, ids as in the file
  memplan::schedule schedule;  ///< dense op indices: the file's `schedule`, or array order
};

namespace detail {

/// "tensor 'x' (id 4)": how graph errors name a tensor or op once it is read.
[[nodiscard]] inline std::string describe(const tensor_info& t) { return concat("tensor '", t.name, "' (id ", t.id, ")"); }
[[nodiscard]] inline std::string describe(const op_info& o) { return concat("op '", o.name, "' (id ", o.id, ")"); }

/// Reads a `memplan-graph` document into a `graph` and checks what the graph
/// itself cannot: ids, references by id, the schedule.
class graph_reader {
 public:
  explicit graph_reader(const json& doc) : top_(doc, std::string(graph_format)) {
    expect_header(doc, graph_format, graph_format_version);
    doc_.graph.set_name(top_.string_or("name", ""));
    read_tensors(top_.array("tensors"));
    read_ops(top_.array("ops"));
    read_releases(top_.array("tensors"));
    read_schedule();
    check_acyclic();
    check_topological();
  }

  [[nodiscard]] graph_document finish() && { return std::move(doc_); }

 private:
  void read_tensors(const json& tensors) {
    producer_.assign(tensors.size(), no_index);
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const field_reader r(tensors[i], describe_entry("tensor", "tensors", tensors[i], i));
      tensor_info t;
      t.id = r.integer("id");
      t.name = r.string("name");
      t.bytes = r.integer("bytes");
      t.kind = r.choice<tensor_kind>("kind", tensor_kind_names);
      t.shape = r.integers_or_empty("shape");
      t.dtype = r.string_or("dtype", "");
      const auto [it, fresh] = tensor_by_id_.emplace(t.id, static_cast<index_t>(i));
      if (!fresh) r.fail("id", "repeats the id of ", describe(doc_.graph.tensor(it->second)));
      doc_.graph.add_tensor(std::move(t));
    }
  }

  void read_ops(const json& ops) {
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const field_reader r(ops[i], describe_entry("op", "ops", ops[i], i));
      op_info o;
      o.id = r.integer("id");
      o.name = r.string("name");
      o.type = r.string("type");
      o.phase = r.choice<phase>("phase", phase_names);
      o.time_us = r.non_negative_number("time_us");
      o.workspace_bytes = r.integer_or("workspace_bytes", 0);
      o.recomputable = r.boolean_or("recomputable", default_recomputable(o.phase));
      for (const auto d : r.integers_or_empty("split_dims", 0, INT_MAX)) o.split_dims.push_back(static_cast<int>(d));
      o.inputs = tensor_refs(r, "inputs");
      o.outputs = tensor_refs(r, "outputs");
      const auto v = static_cast<index_t>(i);
      const auto [it, fresh] = op_by_id_.emplace(o.id, v);
      if (!fresh) r.fail("id", "repeats the id of ", describe(doc_.graph.op(it->second)));
      for (const index_t t : o.outputs) {
        auto& made_by = producer_[static_cast<std::size_t>(t)];
        if (made_by == v) r.fail("outputs", "lists ", describe(doc_.graph.tensor(t)), " twice");
        if (made_by != no_index) {
          r.fail("outputs", "names ", describe(doc_.graph.tensor(t)), ", which ", describe(doc_.graph.op(made_by)),
                 " already produces: a tensor has at most one producer");
        }
        for (const index_t in : o.inputs) {
          if (in == t) r.fail("outputs", "names ", describe(doc_.graph.tensor(t)), ", which the op also reads");
        }
        made_by = v;
      }
      doc_.graph.add_op(std::move(o));
    }
  }

  /// Each tensor's optional `released_after`: the id of an op.
  void read_releases(const json& tensors) {
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const field_reader r(tensors[i], describe_entry("tensor", "tensors", tensors[i], i));
      if (!r.has("released_after")) continue;
      const std::int64_t id = r.integer("released_after");
      const auto it = op_by_id_.find(id);
      if (it == op_by_id_.end()) r.fail("released_after", "names op id ", id, ", which no op has");
      doc_.graph.set_released_after(static_cast<index_t>(i), it->second);
    }
  }

  /// The dense indices of the tensor ids listed in `field`.
  [[nodiscard]] std::vector<index_t> tensor_refs(const field_reader& r, std::string_view field) const {
    const auto ids = r.integers(field);
    std::vector<index_t> out;
    out.reserve(ids.size());
    for (std::size_t k = 0; k < ids.size(); ++k) {
      const auto it = tensor_by_id_.find(ids[k]);
      if (it == tensor_by_id_.end()) r.fail(field_reader::element(field, k), "names tensor id ", ids[k], ", which no tensor has");
      out.push_back(it->second);
    }
    return out;
  }

  void read_schedule() {
    const std::size_t n = doc_.graph.num_ops();
    auto& order = doc_.schedule;
    if (!top_.has("schedule")) {
      for (std::size_t v = 0; v < n; ++v) order.push_back(static_cast<index_t>(v));
      return;
    }
    const auto ids = top_.integers("schedule");
    std::vector<std::uint8_t> listed(n, 0);
    for (std::size_t k = 0; k < ids.size(); ++k) {
      const auto field = field_reader::element("schedule", k);
      const auto it = op_by_id_.find(ids[k]);
      if (it == op_by_id_.end()) top_.fail(field, "names op id ", ids[k], ", which no op has");
      if (listed[static_cast<std::size_t>(it->second)]) top_.fail(field, "names ", describe(doc_.graph.op(it->second)), " a second time");
      listed[static_cast<std::size_t>(it->second)] = 1;
      order.push_back(it->second);
    }
    for (std::size_t v = 0; v < n; ++v) {
      if (!listed[v]) {
        top_.fail("schedule", "lists ", ids.size(), " of the ", n, " ops; ", describe(doc_.graph.op(static_cast<index_t>(v))),
                  " is missing");
      }
    }
  }

  /// A cycle admits no order at all: name its ops rather than blame the order.
  void check_acyclic() const {
    const auto& g = doc_.graph;
    const std::size_t n = g.num_ops();
    // Kahn's algorithm; the ops it cannot place lie on a cycle or after one.
    std::vector<std::size_t> pending(n);
    std::vector<index_t> ready;
    for (std::size_t v = 0; v < n; ++v) {
      pending[v] = g.in_edges_of(static_cast<index_t>(v)).size();
      if (pending[v] == 0) ready.push_back(static_cast<index_t>(v));
    }
    while (!ready.empty()) {
      const index_t v = ready.back();
      ready.pop_back();
      for (const edge& e : g.out_edges_of(v)) {
        if (--pending[static_cast<std::size_t>(e.target)] == 0) ready.push_back(e.target);
      }
    }
    const auto left = std::ranges::find_if(pending, [](std::size_t p) { return p != 0; });
    if (left == pending.end()) return;
    // Each op left waits on another op left: walk back along those waits until one repeats.
    std::vector<std::size_t> seen_at(n, n);
    std::vector<index_t> path;
    auto v = static_cast<index_t>(left - pending.begin());
    while (seen_at[static_cast<std::size_t>(v)] == n) {
      seen_at[static_cast<std::size_t>(v)] = path.size();
      path.push_back(v);
      for (const edge& e : g.in_edges_of(v)) {
        if (pending[static_cast<std::size_t>(e.source)] != 0) {
          v = e.source;
          break;
        }
      }
    }
    std::string cycle = describe(g.op(v));
    for (auto it = path.rbegin(); *it != v; ++it) cycle += " -> " + describe(g.op(*it));
    top_.fail("ops", "has a cycle, so no order can run its ops: ", cycle, " -> ", describe(g.op(v)));
  }

  /// Every op's inputs are made before it runs (DESIGN.md §4).
  void check_topological() const {
    const auto& g = doc_.graph;
    const auto& order = doc_.schedule;
    std::vector<std::size_t> position(g.num_ops());
    for (std::size_t s = 0; s < order.size(); ++s) position[static_cast<std::size_t>(order[s])] = s;
    for (std::size_t s = 0; s < order.size(); ++s) {
      const op_info& o = g.op(order[s]);
      for (const index_t t : o.inputs) {
        const index_t made_by = g.producer(t);
        if (made_by == no_index || position[static_cast<std::size_t>(made_by)] < s) continue;
        top_.fail(top_.has("schedule") ? "schedule" : "ops", "is not a topological order",
                  top_.has("schedule") ? "" : " (there is no 'schedule', so ops run in array order)", ": ",
                  describe(o), " at position ", s, " reads ", describe(g.tensor(t)), " before its producer ",
                  describe(g.op(made_by)), " at position ", position[static_cast<std::size_t>(made_by)], " runs");
      }
    }
  }

  field_reader top_;
  graph_document doc_;
  std::unordered_map<std::int64_t, index_t> tensor_by_id_;
  std::unordered_map<std::int64_t, index_t> op_by_id_;
  std::vector<index_t> producer_;  ///< per tensor: the op producing it so far
};

}  // namespace detail

/// Reads a `memplan-graph` v1 document.
/// \param text the JSON text.
/// \returns the graph (tensors and ops in array order, file ids kept in
///          `tensor_info::id` / `op_info::id`) and its schedule as dense op
///          indices (the file's `schedule`, or array order without one).
/// \throws invalid_graph naming the field and the op or tensor if the text is
///         not JSON, the header is wrong, a field is missing or has a bad
///         type or value, ids repeat or do not resolve, a tensor has two
///         producers, or the order is not topological (cycles included).
[[nodiscard]] inline graph_document read_graph(std::string_view text) {
  const auto doc = detail::parse_document(text, graph_format);
  return detail::graph_reader(doc).finish();
}

/// Reads a `memplan-graph` v1 file.
/// \throws invalid_argument if the file cannot be read; invalid_graph as `read_graph`.
[[nodiscard]] inline graph_document read_graph_file(const std::filesystem::path& path) {
  return read_graph(detail::read_text_file(path, graph_format));
}

/// The `memplan-graph` v1 document of `g` run in `order`. Optional fields are
/// written even when they hold their defaults, so the document does not
/// depend on them; `shape` and `dtype` are left out when unknown (empty),
/// `released_after` when the tensor does not record one.
/// \param g the graph; its tensors and ops keep their ids.
/// \param order dense op indices (a schedule of `g`).
/// \throws invalid_graph if `order` names an op `g` does not have.
[[nodiscard]] inline nlohmann::json to_json(const graph& g, const schedule& order) {
  using detail::json;
  json tensors = json::array();
  for (std::size_t i = 0; i < g.num_tensors(); ++i) {
    const tensor_info& t = g.tensor(static_cast<index_t>(i));
    json entry = {{"id", t.id}, {"name", t.name}, {"bytes", t.bytes}, {"kind", std::string(to_string(t.kind))}};
    if (!t.shape.empty()) entry["shape"] = t.shape;
    if (!t.dtype.empty()) entry["dtype"] = t.dtype;
    if (t.released_after != no_index) entry["released_after"] = g.op(t.released_after).id;
    tensors.push_back(std::move(entry));
  }
  const auto ids_of = [&g](const std::vector<index_t>& list) {
    json ids = json::array();
    for (const index_t t : list) ids.push_back(g.tensor(t).id);
    return ids;
  };
  json ops = json::array();
  for (std::size_t v = 0; v < g.num_ops(); ++v) {
    const op_info& o = g.op(static_cast<index_t>(v));
    ops.push_back({{"id", o.id},
                   {"name", o.name},
                   {"type", o.type},
                   {"phase", std::string(to_string(o.phase))},
                   {"time_us", o.time_us},
                   {"workspace_bytes", o.workspace_bytes},
                   {"inputs", ids_of(o.inputs)},
                   {"outputs", ids_of(o.outputs)},
                   {"recomputable", o.recomputable},
                   {"split_dims", o.split_dims}});
  }
  json ids = json::array();
  for (std::size_t s = 0; s < order.size(); ++s) {
    MEMPLAN_EXPECTS(order[s] >= 0 && static_cast<std::size_t>(order[s]) < g.num_ops(), invalid_graph, "schedule[", s,
                    "]: op index ", order[s], " is outside [0, ", g.num_ops(), ")");
    ids.push_back(g.op(order[s]).id);
  }
  return {{"format", graph_format}, {"version", graph_format_version}, {"name", g.name()},
          {"tensors", std::move(tensors)}, {"ops", std::move(ops)}, {"schedule", std::move(ids)}};
}

/// Writes `to_json(g, order)` with one tensor or op per line.
/// \throws invalid_graph as `to_json`.
inline void write_graph(std::ostream& out, const graph& g, const schedule& order) {
  static constexpr std::array<std::string_view, 6> keys{"format", "version", "name", "tensors", "ops", "schedule"};
  detail::write_lines(out, to_json(g, order), keys);
}

}  // namespace memplan::io
