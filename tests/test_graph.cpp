// The training_graph concept on memplan::graph and on two foreign graphs,
// the schedules, and the compiled problem.

#include <doctest/doctest.h>

#include <ranges>
#include <string>
#include <vector>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/graph_concepts.hpp>
#include <boost/graph/topological_sort.hpp>

#include "memplan/compile.hpp"
#include "memplan/problem.hpp"

using namespace memplan;

namespace {

tensor_info tensor(std::string name, bytes_t bytes, tensor_kind kind) {
  tensor_info t;
  t.name = std::move(name);
  t.bytes = bytes;
  t.kind = kind;
  return t;
}

op_info op(std::string name, phase ph, double time_us, std::vector<index_t> in, std::vector<index_t> out) {
  op_info o;
  o.name = std::move(name);
  o.phase = ph;
  o.time_us = time_us;
  o.inputs = std::move(in);
  o.outputs = std::move(out);
  o.recomputable = default_recomputable(ph);
  return o;
}

/// x -> f1 -> a -> f2 -> b ; b -> b2 (grad) ; b2,a -> g1 -> gx with a weight
/// w read by f1 and g1. Bytes chosen so every live set has a distinct sum.
graph small_training_graph() {
  graph g("small");
  const index_t x = g.add_tensor(tensor("x", 100, tensor_kind::input));
  const index_t w = g.add_tensor(tensor("w", 10, tensor_kind::parameter));
  const index_t a = g.add_tensor(tensor("a", 1000, tensor_kind::activation));
  const index_t b = g.add_tensor(tensor("b", 2000, tensor_kind::activation));
  const index_t db = g.add_tensor(tensor("db", 2000, tensor_kind::gradient));
  const index_t dw = g.add_tensor(tensor("dw", 10, tensor_kind::parameter_gradient));
  g.add_op(op("f1", phase::forward, 5, {x, w}, {a}));
  g.add_op(op("f2", phase::forward, 7, {a}, {b}));
  g.add_op(op("loss_grad", phase::backward, 1, {b}, {db}));
  auto g1 = op("g1", phase::backward, 11, {db, a, x}, {dw});
  g1.workspace_bytes = 300;
  g.add_op(g1);
  return g;
}

}  // namespace

TEST_CASE("memplan::graph records edges both ways and models Boost's concepts") {
  BOOST_CONCEPT_ASSERT((boost::VertexListGraphConcept<graph>));
  BOOST_CONCEPT_ASSERT((boost::BidirectionalGraphConcept<graph>));
  static_assert(training_graph<graph>);
  const graph g = small_training_graph();
  CHECK(num_vertices(g) == 4);
  // f1 -> f2 (a), f1 -> g1 (a), f2 -> loss_grad (b), loss_grad -> g1 (db).
  CHECK(out_degree(0, g) == 2);
  CHECK(in_degree(3, g) == 2);
  CHECK(g.producer(2) == 0);
  CHECK(g.consumers(2) == std::vector<index_t>{1, 3});
  CHECK(op_recomputable(g, index_t{0}));
  CHECK_FALSE(op_recomputable(g, index_t{3}));
}

TEST_CASE("memplan::graph rejects a second producer, unknown tensors and negative sizes") {
  graph g = small_training_graph();
  CHECK_THROWS_WITH_AS(g.add_op(op("again", phase::forward, 1, {0}, {2})),
                       "tensor 'a' has two producers: op 'f1' and op 'again'", invalid_graph);
  CHECK_THROWS_WITH_AS(g.add_op(op("lost", phase::forward, 1, {42}, {})),
                       "op 'lost': inputs names tensor index 42, but the graph has 6 tensors", invalid_graph);
  CHECK_THROWS_AS(g.add_tensor(tensor("neg", -1, tensor_kind::activation)), invalid_graph);
  CHECK_THROWS_AS(g.add_op(op("slow", phase::forward, -2, {}, {})), invalid_graph);
  CHECK(g.num_ops() == 4);  // nothing half-added
}

