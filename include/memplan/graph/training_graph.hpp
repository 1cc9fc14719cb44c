#pragma once
/// \file
/// The `training_graph` concept: a Boost.Graph VertexListGraph +
/// IncidenceGraph (out-edges only: memplan never walks an edge backwards)
/// whose vertices are ops, plus per-op and per-tensor queries. Each query is a customisation point object that tries, in order,
/// `training_graph_traits<G>::q(g, x)`, the member `g.q(x)`, an ADL free
/// function `q(g, x)`, and a default where one makes sense (graph-v2's
/// adapting pattern). Adapting a foreign graph therefore takes a traits
/// specialisation or a few free functions, and copies nothing.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <ranges>
#include <span>
#include <string>
#include <type_traits>

#include <boost/graph/graph_traits.hpp>

#include "memplan/fwd.hpp"
#include "memplan/graph/graph.hpp"
#include "memplan/graph/vocabulary.hpp"

namespace memplan {

/// Specialise to adapt a graph type whose own names differ: each static
/// member `q(const G&, x)` answers query `q`.
template <class G>
struct training_graph_traits {};

// The dispatch shared by every query; `DEFAULT_CONCEPT` is `true`-able when
// a default exists (see MEMPLAN_DETAIL_OPTIONAL_QUERY).
#define MEMPLAN_DETAIL_QUERY_BODY(NAME, HAS_DEFAULT, DEFAULT_CALL)                                      \
  namespace detail::cpo_##NAME {                                                                         \
  void NAME() = delete; /* ordinary lookup stops here; ADL still runs */                                 \
  template <class G, class... X>                                                                         \
  concept by_traits = requires(const G& g, const X&... x) { training_graph_traits<G>::NAME(g, x...); }; \
  template <class G, class... X>                                                                         \
  concept by_member = requires(const G& g, const X&... x) { g.NAME(x...); };                            \
  template <class G, class... X>                                                                         \
  concept by_adl = requires(const G& g, const X&... x) { NAME(g, x...); };                              \
  struct fn {                                                                                            \
    template <class G, class... X>                                                                       \
      requires by_traits<G, X...> || by_member<G, X...> || by_adl<G, X...> || HAS_DEFAULT               \
    constexpr decltype(auto) operator()(const G& g, const X&... x) const {                              \
      if constexpr (by_traits<G, X...>) {                                                                \
        return training_graph_traits<G>::NAME(g, x...);                                                  \
      } else if constexpr (by_member<G, X...>) {                                                         \
        return g.NAME(x...);                                                                             \
      } else if constexpr (by_adl<G, X...>) {                                                            \
        return NAME(g, x...);                                                                            \
      } else {                                                                                           \
        return DEFAULT_CALL;                                                                             \
      }                                                                                                  \
    }                                                                                                    \
  };                                                                                                     \
  }                                                                                                      \
  inline constexpr detail::cpo_##NAME::fn NAME {}

