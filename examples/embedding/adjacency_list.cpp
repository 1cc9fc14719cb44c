// Adapting a boost::adjacency_list. A framework keeps its training graph as a
// Boost graph: ops are vertices with bundled properties, and the buffers sit
// in the graph's own bundle. One traits specialisation makes it a
// memplan::training_graph; nothing is copied until `compile`. This builds
// an eight-layer step, plans it with SuperNeurons at 60 % of its unplanned peak
// through the core header alone, and checks the plan.
//   adjacency_list   (exit 0: the plan fits and passes the validator)
#include <cstdio>
#include <map>
#include <ranges>
#include <string>
#include <utility>
#include <vector>

#include <boost/graph/adjacency_list.hpp>
#include <memplan/memplan.hpp>

namespace framework {
struct layer {
  std::string name;
  bool backward = false;
  double micros = 0;
  std::vector<int> reads, writes;  // buffer ids
};
struct buffer {
  std::string name;
  long long bytes = 0;
  memplan::tensor_kind kind = memplan::tensor_kind::activation;
};
struct buffers {
  std::vector<buffer> all;
};
using net = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, layer, boost::no_property, buffers>;
}  // namespace framework

template <>
struct memplan::training_graph_traits<framework::net> {
  using net = framework::net;
  static const framework::buffer& of(const net& g, int t) { return g[boost::graph_bundle].all[std::size_t(t)]; }
  static phase op_phase(const net& g, std::size_t v) { return g[v].backward ? phase::backward : phase::forward; }
  static double op_time_us(const net& g, std::size_t v) { return g[v].micros; }
  static const std::vector<int>& op_inputs(const net& g, std::size_t v) { return g[v].reads; }
  static const std::vector<int>& op_outputs(const net& g, std::size_t v) { return g[v].writes; }
  static const std::string& op_name(const net& g, std::size_t v) { return g[v].name; }
  static auto tensors(const net& g) { return std::views::iota(0, int(g[boost::graph_bundle].all.size())); }
  static bytes_t tensor_bytes(const net& g, int t) { return of(g, t).bytes; }
  static tensor_kind tensor_kind_of(const net& g, int t) { return of(g, t).kind; }
  static const std::string& tensor_name(const net& g, int t) { return of(g, t).name; }
};
static_assert(memplan::training_graph<framework::net>);

int main() {
  using memplan::tensor_kind;
  framework::net g;
  auto& all = g[boost::graph_bundle].all;
  const auto buffer = [&](std::string name, long long mib, tensor_kind kind) {
    all.push_back({std::move(name), mib << 20, kind});
    return int(all.size()) - 1;
  };
  constexpr int layers = 8;
  const int x = buffer("x", 64, tensor_kind::input);
  std::vector<int> w(layers + 1), a(layers + 1, x), dw(layers + 1), grad(layers + 1);  // grad[i]: of a[i]
  for (int i = 1; i <= layers; ++i) {
    const std::string n = std::to_string(i);
    w[i] = buffer("w" + n, 4, tensor_kind::parameter);
    a[i] = buffer("a" + n, 64, tensor_kind::activation);
    dw[i] = buffer("dw" + n, 4, tensor_kind::parameter_gradient);
    grad[i] = buffer("g" + n, 64, tensor_kind::gradient);
  }
  const auto op = [&](std::string name, bool backward, std::vector<int> reads, std::vector<int> writes) {
    boost::add_vertex({std::move(name), backward, backward ? 4000.0 : 2000.0, std::move(reads), std::move(writes)}, g);
  };
  for (int i = 1; i <= layers; ++i) op("fc" + std::to_string(i), false, {a[i - 1], w[i]}, {a[i]});
  op("loss", true, {a[layers]}, {grad[layers]});
  for (int i = layers; i >= 1; --i) {
    std::vector<int> out{dw[i]};
    if (i > 1) out.push_back(grad[i - 1]);
    op("fc" + std::to_string(i) + ".backward", true, {grad[i], a[i - 1], w[i]}, std::move(out));
  }
  std::map<int, std::size_t> maker;  // edges: each op after the ops whose buffers it reads
  for (std::size_t v = 0; v < boost::num_vertices(g); ++v) {
    for (const int t : g[v].writes) maker[t] = v;
  }
  for (std::size_t v = 0; v < boost::num_vertices(g); ++v) {
    for (const int t : g[v].reads) {
      if (maker.contains(t)) boost::add_edge(maker[t], v, g);
    }
  }

  const memplan::problem p = memplan::compile(g);
  const memplan::device_spec& device = memplan::find_device("titan-rtx");
  const memplan::bytes_t budget = p.baseline_peak() * 6 / 10;
  memplan::plan pl = memplan::superneurons_planner{}(p, device, budget, {});
  memplan::assign_layout(p, pl, device);
  const memplan::report r = memplan::simulate(p, pl, device, budget);
  const memplan::validation v = memplan::validate(p, pl, device, budget);
  std::printf("%zu ops, unplanned peak %s, budget %s: arena %s, %s swapped out, overhead %.1f %%, valid: %s\n",
              p.num_steps(), memplan::format_bytes(p.baseline_peak()).c_str(), memplan::format_bytes(budget).c_str(),
              memplan::format_bytes(r.peak_bytes).c_str(), memplan::format_bytes(r.swapped_out_bytes).c_str(),
              100 * r.overhead, v.ok ? "yes" : v.errors.front().c_str());
  return r.feasible && v.ok ? 0 : 1;
}