TEST_CASE("schedules: TSPLIT Algo 1 descends depth first, Kahn keeps index order") {
  // Diamond plus a tail: 0 -> {1, 3}; 1 -> 2; {2, 3} -> 4. DFS from 0 goes
  // 0, 1, 2 (deep first), then 3, then 4 once both its producers are out.
  graph g("diamond");
  std::vector<index_t> t;
  for (int i = 0; i < 5; ++i) t.push_back(g.add_tensor(tensor(std::string("t").append(std::to_string(i)), 1, tensor_kind::activation)));
  g.add_op(op("o0", phase::forward, 1, {}, {t[0]}));
  g.add_op(op("o3", phase::forward, 1, {t[0]}, {t[3]}));
  g.add_op(op("o1", phase::forward, 1, {t[0]}, {t[1]}));
  g.add_op(op("o4", phase::forward, 1, {t[2], t[3]}, {t[4]}));
  g.add_op(op("o2", phase::forward, 1, {t[1]}, {t[2]}));
  // Out-edges of o0 in insertion order: o3 then o1.
  CHECK(dfs_schedule(g) == schedule{0, 1, 2, 4, 3});
  CHECK(topological_schedule(g) == schedule{0, 1, 2, 4, 3});
  // Index order when it is already valid.
  const graph s = small_training_graph();
  CHECK(topological_schedule(s) == schedule{0, 1, 2, 3});
  CHECK(dfs_schedule(s) == schedule{0, 1, 2, 3});
}

TEST_CASE("schedules reject cycles, compile rejects non-topological orders") {
  graph g("cycle");
  const index_t a = g.add_tensor(tensor("a", 1, tensor_kind::activation));
  const index_t b = g.add_tensor(tensor("b", 1, tensor_kind::activation));
  g.add_op(op("p", phase::forward, 1, {b}, {a}));
  g.add_op(op("q", phase::forward, 1, {a}, {b}));
  CHECK_THROWS_WITH_AS(dfs_schedule(g), "the graph has a cycle through op 'p': no topological schedule exists",
                       invalid_graph);
  CHECK_THROWS_AS(topological_schedule(g), invalid_graph);

  const graph s = small_training_graph();
  CHECK_THROWS_WITH_AS(compile(s, schedule{1, 0, 2, 3}),
                       "schedule: op 'f2' at position 0 reads tensor 'a' before op 'f1' at position 1 produces it: "
                       "the order is not topological",
                       invalid_graph);
  CHECK_THROWS_WITH_AS(compile(s, schedule{0, 1, 1, 3}), "schedule[2]: op 'f2' is listed twice", invalid_graph);
  CHECK_THROWS_WITH_AS(compile(s, schedule{0, 1, 2}), "schedule: lists 3 ops, but the graph has 4", invalid_graph);
}

TEST_CASE("problem: flat arrays and the baseline peak by DESIGN §4's liveness rule") {
  const problem p = compile(small_training_graph(), schedule{0, 1, 2, 3});
  REQUIRE(p.num_steps() == 4);
  CHECK(p.use_steps == std::vector<index_t>{0, 3, 0, 1, 3, 2, 3});  // x: 0,3  w: 0  a: 1,3  b: 2  db: 3
  CHECK(p.last_use == std::vector<index_t>{3, 0, 3, 2, 3, no_index});
  CHECK(p.producer == std::vector<index_t>{no_index, no_index, 0, 1, 2, 3});
  // Live per step (x=100 w=10 a=1000 b=2000 db=2000 dw=10, w persistent):
  // step 0: x w a               = 1110
  // step 1: x w a b             = 3110
  // step 2: x w a b db          = 5110
  // step 3: x w a db dw + 300 ws = 3420   (b died after step 2)
  CHECK(p.baseline_memory() == std::vector<bytes_t>{1110, 3110, 5110, 3420});
  CHECK(p.baseline_peak() == 5110);
  CHECK(p.baseline_time_us() == doctest::Approx(24.0));
}

TEST_CASE("problem::batch: the largest leading dimension of the inputs' shapes, 0 where none is known") {
  CHECK(compile(small_training_graph(), schedule{0, 1, 2, 3}).batch == 0);  // no shapes
  // Tokens [32, 128], position ids [1, 128] broadcast over the batch,
  // labels [32]; a parameter's leading dimension does not count.
  graph g = small_training_graph();
  g.add_tensor({.id = 6, .name = "positions", .bytes = 512, .kind = tensor_kind::input, .shape = {1, 128}, .dtype = {}});
  g.add_tensor({.id = 7, .name = "labels", .bytes = 128, .kind = tensor_kind::input, .shape = {32}, .dtype = {}});
  g.add_tensor({.id = 8, .name = "table", .bytes = 512, .kind = tensor_kind::parameter, .shape = {64, 2}, .dtype = {}});
  CHECK(compile(g, schedule{0, 1, 2, 3}).batch == 32);
}

