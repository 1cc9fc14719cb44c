// Writes the fuzz targets' seed corpus (issue 5): graphs from the zoo and
// the generator, plans of fuzz_inputs.hpp's problem by every registered
// planner, and sizes in every accepted form. Generated at build time, so
// that no megabytes of JSON are committed.
//   make_corpus DIR  ->  DIR/graph_json/*, DIR/plan_json/*, DIR/size_text/*
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "fuzz_inputs.hpp"
#include "memplan/plan_builder.hpp"
#include "memplan/cost/devices.hpp"
#include "memplan/model/zoo.hpp"
#include "memplan/planners/registry.hpp"

namespace {

using namespace memplan;
namespace fs = std::filesystem;

/// Seeds above this size slow every execution more than they teach the fuzzer.
constexpr std::size_t largest_seed = 64 * 1024;

int write(const fs::path& dir, const std::string& name, const std::string& text) {
  if (text.size() > largest_seed) return 0;
  fs::create_directories(dir);
  std::ofstream(dir / name) << text;
  return 1;
}

std::string graph_text(const graph& g, const schedule& order) {
  std::ostringstream out;
  io::write_graph(out, g, order);
  return out.str();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_corpus DIR\n");
    return 1;
  }
  const fs::path dir = argv[1];
  int graphs = 0, plans = 0, sizes = 0;

  const device_spec& titan = find_device("titan-rtx");
  for (const std::string_view name : model::names()) {
    model::options o;
    o.batch = 1;
    if (name == "transformer" || name == "bert-base" || name == "bert-large" || name == "gpt2") o.layers = 1;
    const graph g = model::build(name, o, titan);
    graphs += write(dir / "graph_json", std::string(name) + ".json", graph_text(g, dfs_schedule(g)));
  }
  for (std::size_t shape = 0; shape < testing::graph_shape_names.size(); ++shape) {
    for (const int ops : {2, 8}) {
      testing::graph_options o;
      o.shape = static_cast<testing::graph_shape>(shape);
      o.forward_ops = ops;
      o.zero_bytes_fraction = 0.2;
      const graph g = testing::random_training_graph(o, 1);
      graphs += write(dir / "graph_json", g.name() + ".json", graph_text(g, dfs_schedule(g)));
    }
  }

  const problem& p = fuzz::plan_problem();
  const device_spec dev = fuzz::fuzz_device();
  for (const planner_entry& e : planners()) {
    for (const int percent : {40, 70, 100}) {
      const bytes_t budget = p.baseline_peak() * percent / 100;
      std::ostringstream out;
      io::write_plan(out, e.run(p, dev, budget, planner_options{}), p);
      plans += write(dir / "plan_json", std::string(e.name) + "-" + std::to_string(percent) + ".json", out.str());
    }
  }
  {  // the parameters and optimizer state in host memory between iterations (plan.hpp), by hand
    plan_builder b(p, "offloaded", p.baseline_peak());
    std::vector<index_t> state;
    for (std::size_t t = 0; t < p.num_tensors(); ++t) {
      if (p.persistent(static_cast<index_t>(t)) && p.producer[t] == no_index) state.push_back(static_cast<index_t>(t));
    }
    for (const index_t t : state) b.offload(t);
    for (const index_t t : state) b.swap_in(t);
    for (std::size_t s = 0; s < p.num_steps(); ++s) b.compute(static_cast<index_t>(s));
    for (const index_t t : state) b.swap_out(t);
    std::ostringstream out;
    io::write_plan(out, std::move(b).finish(), p);
    plans += write(dir / "plan_json", "offloaded.json", out.str());
  }

  for (const char* s : {"0", "1", "512B", "1.5GiB", "11GB", "800MiB", "60%", "150.25%", "1TB", "2PiB", "8EiB",
                        "0.5KiB", "9223372036854775807", "24GiB", "1.0000001kB"}) {
    sizes += write(dir / "size_text", "size-" + std::to_string(sizes), s);
  }
  std::printf("corpus in %s: %d graphs, %d plans, %d sizes\n", dir.string().c_str(), graphs, plans, sizes);
  return 0;
}
