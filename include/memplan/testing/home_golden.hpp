#pragma once
/// \file
/// HOME's golden results (issue 29): what the literal search (Algo 1 and
/// Algo 3, 500 x 500, seed 1) finds on the six models of HOME Table 3 —
/// the best placement, its fitness and the best-ever fitness after every
/// iteration — recorded once from the search as first written, so that
/// every speed-up is checked to change none of it. `bench_home` checks all
/// six (tests/data/home_golden/); test_home the cheap ones.

#include <array>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "memplan/compile.hpp"
#include "memplan/cost/devices.hpp"
#include "memplan/error.hpp"
#include "memplan/graph/graph.hpp"
#include "memplan/model/zoo.hpp"
#include "memplan/planners/home.hpp"
#include "memplan/problem.hpp"

namespace memplan::testing {

/// A model of HOME Table 3 at the largest batch `capuchin` plans within an
/// 11 GiB RTX 2080 Ti with CIFAR-10 inputs (`memplan maxbatch --model M
/// --cifar --device rtx-2080ti --planners capuchin`), HOME Table 2's
/// setting. HOME does not give ResNet's depth; we use ResNet-50.
struct home_workload {
  const char* model;  ///< the zoo's name
  int batch;          ///< the batch size
};
/// The six models of HOME Table 3, in the table's order.
inline constexpr std::array<home_workload, 6> home_table3{{{"mobilenet", 14755},
                                                          {"plain20", 56530},
                                                          {"squeezenet", 15011},
                                                          {"vgg16", 14868},
                                                          {"resnet50", 2687},
                                                          {"inception_v3", 699}}};

///@{
/// The search the golden results record: HOME §3.3's swarm, seed 1.
inline constexpr ::memplan::detail::home::swarm_settings golden_swarm{500, 500};
inline constexpr std::uint64_t golden_seed = 1;
///@}

/// A workload's problem, device and budget (the device's whole memory).
struct home_instance {
  problem p;                                    ///< the model at the workload's batch, CIFAR-10 inputs, DFS order
  device_spec dev = find_device("rtx-2080ti");  ///< HOME's GPU, an RTX 2080 Ti (11 GiB)
  bytes_t budget = dev.memory_bytes;            ///< all of its memory
};

/// Builds workload `w`'s model with CIFAR-10 inputs and compiles it in DFS order.
[[nodiscard]] inline home_instance load(const home_workload& w) {
  home_instance in;
  model::options o;
  o.batch = w.batch;
  o.cifar = true;
  in.p = compile(model::build(w.model, o, in.dev));
  return in;
}

/// A search's result as recorded: placements as digits (0 retain, 1 swap,
/// 2 recompute), fitnesses exactly (JSON numbers round-trip doubles).
[[nodiscard]] inline nlohmann::json to_golden(const home_workload& w, const ::memplan::detail::home::search_result& r) {
  std::string best;
  for (const ::memplan::detail::home::placement a : r.best) best.push_back(static_cast<char>('0' + static_cast<int>(a)));
  nlohmann::json history = nlohmann::json::array();
  for (const search_point& s : r.history) history.push_back({s.time_us, s.excess_bytes});
  return {{"model", w.model},
          {"batch", w.batch},
          {"iterations", golden_swarm.iterations},
          {"particles", golden_swarm.particles},
          {"seed", golden_seed},
          {"best", best},
          {"best_time_us", r.best_fitness.time_us},
          {"best_excess_bytes", r.best_fitness.excess_bytes},
          {"history", history}};
}

/// tests/data/home_golden/MODEL.json under the source tree `root`.
[[nodiscard]] inline std::string golden_path(const std::string& root, const home_workload& w) {
  return root + "/tests/data/home_golden/" + w.model + ".json";
}

/// The golden result stored at `path` (golden_path), as JSON.
/// \throws error if the file cannot be read; nlohmann::json's parse_error if it is not JSON.
[[nodiscard]] inline nlohmann::json read_golden(const std::string& path) {
  std::ifstream in(path);
  MEMPLAN_EXPECTS(in.good(), error, "cannot read HOME's golden result '", path, "'");
  return nlohmann::json::parse(in);
}

/// Where result `r` differs from the golden one `g` (empty: nowhere).
[[nodiscard]] inline std::string golden_difference(const nlohmann::json& g, const nlohmann::json& r) {
  for (const char* field : {"best", "best_time_us", "best_excess_bytes"}) {
    if (g.at(field) != r.at(field)) {
      return detail::concat(field, ": golden ", g.at(field).dump(), ", now ", r.at(field).dump());
    }
  }
  const auto& gh = g.at("history");
  const auto& rh = r.at("history");
  if (gh.size() != rh.size()) return detail::concat("history: golden ", gh.size(), " entries, now ", rh.size());
  for (std::size_t i = 0; i < gh.size(); ++i) {
    if (gh[i] != rh[i]) {
      return detail::concat("history[", i, "]: golden ", gh[i].dump(), ", now ", rh[i].dump());
    }
  }
  return {};
}

/// The search of the golden results (500 x 500, seed 1) on `threads` threads.
[[nodiscard]] inline ::memplan::detail::home::search_result golden_search(const home_instance& in, int threads) {
  const ::memplan::detail::home::feature_maps fm(in.p);
  planner_options o;
  o.seed = golden_seed;
  o.threads = threads;
  return ::memplan::detail::home::search(in.p, in.dev, in.budget, fm, golden_swarm, o, {});
}

}  // namespace memplan::testing