TEST_CASE("compile rejects byte totals past 2^63 - 1") {
  graph g("huge");
  const bytes_t big = bytes_t{1} << 62;
  g.add_tensor(tensor("a", big, tensor_kind::parameter));
  g.add_tensor(tensor("b", big, tensor_kind::parameter));
  g.add_op(op("o", phase::forward, 1, {0, 1}, {}));
  CHECK_THROWS_WITH_AS(compile(g), "tensor 'b': the graph's bytes add up to more than 2^63 - 1", invalid_graph);
  graph h("large");  // 10^15-byte tensors are fine
  h.add_tensor(tensor("a", 1'000'000'000'000'000, tensor_kind::activation));
  h.add_op(op("o", phase::forward, 1, {0}, {}));
  CHECK(compile(h).baseline_peak() == 1'000'000'000'000'000);
}

// ---- Adapting a user's boost::adjacency_list with bundled properties ----

namespace user {
struct layer {
  std::string label;
  double micros = 0;
  bool backward = false;
  std::vector<int> reads;   // buffer ids
  std::vector<int> writes;  // buffer ids
};
struct buffer {
  long long size = 0;
  bool weight = false;
};
struct model {
  boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, layer> net;
  std::vector<buffer> buffers;
};
}  // namespace user

// A user's adjacency_list is adapted with a traits specialisation; the
// Boost interface is the adjacency_list's own.
template <>
struct memplan::training_graph_traits<user::model> {
  static phase op_phase(const user::model& m, std::size_t v) {
    return m.net[v].backward ? phase::backward : phase::forward;
  }
  static double op_time_us(const user::model& m, std::size_t v) { return m.net[v].micros; }
  static const std::vector<int>& op_inputs(const user::model& m, std::size_t v) { return m.net[v].reads; }
  static const std::vector<int>& op_outputs(const user::model& m, std::size_t v) { return m.net[v].writes; }
  static const std::string& op_name(const user::model& m, std::size_t v) { return m.net[v].label; }
  static auto tensors(const user::model& m) { return std::views::iota(0, static_cast<int>(m.buffers.size())); }
  static bytes_t tensor_bytes(const user::model& m, int t) { return m.buffers[static_cast<std::size_t>(t)].size; }
  static tensor_kind tensor_kind_of(const user::model& m, int t) {
    return m.buffers[static_cast<std::size_t>(t)].weight ? tensor_kind::parameter : tensor_kind::activation;
  }
};
// The model forwards Boost's interface to its adjacency_list.
namespace boost {
template <>
struct graph_traits<user::model> : graph_traits<decltype(user::model::net)> {};
}  // namespace boost
namespace user {
/// The user's models hold their adjacency_list in `net`.
template <class M>
concept holds_net = requires(const M& m) { m.net; };
template <holds_net M>
using vertex_of = typename boost::graph_traits<M>::vertex_descriptor;
template <holds_net M>
auto vertices(const M& m) { return boost::vertices(m.net); }
template <holds_net M>
auto num_vertices(const M& m) { return boost::num_vertices(m.net); }
template <holds_net M>
auto out_edges(vertex_of<M> v, const M& m) { return boost::out_edges(v, m.net); }
template <holds_net M>
auto in_edges(vertex_of<M> v, const M& m) { return boost::in_edges(v, m.net); }
template <holds_net M>
auto out_degree(vertex_of<M> v, const M& m) { return boost::out_degree(v, m.net); }
template <holds_net M>
auto in_degree(vertex_of<M> v, const M& m) { return boost::in_degree(v, m.net); }
template <class E, holds_net M>
auto source(const E& e, const M& m) { return boost::source(e, m.net); }
template <class E, holds_net M>
auto target(const E& e, const M& m) { return boost::target(e, m.net); }
}  // namespace user

static_assert(memplan::training_graph<user::model>);

TEST_CASE("a user's boost::adjacency_list adapts through traits without copying") {
  user::model m;
  m.buffers = {{400, false}, {40, true}, {800, false}, {400, false}};
  using boost::add_edge;
  using boost::add_vertex;
  const auto fwd = add_vertex(user::layer{"fc", 3, false, {0, 1}, {2}}, m.net);
  const auto bwd = add_vertex(user::layer{"fc_grad", 6, true, {2, 1}, {3}}, m.net);
  add_edge(fwd, bwd, m.net);
  // Boost's own algorithms run on the adjacency list as usual.
  std::vector<std::size_t> order;
  boost::topological_sort(m.net, std::back_inserter(order));
  CHECK(order.size() == 2);

  CHECK(memplan::op_name(m, fwd) == "fc");
  CHECK(memplan::op_type(m, fwd).empty());         // default
  CHECK(memplan::op_workspace_bytes(m, fwd) == 0);  // default
  CHECK_FALSE(memplan::op_recomputable(m, bwd));    // default from the phase
  const problem p = compile(m, dfs_schedule(m));
  CHECK(p.op_name == std::vector<std::string>{"fc", "fc_grad"});
  CHECK(p.batch == 0);  // no tensor_shape query (optional): the batch is unknown
  // step 0: x w y = 1240; step 1: w y dy = 1240 + 400 - 400 (x died) = 1240.
  CHECK(p.baseline_memory() == std::vector<bytes_t>{1240, 1240});
  CHECK(p.baseline_time_us() == doctest::Approx(9.0));
}

// ---- Vertex descriptors that are not indices: the graph answers op_index ----

namespace user {
/// An adjacency_list over listS (vertex descriptors are pointers) whose
/// layers live beside it, indexed by the graph's vertex_index property.
struct listed_model {
  boost::adjacency_list<boost::listS, boost::listS, boost::directedS, boost::property<boost::vertex_index_t, std::size_t>>
      net;
  std::vector<layer> layers;
  std::vector<buffer> buffers;
};
using listed_vertex = boost::graph_traits<decltype(listed_model::net)>::vertex_descriptor;
}  // namespace user

template <>
struct memplan::training_graph_traits<user::listed_model> {
  // No default maps a pointer descriptor to an index: the graph says it.
  static std::size_t op_index(const user::listed_model& m, user::listed_vertex v) {
    return get(boost::vertex_index, m.net, v);
  }
  static const user::layer& at(const user::listed_model& m, user::listed_vertex v) { return m.layers[op_index(m, v)]; }
  static phase op_phase(const user::listed_model& m, user::listed_vertex v) {
    return at(m, v).backward ? phase::backward : phase::forward;
  }
  static double op_time_us(const user::listed_model& m, user::listed_vertex v) { return at(m, v).micros; }
  static const std::vector<int>& op_inputs(const user::listed_model& m, user::listed_vertex v) { return at(m, v).reads; }
  static const std::vector<int>& op_outputs(const user::listed_model& m, user::listed_vertex v) {
    return at(m, v).writes;
  }
  static const std::string& op_name(const user::listed_model& m, user::listed_vertex v) { return at(m, v).label; }
  static auto tensors(const user::listed_model& m) { return std::views::iota(0, static_cast<int>(m.buffers.size())); }
  static bytes_t tensor_bytes(const user::listed_model& m, int t) {
    return m.buffers[static_cast<std::size_t>(t)].size;
  }
  static tensor_kind tensor_kind_of(const user::listed_model&, int) { return tensor_kind::activation; }
};
namespace boost {
template <>
struct graph_traits<user::listed_model> : graph_traits<decltype(user::listed_model::net)> {};
}  // namespace boost
static_assert(memplan::training_graph<user::listed_model>);

TEST_CASE("a graph with pointer vertex descriptors compiles through the op_index it answers") {
  user::listed_model m;
  m.buffers = {{400, false}, {800, false}, {400, false}};
  m.layers = {{"fc_grad", 6, true, {1}, {2}}, {"fc", 3, false, {0}, {1}}};  // by vertex_index
  const auto bwd = boost::add_vertex(m.net);
  const auto fwd = boost::add_vertex(m.net);
  put(boost::vertex_index, m.net, bwd, 0);
  put(boost::vertex_index, m.net, fwd, 1);
  boost::add_edge(fwd, bwd, m.net);
  const problem p = compile(m);
  CHECK(p.op_name == std::vector<std::string>{"fc", "fc_grad"});
  CHECK(p.op == std::vector<index_t>{1, 0});  // graph op indices: the vertex_index values
  CHECK(p.producer == std::vector<index_t>{no_index, 0, 1});
  // step 0: x y = 1200; step 1: y dy = 800 + 400 (x died after step 0) = 1200.
  CHECK(p.baseline_memory() == std::vector<bytes_t>{1200, 1200});
}

// ---- Adapting a framework-style struct with member functions and ADL ----

namespace framework {
struct node {
  const char* kind;
  float ms;
  std::vector<unsigned> in_ids, out_ids;
  std::vector<unsigned> succ, pred;  // op indices
};
struct edge_ref {
  unsigned from, to;
};
/// A framework's own graph: members answer memplan's queries by their
/// memplan names; Boost's interface comes from free functions (ADL).
struct program {
  std::vector<node> nodes;
  std::vector<std::size_t> sizes;
  // memplan queries as members (priority after traits).
  phase op_phase(unsigned v) const { return nodes[v].ms < 0 ? phase::backward : phase::forward; }
  double op_time_us(unsigned v) const { return 1000.0 * (nodes[v].ms < 0 ? -nodes[v].ms : nodes[v].ms); }
  const std::vector<unsigned>& op_inputs(unsigned v) const { return nodes[v].in_ids; }
  const std::vector<unsigned>& op_outputs(unsigned v) const { return nodes[v].out_ids; }
  std::string op_type(unsigned v) const { return nodes[v].kind; }
  auto tensors() const { return std::views::iota(0u, static_cast<unsigned>(sizes.size())); }
  bytes_t tensor_bytes(unsigned t) const { return static_cast<bytes_t>(sizes[t]); }
  tensor_kind tensor_kind_of(unsigned) const { return tensor_kind::activation; }
};

template <bool Out>
struct edge_iterator {
  using iterator_category = std::forward_iterator_tag;
  using value_type = edge_ref;
  using difference_type = std::ptrdiff_t;
  using pointer = void;
  using reference = edge_ref;
  const node* n = nullptr;
  unsigned self = 0;
  std::size_t i = 0;
  edge_ref operator*() const {
    return Out ? edge_ref{self, n->succ[i]} : edge_ref{n->pred[i], self};
  }
  edge_iterator& operator++() { ++i; return *this; }
  edge_iterator operator++(int) { auto c = *this; ++i; return c; }
  bool operator==(const edge_iterator& o) const { return i == o.i; }
};
inline auto vertices(const program& p) {
  using it = boost::counting_iterator<unsigned>;
  return std::pair{it{0}, it{static_cast<unsigned>(p.nodes.size())}};
}
inline std::size_t num_vertices(const program& p) { return p.nodes.size(); }
inline auto out_edges(unsigned v, const program& p) {
  const node& n = p.nodes[v];
  return std::pair{edge_iterator<true>{&n, v, 0}, edge_iterator<true>{&n, v, n.succ.size()}};
}
inline auto in_edges(unsigned v, const program& p) {
  const node& n = p.nodes[v];
  return std::pair{edge_iterator<false>{&n, v, 0}, edge_iterator<false>{&n, v, n.pred.size()}};
}
inline std::size_t out_degree(unsigned v, const program& p) { return p.nodes[v].succ.size(); }
inline std::size_t in_degree(unsigned v, const program& p) { return p.nodes[v].pred.size(); }
inline unsigned source(edge_ref e, const program&) { return e.from; }
inline unsigned target(edge_ref e, const program&) { return e.to; }
}  // namespace framework

namespace boost {
template <>
struct graph_traits<framework::program> {
  struct traversal_category : vertex_list_graph_tag, bidirectional_graph_tag {};
  using vertex_descriptor = unsigned;
  using edge_descriptor = framework::edge_ref;
  using directed_category = bidirectional_tag;
  using edge_parallel_category = allow_parallel_edge_tag;
  using vertex_iterator = counting_iterator<unsigned>;
  using out_edge_iterator = framework::edge_iterator<true>;
  using in_edge_iterator = framework::edge_iterator<false>;
  using vertices_size_type = std::size_t;
  using edges_size_type = std::size_t;
  using degree_size_type = std::size_t;
};
}  // namespace boost

static_assert(memplan::training_graph<framework::program>);

TEST_CASE("a framework-style struct adapts through members and ADL free functions") {
  // conv (2 ms) -> relu (0.5 ms) -> relu_grad (-0.5 = backward) reading both.
  framework::program prog;
  prog.sizes = {64, 128, 128, 128};
  prog.nodes = {{"conv2d", 2.0f, {0}, {1}, {1, 2}, {}},
                {"relu", 0.5f, {1}, {2}, {2}, {0}},
                {"relu_grad", -0.5f, {1, 2}, {3}, {}, {0, 1}}};
  const problem p = compile(prog, topological_schedule(prog));
  CHECK(p.op_type == std::vector<std::string>{"conv2d", "relu", "relu_grad"});
  CHECK(p.op_name == std::vector<std::string>{"op0", "op1", "op2"});  // default names
  CHECK(p.op_phase[2] == phase::backward);
  CHECK(p.time_us[0] == doctest::Approx(2000.0));
  // step 0: 64 + 128; step 1: 128 + 128 (input 64 died); step 2: 128 + 128 + 128.
  CHECK(p.baseline_memory() == std::vector<bytes_t>{192, 256, 384});
}
