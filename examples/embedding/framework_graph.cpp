// Adapting a framework's own graph struct. Its nodes keep their input and
// output values and the links to the nodes that read them; free functions
// next to the struct (found by argument-dependent lookup) give Boost.Graph's
// VertexListGraph + IncidenceGraph and memplan's queries, and one
// graph_traits specialisation names the types. Nothing is copied until
// `compile`. This plans a 16-layer step with checkpointing (Chen et al.'s
// sqrt(n) segments, recompute only) at 60 % of its unplanned peak.
//   framework_graph   (exit 0: the plan fits and passes the validator)
#include <cstdio>
#include <ranges>
#include <string>
#include <utility>
#include <vector>

#include <boost/iterator/counting_iterator.hpp>
#include <memplan/memplan.hpp>

namespace fw {
struct link {
  int from, to;
};
struct value {
  std::string name;
  long long bytes;
  memplan::tensor_kind kind;
};
struct node {
  std::string name;
  bool backward;
  double micros;
  std::vector<int> inputs, outputs;  // value ids
  std::vector<link> readers;         // to the nodes that read an output
};
struct net {
  std::vector<node> nodes;
  std::vector<value> values;
};

// Boost.Graph: vertices are node ids, out-edges the readers.
inline auto vertices(const net& g) {
  return std::pair{boost::counting_iterator<int>(0), boost::counting_iterator<int>(int(g.nodes.size()))};
}
inline std::size_t num_vertices(const net& g) { return g.nodes.size(); }
inline auto out_edges(int v, const net& g) {
  const auto& r = g.nodes[std::size_t(v)].readers;
  return std::pair{r.begin(), r.end()};
}
inline int source(const link& e, const net&) { return e.from; }
inline int target(const link& e, const net&) { return e.to; }
// memplan's queries (training_graph.hpp); names and types have defaults.
inline memplan::phase op_phase(const net& g, int v) {
  return g.nodes[std::size_t(v)].backward ? memplan::phase::backward : memplan::phase::forward;
}
inline double op_time_us(const net& g, int v) { return g.nodes[std::size_t(v)].micros; }
inline const std::vector<int>& op_inputs(const net& g, int v) { return g.nodes[std::size_t(v)].inputs; }
inline const std::vector<int>& op_outputs(const net& g, int v) { return g.nodes[std::size_t(v)].outputs; }
inline const std::string& op_name(const net& g, int v) { return g.nodes[std::size_t(v)].name; }
inline auto tensors(const net& g) { return std::views::iota(0, int(g.values.size())); }
inline memplan::bytes_t tensor_bytes(const net& g, int t) { return g.values[std::size_t(t)].bytes; }
inline memplan::tensor_kind tensor_kind_of(const net& g, int t) { return g.values[std::size_t(t)].kind; }
inline const std::string& tensor_name(const net& g, int t) { return g.values[std::size_t(t)].name; }
}  // namespace fw

template <>
struct boost::graph_traits<fw::net> {
  struct traversal_category : vertex_list_graph_tag, incidence_graph_tag {};
  using vertex_descriptor = int;
  using edge_descriptor = fw::link;
  using directed_category = directed_tag;
  using edge_parallel_category = allow_parallel_edge_tag;
  using vertex_iterator = boost::counting_iterator<int>;
  using out_edge_iterator = std::vector<fw::link>::const_iterator;
  using vertices_size_type = std::size_t;
  using degree_size_type = std::size_t;
};
static_assert(memplan::training_graph<fw::net>);

namespace {
/// "a", 3 -> "a3" (appended: GCC 12 warns falsely on "a" + std::to_string(3), PR 105329).
std::string named(const char* prefix, int i) {
  std::string name = prefix;
  return name.append(std::to_string(i));
}
}  // namespace

int main() {
  fw::net g;
  const auto value = [&](std::string name, long long mib, memplan::tensor_kind kind) {
    g.values.push_back({std::move(name), mib << 20, kind});
    return int(g.values.size()) - 1;
  };
  const auto node = [&](std::string name, bool backward, std::vector<int> in, std::vector<int> out) {
    g.nodes.push_back({std::move(name), backward, backward ? 2000.0 : 1000.0, std::move(in), std::move(out), {}});
  };
  constexpr int layers = 16;
  std::vector<int> a{value("x", 32, memplan::tensor_kind::input)};
  for (int i = 1; i <= layers; ++i) {
    a.push_back(value(named("a", i), 32, memplan::tensor_kind::activation));
    node(named("f", i), false, {a[std::size_t(i - 1)]}, {a.back()});
  }
  int grad = a.back();
  for (int i = layers; i >= 1; --i) {
    const int g_i = value(named("g", i), 32, memplan::tensor_kind::gradient);
    node(named("b", i), true, {grad, a[std::size_t(i - 1)]}, {g_i});
    grad = g_i;
  }
  std::vector<int> made_by(g.values.size(), -1);  // the links: from a value's node to each reader
  for (std::size_t v = 0; v < g.nodes.size(); ++v) {
    for (const int y : g.nodes[v].outputs) made_by[std::size_t(y)] = int(v);
  }
  for (std::size_t v = 0; v < g.nodes.size(); ++v) {
    for (const int x : g.nodes[v].inputs) {
      if (const int u = made_by[std::size_t(x)]; u >= 0) g.nodes[std::size_t(u)].readers.push_back({u, int(v)});
    }
  }

  const memplan::problem p = memplan::compile(g);
  const memplan::device_spec& device = memplan::find_device("titan-rtx");
  const memplan::bytes_t budget = p.baseline_peak() * 6 / 10;
  memplan::plan pl = memplan::checkpoint_planner{}(p, device, budget, {});
  memplan::assign_layout(p, pl, device);
  const memplan::report r = memplan::simulate(p, pl, device, budget);
  const bool valid = memplan::validate(p, pl, device, budget).ok;
  std::printf("%zu ops, unplanned peak %s, budget %s: arena %s, %d recomputes, overhead %.1f %%, valid: %s\n",
              p.num_steps(), memplan::format_bytes(p.baseline_peak()).c_str(), memplan::format_bytes(budget).c_str(),
              memplan::format_bytes(r.peak_bytes).c_str(), int(r.recomputed_ops), 100 * r.overhead,
              valid ? "yes" : "no");
  return r.feasible && valid ? 0 : 1;
}
