#pragma once
/// \file
/// Schedules: total orders of a training graph's ops. A schedule is a vector
/// of dense op indices (`op_index`): TSPLIT's DFS order, a stable
/// topological order, or any order given by the caller (recorded from a
/// real run, read from a file), which `compile` checks.

#include <cstddef>
#include <functional>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include "memplan/error.hpp"
#include "memplan/graph/training_graph.hpp"

namespace memplan {

/// A total order of a graph's ops: step s runs op `schedule[s]` (a dense op index).
using schedule = std::vector<index_t>;

namespace detail {

/// The descriptor of every op, indexed by `op_index`.
template <training_graph G>
std::vector<op_descriptor_t<G>> descriptors_by_index(const G& g) {
  std::vector<op_descriptor_t<G>> by_index(num_vertices(g));
  auto [first, last] = vertices(g);
  for (; first != last; ++first) {
    const std::size_t i = op_index(g, *first);
    MEMPLAN_EXPECTS(i < by_index.size(), invalid_graph, "op '", std::string(op_name(g, *first)), "': op_index ", i,
                    " is outside [0, ", by_index.size(), ")");
    by_index[i] = *first;
  }
  return by_index;
}

/// Each op's count of incoming edges (by op index), from the out-edges: the
/// concept asks for an IncidenceGraph, not a BidirectionalGraph.
template <training_graph G>
std::vector<std::size_t> in_degrees(const G& g, const std::vector<op_descriptor_t<G>>& by_index) {
  std::vector<std::size_t> count(by_index.size(), 0);
  for (const auto& v : by_index) {
    auto [first, last] = out_edges(v, g);
    for (; first != last; ++first) ++count[op_index(g, target(*first, g))];
  }
  return count;
}

/// Names the ops left unscheduled because they sit on a cycle.
template <training_graph G>
[[noreturn]] void throw_cycle(const G& g, const std::vector<op_descriptor_t<G>>& by_index,
                              const std::vector<std::size_t>& pending) {
  for (std::size_t i = 0; i < pending.size(); ++i) {
    if (pending[i] != 0) {
      throw invalid_graph(concat("the graph has a cycle through op '", std::string(op_name(g, by_index[i])),
                                 "': no topological schedule exists"));
    }
  }
  throw invalid_graph("the graph has a cycle: no topological schedule exists");
}

}  // namespace detail

/// TSPLIT Algo 1: topological sort in DFS manner. Each op is pushed when the
/// last of its producers has been pushed (`ref_cnt` reaches 0, lines 4-7),
/// and the walk descends into it at once, so a layer's consumers follow it
/// as closely as the dependencies allow. Roots are taken in index order;
/// the recursion is an explicit stack, so 100,000-op chains are fine.
/// \throws invalid_graph if the graph has a cycle.
template <training_graph G>
schedule dfs_schedule(const G& g) {
  const auto by_index = detail::descriptors_by_index(g);
  const std::size_t n = by_index.size();
  std::vector<std::size_t> ref_cnt = detail::in_degrees(g, by_index);
  schedule order;
  order.reserve(n);
  using out_iter = typename boost::graph_traits<G>::out_edge_iterator;
  std::vector<std::pair<out_iter, out_iter>> stack;
  const auto visit = [&](std::size_t i) {
    order.push_back(static_cast<index_t>(i));  // line 3: O.push(layer)
    auto [first, last] = out_edges(by_index[i], g);
    stack.emplace_back(first, last);
  };
  std::vector<std::size_t> roots;
  for (std::size_t i = 0; i < n; ++i) {
    if (ref_cnt[i] == 0) roots.push_back(i);
  }
  for (const std::size_t root : roots) {
    visit(root);
    while (!stack.empty()) {
      auto& [it, last] = stack.back();
      if (it == last) {
        stack.pop_back();
        continue;
      }
      const std::size_t next = op_index(g, target(*it, g));
      ++it;
      if (--ref_cnt[next] == 0) visit(next);  // lines 5-7
    }
  }
  if (order.size() != n) detail::throw_cycle(g, by_index, ref_cnt);
  return order;
}

/// A topological order that keeps index order wherever the dependencies
/// allow (Kahn's algorithm with the smallest ready index first), so a graph
/// whose ops are listed in a valid order is scheduled in exactly that order.
/// \throws invalid_graph if the graph has a cycle.
template <training_graph G>
schedule topological_schedule(const G& g) {
  const auto by_index = detail::descriptors_by_index(g);
  const std::size_t n = by_index.size();
  std::vector<std::size_t> pending = detail::in_degrees(g, by_index);
  std::priority_queue<index_t, std::vector<index_t>, std::greater<>> ready;
  for (std::size_t i = 0; i < n; ++i) {
    if (pending[i] == 0) ready.push(static_cast<index_t>(i));
  }
  schedule order;
  order.reserve(n);
  while (!ready.empty()) {
    const index_t i = ready.top();
    ready.pop();
    order.push_back(i);
    auto [first, last] = out_edges(by_index[static_cast<std::size_t>(i)], g);
    for (; first != last; ++first) {
      const std::size_t next = op_index(g, target(*first, g));
      if (--pending[next] == 0) ready.push(static_cast<index_t>(next));
    }
  }
  if (order.size() != n) detail::throw_cycle(g, by_index, pending);
  return order;
}

}  // namespace memplan