#define MEMPLAN_DETAIL_REQUIRED_QUERY(NAME) MEMPLAN_DETAIL_QUERY_BODY(NAME, false, 0)
#define MEMPLAN_DETAIL_OPTIONAL_QUERY(NAME) \
  MEMPLAN_DETAIL_QUERY_BODY(NAME, (requires(const G& g, const X&... x) { default_##NAME(g, x...); }), \
                            default_##NAME(g, x...))

// Required: what no default can guess.
MEMPLAN_DETAIL_REQUIRED_QUERY(op_phase);      ///< (g, v) -> phase
MEMPLAN_DETAIL_REQUIRED_QUERY(op_time_us);    ///< (g, v) -> double, compute time on the target device
MEMPLAN_DETAIL_REQUIRED_QUERY(op_inputs);     ///< (g, v) -> range of tensor descriptors read
MEMPLAN_DETAIL_REQUIRED_QUERY(op_outputs);    ///< (g, v) -> range of tensor descriptors written
MEMPLAN_DETAIL_REQUIRED_QUERY(tensors);       ///< (g) -> range of every tensor descriptor
MEMPLAN_DETAIL_REQUIRED_QUERY(tensor_bytes);  ///< (g, t) -> bytes
MEMPLAN_DETAIL_REQUIRED_QUERY(tensor_kind_of);  ///< (g, t) -> tensor_kind

// Defaults: DESIGN.md §4's defaults; names fall back to the index.
/// `op_index` where `G` answers none: an integral descriptor is its own
/// index. A graph with other descriptors (an `adjacency_list` over
/// `listS`) answers it, e.g. with `get(boost::vertex_index, g, v)`: a
/// default through the property map would make every includer parse
/// Boost's properties.hpp.
template <class G, class V>
  requires std::is_integral_v<V>
std::size_t default_op_index(const G&, const V& v) { return static_cast<std::size_t>(v); }
/// `tensor_index` where `G` answers none: an integral descriptor is its own index.
template <class G, class T>
  requires std::is_integral_v<T>
std::size_t default_tensor_index(const G&, const T& t) { return static_cast<std::size_t>(t); }
MEMPLAN_DETAIL_OPTIONAL_QUERY(op_index);      ///< (g, v) -> dense op index in [0, num_vertices)
MEMPLAN_DETAIL_OPTIONAL_QUERY(tensor_index);  ///< (g, t) -> dense tensor index in [0, num_tensors)

// Appending (not `"op" + to_string`) sidesteps GCC 12's false -Wrestrict (PR 105329).
/// `op_name` where `G` answers none: "op" and the op's index ("op7").
template <class G, class V>
std::string default_op_name(const G& g, const V& v) {
  std::string name = "op";
  return name.append(std::to_string(op_index(g, v)));
}
/// `op_type` where `G` answers none: empty, a kernel the planners that look (vDNN, SuperNeurons) do not know.
template <class G, class V>
std::string default_op_type(const G&, const V&) { return {}; }
/// `op_workspace_bytes` where `G` answers none: no scratch memory.
template <class G, class V>
bytes_t default_op_workspace_bytes(const G&, const V&) { return 0; }
/// `op_recomputable` where `G` answers none: forward ops only (DESIGN.md §4).
template <class G, class V>
bool default_op_recomputable(const G& g, const V& v) { return default_recomputable(op_phase(g, v)); }
/// `op_split_dims` where `G` answers none: none, so TSPLIT never splits the op.
template <class G, class V>
std::span<const int> default_op_split_dims(const G&, const V&) { return {}; }
/// `tensor_name` where `G` answers none: "t" and the tensor's index ("t12").
template <class G, class T>
std::string default_tensor_name(const G& g, const T& t) {
  std::string name = "t";
  return name.append(std::to_string(tensor_index(g, t)));
}
/// `num_tensors` where `G` answers none: the length of `tensors(g)`.
template <class G>
std::size_t default_num_tensors(const G& g) { return static_cast<std::size_t>(std::ranges::distance(tensors(g))); }
/// `tensor_shape` where `G` answers none: empty, unknown.
template <class G, class T>
std::span<const std::int64_t> default_tensor_shape(const G&, const T&) { return {}; }

MEMPLAN_DETAIL_OPTIONAL_QUERY(op_name);             ///< (g, v) -> string
MEMPLAN_DETAIL_OPTIONAL_QUERY(op_type);             ///< (g, v) -> string ("conv2d", "relu", ...)
MEMPLAN_DETAIL_OPTIONAL_QUERY(op_workspace_bytes);  ///< (g, v) -> bytes of scratch memory
MEMPLAN_DETAIL_OPTIONAL_QUERY(op_recomputable);     ///< (g, v) -> bool
MEMPLAN_DETAIL_OPTIONAL_QUERY(op_split_dims);       ///< (g, v) -> range of int
MEMPLAN_DETAIL_OPTIONAL_QUERY(tensor_name);         ///< (g, t) -> string
MEMPLAN_DETAIL_OPTIONAL_QUERY(num_tensors);         ///< (g) -> count
MEMPLAN_DETAIL_OPTIONAL_QUERY(tensor_shape);        ///< (g, t) -> range of int64, outermost first; empty: unknown

#undef MEMPLAN_DETAIL_OPTIONAL_QUERY
#undef MEMPLAN_DETAIL_REQUIRED_QUERY
#undef MEMPLAN_DETAIL_QUERY_BODY

/// What names an op of `G`: its Boost.Graph vertex descriptor.
template <class G>
using op_descriptor_t = typename boost::graph_traits<G>::vertex_descriptor;
/// What names a tensor of `G`: the element type of `tensors(g)`.
template <class G>
using tensor_descriptor_t = std::ranges::range_value_t<decltype(tensors(std::declval<const G&>()))>;

/// A graph whose vertices are the ops of one training iteration.
template <class G>
concept training_graph =
    std::derived_from<typename boost::graph_traits<G>::traversal_category, boost::vertex_list_graph_tag> &&
    std::derived_from<typename boost::graph_traits<G>::traversal_category, boost::incidence_graph_tag> &&
    requires(const G& g, op_descriptor_t<G> v, typename boost::graph_traits<G>::edge_descriptor e) {
      vertices(g);
      { num_vertices(g) } -> std::convertible_to<std::size_t>;
      out_edges(v, g);
      { source(e, g) } -> std::convertible_to<op_descriptor_t<G>>;
      { target(e, g) } -> std::convertible_to<op_descriptor_t<G>>;
      { memplan::op_index(g, v) } -> std::convertible_to<std::size_t>;
      { memplan::op_phase(g, v) } -> std::convertible_to<phase>;
      { memplan::op_time_us(g, v) } -> std::convertible_to<double>;
      { memplan::op_workspace_bytes(g, v) } -> std::convertible_to<bytes_t>;
      { memplan::op_recomputable(g, v) } -> std::convertible_to<bool>;
      { memplan::op_name(g, v) } -> std::convertible_to<std::string>;
      { memplan::op_type(g, v) } -> std::convertible_to<std::string>;
      { memplan::op_inputs(g, v) } -> std::ranges::input_range;
      { memplan::op_outputs(g, v) } -> std::ranges::input_range;
      { memplan::op_split_dims(g, v) } -> std::ranges::input_range;
      { memplan::tensors(g) } -> std::ranges::input_range;
      { memplan::num_tensors(g) } -> std::convertible_to<std::size_t>;
    } &&
    requires(const G& g, tensor_descriptor_t<G> t) {
      { memplan::tensor_index(g, t) } -> std::convertible_to<std::size_t>;
      { memplan::tensor_bytes(g, t) } -> std::convertible_to<bytes_t>;
      { memplan::tensor_kind_of(g, t) } -> std::convertible_to<tensor_kind>;
      { memplan::tensor_name(g, t) } -> std::convertible_to<std::string>;
      { memplan::tensor_shape(g, t) } -> std::ranges::input_range;
    };

/// memplan::graph answers every query from its own vectors.
template <>
struct training_graph_traits<graph> {
  static phase op_phase(const graph& g, index_t v) { return g.op(v).phase; }  ///< op_info::phase
  static double op_time_us(const graph& g, index_t v) { return g.op(v).time_us; }  ///< op_info::time_us
  /// op_info::inputs
  static const std::vector<index_t>& op_inputs(const graph& g, index_t v) { return g.op(v).inputs; }
  /// op_info::outputs
  static const std::vector<index_t>& op_outputs(const graph& g, index_t v) { return g.op(v).outputs; }
  static const std::string& op_name(const graph& g, index_t v) { return g.op(v).name; }  ///< op_info::name
  static const std::string& op_type(const graph& g, index_t v) { return g.op(v).type; }  ///< op_info::type
  /// op_info::workspace_bytes
  static bytes_t op_workspace_bytes(const graph& g, index_t v) { return g.op(v).workspace_bytes; }
  /// op_info::recomputable
  static bool op_recomputable(const graph& g, index_t v) { return g.op(v).recomputable; }
  /// op_info::split_dims
  static const std::vector<int>& op_split_dims(const graph& g, index_t v) { return g.op(v).split_dims; }
  /// The dense indices 0 .. num_tensors()-1.
  static auto tensors(const graph& g) { return std::views::iota(index_t{0}, static_cast<index_t>(g.num_tensors())); }
  static bytes_t tensor_bytes(const graph& g, index_t t) { return g.tensor(t).bytes; }  ///< tensor_info::bytes
  static tensor_kind tensor_kind_of(const graph& g, index_t t) { return g.tensor(t).kind; }  ///< tensor_info::kind
  /// tensor_info::name
  static const std::string& tensor_name(const graph& g, index_t t) { return g.tensor(t).name; }
  /// tensor_info::shape
  static const std::vector<std::int64_t>& tensor_shape(const graph& g, index_t t) { return g.tensor(t).shape; }
};

static_assert(training_graph<graph>);

}  // namespace memplan
