// memplan: the command-line interface of DESIGN.md §8. The commands, their
// options and examples are data (commands.hpp): `memplan CMD --help`.
//
// Exit status (DESIGN.md §8), from the verdict's failure_kind: 0 success,
// 1 bad input or an invalid plan, 2 no plan fits the budget (out of memory),
// 3 the planner refuses the input or runs out of time. Errors and reasons
// go to stderr.

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "arguments.hpp"
#include "commands.hpp"
#include "memplan/compile.hpp"
#include "memplan/cost/cluster.hpp"
#include "memplan/cost/devices.hpp"
#include "memplan/distributed/data_parallel.hpp"
#include "memplan/distributed/pipeline.hpp"
#include "memplan/cost/profile.hpp"
#include "memplan/io/ascii_chart.hpp"
#include "memplan/io/device_profile.hpp"
#include "memplan/io/dtr_log.hpp"
#include "memplan/io/explain.hpp"
#include "memplan/io/graph_json.hpp"
#include "memplan/io/largest_batch.hpp"
#include "memplan/io/plan_json.hpp"
#include "memplan/io/planned.hpp"
#include "memplan/io/report_json.hpp"
#include "memplan/io/size.hpp"
#include "memplan/io/svg.hpp"
#include "memplan/io/trace.hpp"
#include "memplan/model/zoo.hpp"
#include "memplan/planners/max_batch.hpp"
#include "memplan/planners/registry.hpp"
#include "memplan/problem.hpp"
#include "memplan/runtime/executor.hpp"
#include "memplan/sim/assign_layout.hpp"
#include "memplan/sim/simulator.hpp"
#include "memplan/sim/validator.hpp"
#include "memplan/testing/integrity.hpp"

namespace memplan::cli {
namespace {

using json = nlohmann::json;
using namespace memplan::io;

/// DESIGN.md §8's exit status for a verdict.
int exit_status(failure_kind k) {
  switch (k) {
    case failure_kind::none: return 0;
    case failure_kind::invalid_plan: return 1;
    case failure_kind::out_of_memory: return 2;
    case failure_kind::planner_gave_up:
    case failure_kind::time_limit: return 3;
  }
  return 1;
}

/// A graph and its problem.
struct source_graph {
  graph g;
  problem p;
};

/// One rank of distributed training (`--parallel`): data parallel, or a
/// pipeline stage.
struct rank_scheme {
  std::variant<distributed::data_parallel_options, distributed::pipeline_options> options;

  /// The GPUs the scheme spans: the data-parallel ranks, or the stages.
  [[nodiscard]] rank_group group() const {
    if (const auto* dp = std::get_if<distributed::data_parallel_options>(&options)) return dp->group;
    const auto& pp = std::get<distributed::pipeline_options>(options);
    return {pp.cluster, pp.stages};
  }
  /// The rank's graph from `g` run in `order`.
  [[nodiscard]] graph build(const graph& g, const schedule& order) const {
    if (const auto* dp = std::get_if<distributed::data_parallel_options>(&options)) {
      return distributed::data_parallel_rank(g, order, *dp);
    }
    return distributed::pipeline_stage(g, order, std::get<distributed::pipeline_options>(options));
  }
};

/// `--parallel pipeline --stages P --stage K --micro-batches M`.
distributed::pipeline_options read_pipeline(const arguments& args, const cluster_spec& cluster) {
  MEMPLAN_EXPECTS(!args.has("ranks"), invalid_argument,
                  "--parallel pipeline takes --stages P (one GPU per stage), not --ranks");
  const int stages = static_cast<int>(args.integer("stages", 2, 1, 64));
  return {.stages = stages,
          .stage = static_cast<int>(args.integer("stage", 0, 0, stages - 1)),
          .micro_batches = static_cast<int>(args.integer("micro-batches", 4, 1, 1 << 20)),
          .cluster = &cluster};
}

/// `--parallel MODE --cluster C` with `--ranks N` (data parallel) or
/// `--stages P --stage K --micro-batches M` (pipeline): the rank planned, or nothing.
std::optional<rank_scheme> read_parallel(const arguments& args) {
  if (!args.has("parallel")) {
    for (const char* o : {"ranks", "cluster", "stages", "stage", "micro-batches"}) {
      MEMPLAN_EXPECTS(!args.has(o), invalid_argument, "--", o,
                      " plans a rank of distributed training: give --parallel MODE too");
    }
    return std::nullopt;
  }
  const std::string mode = args.require("parallel");
  const auto m = distributed::parse_data_parallel(mode);
  MEMPLAN_EXPECTS(m.has_value() || mode == "pipeline", invalid_argument, "--parallel: unknown mode '", mode,
                  "'; known modes: ddp, zero1, zero2, zero3, pipeline");
  MEMPLAN_EXPECTS(args.has("cluster"), invalid_argument, "--parallel ", mode,
                  " needs --cluster C (the ranks' machines: a100-node or dgx-h100)");
  const cluster_spec& cluster = find_cluster(args.require("cluster"));
  if (!m) return rank_scheme{read_pipeline(args, cluster)};
  for (const char* o : {"stages", "stage", "micro-batches"}) {
    MEMPLAN_EXPECTS(!args.has(o), invalid_argument, "--", o, " is for --parallel pipeline, not ", mode);
  }
  const int ranks = static_cast<int>(args.integer("ranks", 8, 1, 1 << 20));
  return rank_scheme{distributed::data_parallel_options{.mode = *m, .group = {&cluster, ranks}}};
}

/// `--device D` (required unless there is a `fallback` or a `--cluster`,
/// whose GPU it is) and `--device-profile`.
device_spec load_device(const arguments& args, std::string_view fallback = {}) {
  device_spec d;
  if (const auto parallel = read_parallel(args)) {
    const rank_group group = parallel->group();
    d = group.rank_device();
    MEMPLAN_EXPECTS(!args.has("device") || args.require("device") == d.name, invalid_argument, "--device ",
                    args.require("device"), ": cluster ", group.cluster->name, "'s GPUs are ", d.name);
  } else {
    d = find_device(fallback.empty() ? args.require("device") : args.get("device").value_or(std::string(fallback)));
  }
  if (const auto profile = args.get("device-profile")) d = read_device_profile_file(*profile, d);
  return d;
}

/// g run in `order`, or with --parallel one rank's iteration of it, compiled.
source_graph compile_source(graph g, const schedule& order, const arguments& args) {
  if (const auto parallel = read_parallel(args)) {
    graph rank = parallel->build(g, order);
    problem p = compile(rank, distributed::listed_order(rank));
    return {std::move(rank), std::move(p)};
  }
  problem p = compile(g, order);
  return {std::move(g), std::move(p)};
}

model::options read_model_options(const arguments& args) {
  model::options o;
  o.batch = static_cast<int>(args.integer("batch", o.batch, 1, 1 << 24));
  o.scale = args.number("scale", o.scale, 1e-6, 1e6);
  o.resolution = static_cast<int>(args.integer("resolution", o.resolution, 0, 1 << 16));
  o.seq_len = static_cast<int>(args.integer("seq-len", o.seq_len, 0, 1 << 24));
  o.layers = static_cast<int>(args.integer("layers", o.layers, 0, 1 << 24));
  o.cifar = args.has("cifar");
  if (const auto t = args.get("dtype")) o.type = parse_dtype(*t);
  if (const auto t = args.get("optimizer")) o.opt = parse_optimizer(*t);
  return o;
}

/// A SOURCE's graph, compiled against its schedule.
struct source {
  graph g;
  problem p;
  std::optional<bytes_t> dtr_refcount_peak;  ///< a DTR log's no-eviction peak as DTR's simulator counts it
};

/// SOURCE := --model NAME [model options] | --graph FILE.json | --dtr-log FILE
source load_source(const arguments& args, const device_spec& device) {
  MEMPLAN_EXPECTS(int{args.has("model")} + int{args.has("graph")} + int{args.has("dtr-log")} == 1, invalid_argument,
                  "give exactly one SOURCE: --model NAME, --graph FILE.json or --dtr-log FILE");
  if (const auto log = args.get("dtr-log")) {
    MEMPLAN_EXPECTS(!args.has("parallel"), invalid_argument,
                    "--parallel: a DTR log records one GPU's eager run, not a training graph to distribute");
    dtr_log read = read_dtr_log_file(*log);
    problem p = compile(read.graph, read.schedule);
    return {std::move(read.graph), std::move(p), read.refcount_peak};
  }
  if (const auto m = args.get("model")) {
    graph g = model::build(*m, read_model_options(args), device);
    const schedule order = dfs_schedule(g);
    auto [rank, p] = compile_source(std::move(g), order, args);
    return {std::move(rank), std::move(p), std::nullopt};
  }
  auto doc = read_graph_file(args.require("graph"));
  auto [rank, p] = compile_source(std::move(doc.graph), doc.schedule, args);
  return {std::move(rank), std::move(p), std::nullopt};
}

/// SIZE: bytes, units, or a percentage of the baseline peak.
bytes_t read_budget(const arguments& args, const problem& p) {
  return resolve(parse_size(args.require("budget")), p.baseline_peak());
}

/// `--host-memory SIZE`: the host memory a plan's host copies may take at
/// once (the executor's pinned pool); absent: no limit.
std::optional<bytes_t> read_host_memory(const arguments& args) {
  const auto text = args.get("host-memory");
  if (!text) return std::nullopt;
  return parse_host_memory(*text);
}

/// Writes the file that option `name` names, if given, by `write(stream)`.
/// \throws invalid_argument if it cannot be opened.
template <class Write>
void write_option_file(const arguments& args, std::string_view name, Write write) {
  const auto path = args.get(name);
  if (!path) return;
  std::ofstream f(*path);
  MEMPLAN_EXPECTS(f.good(), invalid_argument, "--", name, ": cannot write '", *path, "'");
  write(f);
}

/// The options that need the simulator's timeline and memory curve.
bool records_run(const arguments& args) { return args.has("trace") || args.has("svg") || args.has("ascii"); }

/// `--trace` and `--svg` of `plan` and `simulate`.
void write_pictures(const arguments& args, const problem& p, const device_spec& d, const planned& r) {
  write_option_file(args, "trace", [&](std::ostream& f) { write_chrome_trace(f, p, r.result, r.sim); });
  write_option_file(args, "svg", [&](std::ostream& f) { write_svg(f, p, r.result, r.sim, d.name); });
}

// ---- human-readable tables ----

std::string fixed(double v, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

void print_table(std::ostream& out, const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width(header.size());
  for (std::size_t c = 0; c < header.size(); ++c) {
    width[c] = header[c].size();
    for (const auto& r : rows) width[c] = std::max(width[c], r[c].size());
  }
  const auto line = [&](const std::vector<std::string>& cells) {
    for (std::size_t c = 0; c < cells.size(); ++c) {
      out << (c == 0 ? std::left : std::right) << std::setw(static_cast<int>(width[c])) << cells[c]
          << (c + 1 < cells.size() ? "  " : "\n");
    }
  };
  line(header);
  for (const auto& r : rows) line(r);
}

/// A row of the plan / compare / simulate tables: an infeasible plan has no
/// figures ("-"), only the kind of failure (the reasons are on stderr and in --json).
std::vector<std::string> row_cells(const planned& r) {
  const bool ok = succeeded(r);
  const auto figure = [&](std::string s) { return ok ? std::move(s) : std::string("-"); };
  return {std::string(r.sim.planner),
          ok ? "yes" : "no",
          figure(format_bytes(r.sim.peak_bytes)),
          figure(format_bytes(r.sim.peak_live_bytes)),
          figure(fixed(r.sim.time_us / 1e3, 2)),
          figure(fixed(100 * r.sim.overhead, 1) + " %"),
          figure(format_bytes(r.sim.swapped_out_bytes)),
          figure(std::to_string(r.sim.recomputed_ops)),
          figure(std::to_string(r.sim.split_ops)),
          fixed(r.planning_time_s * 1e3, 2),
          ok ? "" : std::string(to_string(verdict_of(r)))};
}
const std::vector<std::string> row_header{"planner",  "feasible", "arena",      "live peak", "time ms", "overhead",
                                          "swapped",  "recomputed", "split ops", "plan ms", "why not"};

/// The budget as the user typed it, and its bytes.
std::string budget_text(const arguments& args, bytes_t budget) {
  const auto typed = args.get("budget");
  if (!typed) return format_bytes(budget);
  return *typed + " (" + std::to_string(budget) + " B" + (typed->ends_with('%') ? " = " + format_bytes(budget) : "") + ")";
}

void print_problem_line(std::ostream& out, const problem& p, const device_spec& d, const std::string& budget) {
  out << p.name << " on " << d.name << ": " << p.num_steps() << " ops, baseline peak "
      << format_bytes(p.baseline_peak()) << ", baseline time " << fixed(p.baseline_time_us() / 1e3, 2)
      << " ms, budget " << budget << "\n";
}

/// The options of the planners called `chosen`: the common ones, and each
/// planner-specific `--NAME VALUE` that at least one of them reads.
planner_options read_planner_options(const arguments& args, std::span<const std::string> chosen) {
  planner_options o;
  o.seed = static_cast<std::uint64_t>(args.integer("seed", 1, 0, (1LL << 62)));
  o.time_limit_s = args.number("time-limit", 0, 0, 1e9);
  o.threads = static_cast<int>(args.integer("threads", 0, 0, 1024));
  for (const auto& e : planners()) {
    for (const planner_option& opt : e.options) {
      const auto value = args.get(opt.name);
      if (value && !o.extra.contains(opt.name)) set_planner_option(o, opt.name, *value, chosen);
    }
  }
  return o;
}

// ---- commands ----

/// `import --dtr-log FILE [--out g.json]`: the log as a memplan-graph document.
int cmd_import(const arguments& args) {
  const dtr_log log = read_dtr_log_file(args.require("dtr-log"));
  if (const auto out = args.get("out")) {
    std::ofstream f(*out);
    MEMPLAN_EXPECTS(f.good(), invalid_argument, "--out: cannot write '", *out, "'");
    write_graph(f, log.graph, log.schedule);
  } else {
    write_graph(std::cout, log.graph, log.schedule);
  }
  return 0;
}

int cmd_models(const arguments& args) {
  if (args.has("json")) {
    json j{{"models", json::array()}, {"devices", json::array()}, {"planners", json::array()}};
    for (const auto m : model::names()) j["models"].push_back(m);
    for (const auto& d : devices()) {
      j["devices"].push_back({{"name", d.name}, {"memory_bytes", d.memory_bytes}});
    }
    j["clusters"] = json::array();
    for (const auto& c : clusters()) {
      j["clusters"].push_back({{"name", c.name}, {"gpu", c.gpu}, {"gpus_per_node", c.gpus_per_node}});
    }
    for (const auto& e : planners()) j["planners"].push_back({{"name", e.name}, {"summary", e.summary}});
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << "models:";
  for (const auto m : model::names()) std::cout << " " << m;
  std::cout << "\ndevices:\n";
  for (const auto& d : devices()) std::cout << "  " << std::left << std::setw(12) << d.name << format_bytes(d.memory_bytes) << "\n";
  std::cout << "clusters (--parallel MODE --cluster C):\n";
  for (const auto& c : clusters()) {
    std::cout << "  " << std::left << std::setw(12) << c.name << "nodes of " << c.gpus_per_node << " " << c.gpu
              << ", NVLink " << c.nvlink.bandwidth_gb_s << " GB/s, network " << c.network.bandwidth_gb_s
              << " GB/s per GPU\n";
  }
  std::cout << "planners:\n";
  for (const auto& e : planners()) std::cout << "  " << std::left << std::setw(16) << e.name << e.summary << "\n";
  return 0;
}

/// Where the unplanned peak is and what makes it.
void print_peak(std::ostream& out, const problem& p, const peak_breakdown& b) {
  if (b.step == no_index) return;
  out << "  the peak is at step " << b.step << " (op '" << p.op_name[static_cast<std::size_t>(b.step)] << "'):";
  for (std::size_t k = 0; k < b.by_kind.size(); ++k) {
    if (b.by_kind[k] > 0) out << " " << tensor_kind_names[k] << " " << format_bytes(b.by_kind[k]) << ",";
  }
  out << " workspace " << format_bytes(b.workspace) << "\n  largest tensors there:";
  for (const index_t t : b.largest) {
    out << " " << p.tensor_name[static_cast<std::size_t>(t)] << " (" << format_bytes(p.bytes[static_cast<std::size_t>(t)])
        << ")";
  }
  out << "\n";
}

/// `plan --explain`: per tensor the plan does not simply keep, what happens to it.
void print_explain(std::ostream& out, const problem& p, const std::vector<tensor_story>& stories) {
  std::vector<std::vector<std::string>> rows;
  const auto ms = [](double us) { return us < 0 ? std::string("-") : fixed(us / 1e3, 3); };
  for (const tensor_story& s : stories) {
    const auto t = static_cast<std::size_t>(s.tensor);
    std::string how = s.swap_outs > 0 ? std::to_string(s.swap_outs) + " out, " + std::to_string(s.swap_ins) + " in" : "";
    if (s.recomputes > 0) how += (how.empty() ? "" : ", ") + std::to_string(s.recomputes) + " rebuilt";
    if (s.parts > 1) how += (how.empty() ? "" : ", ") + std::to_string(s.parts) + " parts";
    rows.push_back({p.tensor_name[t], std::string(to_string(p.kind[t])), format_bytes(p.bytes[t]),
                    std::string(to_string(s.what)), how, ms(s.out_us), ms(s.back_us), fixed(s.stall_us / 1e3, 3)});
  }
  print_table(out, {"tensor", "kind", "bytes", "decision", "actions", "leaves ms", "back ms", "stall ms"}, rows);
}

int cmd_info(const arguments& args) {
  const device_spec d = load_device(args, "titan-rtx");
  const auto [g, p, dtr_peak] = load_source(args, d);
  json j = info_json(g, p, d);
  // DTR's budgets are ratios of this peak (its simulator counts a tensor while any handle holds it).
  if (dtr_peak) j["dtr_refcount_peak_bytes"] = *dtr_peak;
  if (args.has("json")) {
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << p.name << " on " << d.name << "\n  ops        " << p.num_steps() << "\n  tensors    " << p.num_tensors()
              << "\n  parameters " << j["parameter_count"].get<std::int64_t>() << " ("
              << format_bytes(j["parameter_bytes"].get<bytes_t>()) << ")"
              << "\n  baseline peak " << format_bytes(p.baseline_peak()) << "\n  baseline time "
              << fixed(p.baseline_time_us() / 1e3, 3) << " ms\n";
    if (dtr_peak) {
      std::cout << "  DTR's no-eviction peak " << format_bytes(*dtr_peak) << " (" << *dtr_peak
                << " B: DTR's budgets are ratios of it)\n";
    }
    print_peak(std::cout, p, breakdown_of_peak(p));
  }
  return 0;
}

int cmd_plan(const arguments& args) {
  const device_spec d = load_device(args);
  const problem p = load_source(args, d).p;
  const bytes_t budget = read_budget(args, p);
  const std::string name = args.require("planner");
  planner_options options = read_planner_options(args, std::span(&name, 1));
  const bool progress = isatty(STDERR_FILENO) != 0;
  if (progress) options.progress = [](std::string_view status) { std::cerr << "\r" << status << "\x1b[K" << std::flush; };
  const bool explaining = args.has("explain");
  const auto r = run_and_simulate(find_planner(name), p, d, budget, options, records_run(args) || explaining,
                                  read_host_memory(args));
  const std::vector<tensor_story> stories = explaining && succeeded(r) ? explain(p, r.result, r.sim) : std::vector<tensor_story>{};
  if (progress) std::cerr << "\r\x1b[K" << std::flush;
  if (const auto out = args.get("out")) {
    std::ofstream f(*out);
    MEMPLAN_EXPECTS(f.good(), invalid_argument, "--out: cannot write '", *out, "'");
    f << to_json(r.result, p).dump(1) << "\n";
  }
  write_pictures(args, p, d, r);
  if (args.has("json")) {
    json j = to_json(r);
    if (explaining) j["explain"] = to_json(stories, p);
    std::cout << j.dump(2) << "\n";
  } else {
    print_problem_line(std::cout, p, d, budget_text(args, budget));
    print_table(std::cout, row_header, {row_cells(r)});
    if (explaining && succeeded(r)) print_explain(std::cout, p, stories);
    if (args.has("ascii")) write_ascii_memory(std::cout, r.sim);
    if (!succeeded(r)) std::cerr << "memplan plan: infeasible: " << failure_of(r) << "\n";
    if (succeeded(r) && !r.result.reason.empty()) std::cout << "note: " << r.result.reason << "\n";
    if (succeeded(r) && r.sim.offloaded_state_bytes > 0) {
      std::cout << "offloaded state: " << r.result.offloaded_state.size() << " parameters and optimizer state, "
                << format_bytes(r.sim.offloaded_state_bytes) << ", in host memory between iterations\n";
    }
    if (r.host_bytes > 0) std::cout << "host memory: " << format_bytes(r.host_bytes) << " of pinned host copies at most\n";
  }
  return exit_status(verdict_of(r));
}

int cmd_compare(const arguments& args) {
  const device_spec d = load_device(args);
  const problem p = load_source(args, d).p;
  const bytes_t budget = read_budget(args, p);
  const auto names = args.list("planners", default_planner_names());
  const planner_options options = read_planner_options(args, names);
  std::vector<planned> rows;
  for (const auto& name : names) {
    rows.push_back(run_and_simulate(find_planner(name), p, d, budget, options, args.has("svg"), read_host_memory(args)));
  }
  write_option_file(args, "svg", [&](std::ostream& f) {
    std::vector<report> runs;
    for (const auto& r : rows) {
      runs.push_back(r.sim);
      runs.back().feasible = succeeded(r);  // the planner's and the host memory's verdicts too
    }
    write_compare_svg(f, p, d.name, budget, runs);
  });
  if (args.has("json")) {
    std::cout << compare_json(p, d, budget, rows).dump(2) << "\n";
  } else {
    print_problem_line(std::cout, p, d, budget_text(args, budget));
    std::vector<std::vector<std::string>> cells;
    for (const auto& r : rows) cells.push_back(row_cells(r));
    print_table(std::cout, row_header, cells);
  }
  for (const auto& r : rows) {
    if (succeeded(r)) continue;
    const std::string& why = failure_of(r);
    std::cerr << "memplan compare: " << (why.starts_with(r.sim.planner + ":") ? "" : r.sim.planner + ": ") << why << "\n";
  }
  // Some plan fits: success. None: exit 2, as plan does for an infeasible budget.
  const bool any = std::ranges::any_of(rows, [](const planned& r) { return succeeded(r); });
  return any ? 0 : 2;
}

/// `--search batch` (the default) or `--search scale`.
bool search_by_scale(const arguments& args) {
  const std::string what = args.get("search").value_or("batch");
  MEMPLAN_EXPECTS(what == "batch" || what == "scale", invalid_argument, "--search: '", what,
                  "' is not one of batch, scale");
  return what == "scale";
}

/// `--window N`: max_batch's scan of max(N, 5 %) batches above the best; 0: none.
batch_window read_window(const arguments& args) {
  const auto n = static_cast<int>(args.integer("window", batch_window{}.batches, 0, 1 << 20));
  if (n == 0) return batch_window::none();
  batch_window w;
  w.batches = n;
  return w;
}

/// The largest batch (or, with `--search scale`, the largest integer width
/// factor k at the given batch: TSPLIT Table V) at which `planner` makes a
/// feasible plan within `--max-overhead` (io::largest_batch).
largest_batch_result search_batch(const arguments& args, const device_spec& d, const planner_entry& planner,
                                  const planner_options& options, largest_batch_options search) {
  model::options mo = read_model_options(args);
  const std::string model_name = args.require("model");
  const bool by_scale = search_by_scale(args);
  if (isatty(STDERR_FILENO) != 0) {
    search.progress = [&](int batch, const planned& r) {
      std::cerr << "\r" << planner.name << ": batch " << batch << (succeeded(r) ? " fits    " : " fails   ") << std::flush;
    };
  }
  largest_batch_result best = largest_batch(
      [&](int n) {
        if (by_scale) {
          mo.scale = n;
        } else {
          mo.batch = n;
        }
        graph g = model::build(model_name, mo, d);
        const schedule order = dfs_schedule(g);
        return compile_source(std::move(g), order, args).p;
      },
      d, planner, options, search);
  if (search.progress) std::cerr << "\r" << std::string(40, ' ') << "\r";
  return best;
}

int cmd_maxbatch(const arguments& args) {
  const device_spec d = load_device(args);
  largest_batch_options search;
  if (const auto budget = args.get("budget")) search.budget = parse_size(*budget);
  search.max_overhead = args.number("max-overhead", 1e300, 0, 1e300);
  search.host_memory = read_host_memory(args);
  search.window = read_window(args);
  const auto names = args.list("planners", default_planner_names());
  const planner_options options = read_planner_options(args, names);
  std::vector<std::pair<std::string, largest_batch_result>> rows;
  for (const auto& name : names) rows.emplace_back(name, search_batch(args, d, find_planner(name), options, search));
  const bool by_scale = search_by_scale(args);
  if (args.has("json")) {
    json j{{"model", args.require("model")}, {"device", d.name}, {"rows", json::array()}};
    for (const auto& [name, r] : rows) {
      json row{{"planner", name}, {by_scale ? "max_scale" : "max_batch", r.search.batch}, {"probes", r.search.probes}};
      if (r.at_best) {
        row["time_s"] = r.at_best->sim.time_us / 1e6;
        row["overhead"] = r.at_best->sim.overhead;
        row["peak_bytes"] = r.at_best->sim.peak_bytes;
        row["offloaded_state_bytes"] = r.at_best->sim.offloaded_state_bytes;
        row["host_bytes"] = r.at_best->host_bytes;
      }
      j["rows"].push_back(row);
    }
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << args.require("model") << " on " << d.name
              << (by_scale ? ": largest scale per planner\n" : ": largest batch per planner\n");
    std::vector<std::vector<std::string>> cells;
    for (const auto& [name, r] : rows) {
      const auto& at = r.at_best;
      cells.push_back({name, std::to_string(r.search.batch), std::to_string(r.search.probes),
                       at ? format_bytes(at->sim.peak_bytes) : "-", at ? fixed(100 * at->sim.overhead, 1) + " %" : "-",
                       at ? format_bytes(at->host_bytes) : "-", at ? format_bytes(at->sim.offloaded_state_bytes) : "-"});
    }
    print_table(std::cout,
                {"planner", by_scale ? "max scale" : "max batch", "probes", "peak", "overhead", "host memory",
                 "offloaded state"},
                cells);
  }
  return 0;
}

/// The graph and plan files of `simulate` and `validate`.
struct graph_and_plan {
  problem p;
  plan result;
};

/// SOURCE (any of them) and the plan file made for it.
graph_and_plan load_graph_and_plan(const arguments& args, const device_spec& d) {
  problem p = load_source(args, d).p;
  plan result = read_plan_file(args.require("plan"), p);
  return {std::move(p), std::move(result)};
}

int cmd_simulate(const arguments& args) {
  const device_spec d = load_device(args);
  auto [p, result] = load_graph_and_plan(args, d);
  const bytes_t budget = args.has("budget") ? read_budget(args, p) : result.budget;
  const planned r = simulate_plan(p, std::move(result), d, budget, records_run(args));
  write_pictures(args, p, d, r);
  if (args.has("json")) {
    std::cout << to_json(r).dump(2) << "\n";
  } else {
    print_problem_line(std::cout, p, d, budget_text(args, budget));
    print_table(std::cout, row_header, {row_cells(r)});
    if (args.has("ascii")) write_ascii_memory(std::cout, r.sim);
  }
  if (!succeeded(r)) std::cerr << "memplan simulate: infeasible: " << failure_of(r) << "\n";
  return exit_status(verdict_of(r));
}

int cmd_validate(const arguments& args) {
  const device_spec d = load_device(args, "titan-rtx");
  const auto [p, result] = load_graph_and_plan(args, d);
  const bytes_t budget = read_budget(args, p);
  const validation v = validate(p, result, d, budget);
  if (args.has("json")) {
    std::cout << to_json(v).dump(2) << "\n";
  } else if (v.ok) {
    std::cout << "valid: peak " << v.peak_bytes << " B (" << format_bytes(v.peak_bytes) << ") within " << budget
              << " B, time "
              << fixed(v.time_us / 1e3, 3) << " ms\n";
  } else {
    for (const auto& e : v.errors) std::cerr << "invalid: " << e << "\n";
  }
  return exit_status(v.kind);
}

/// The plan `execute` runs: the planner's, or the plan file's (given the
/// layout of its simulated timeline when it has none, as `simulate` does).
planned plan_to_execute(const arguments& args, const problem& p, const device_spec& d, bytes_t budget) {
  MEMPLAN_EXPECTS(args.has("planner") != args.has("plan"), invalid_argument,
                  "execute: give exactly one of --planner P and --plan FILE");
  if (const auto name = args.get("planner")) {
    const planner_options options = read_planner_options(args, std::span(&*name, 1));
    return run_and_simulate(find_planner(*name), p, d, budget, options, false, std::nullopt);
  }
  plan result = read_plan_file(args.require("plan"), p);
  if (result.offsets.empty()) {
    result.budget = budget;
    assign_layout(p, result, d);
  }
  report sim;
  sim.planner = result.planner;
  return {std::move(result), std::move(sim), 0.0, 0, {}};
}

/// `execute SOURCE --device D --budget SIZE (--planner P | --plan FILE)`:
/// runs the plan on host::device with an arena of exactly the budget, ops
/// that read every byte of their inputs (checking each holds what the
/// unplanned run made, testing/integrity.hpp) and write every byte of their
/// outputs, issued as the simulator starts them on D.
int cmd_execute(const arguments& args) {
  const device_spec d = load_device(args);
  const problem p = load_source(args, d).p;
  const bytes_t budget = read_budget(args, p);
  const planned r = plan_to_execute(args, p, d, budget);
  testing::integrity_check run;
  failure_kind kind = verdict_of(r);
  std::string failure = kind == failure_kind::none ? std::string() : failure_of(r);
  if (kind == failure_kind::none) {  // the planner's verdict first: an infeasible plan is not run
    run = testing::check_integrity(p, r.result, budget, &d);
    if (!run.ran) {
      kind = failure_kind::invalid_plan;
      failure = "the executor refuses the plan's action list";
    } else if (!run.failure.empty()) {
      kind = run.kind == failure_kind::none ? failure_kind::invalid_plan : run.kind;
      failure = run.failure;
    }
  }
  const bool ok = kind == failure_kind::none;
  const runtime::run_stats& s = run.stats;
  if (args.has("json")) {
    json j{{"planner", r.result.planner}, {"ok", ok}, {"budget_bytes", budget}};
    if (ok) {
      j.update({{"arena_bytes", s.arena_bytes},
                {"peak_live_bytes", s.peak_live_bytes},
                {"arena_high_water_bytes", s.arena_high_water_bytes},
                {"compactions", s.compactions},
                {"compacted_bytes", s.compacted_bytes},
                {"pinned_bytes", run.pinned_bytes},
                {"pinned_peak_bytes", s.pinned_peak_bytes},
                {"pinned_compactions", s.pinned_compactions},
                {"swapped_out_bytes", s.swapped_out_bytes},
                {"swapped_in_bytes", s.swapped_in_bytes},
                {"ops_run", s.ops_run},
                {"micro_actions", s.micro_actions},
                {"splits_in_place", s.splits_in_place},
                {"wall_time_s", run.run_seconds}});
    } else {
      if (r.result.arena_bytes > 0) j["arena_bytes"] = r.result.arena_bytes;
      j["failure_kind"] = std::string(to_string(kind));
      j["failure"] = failure;
    }
    std::cout << j.dump(2) << "\n";
  } else {
    print_problem_line(std::cout, p, d, budget_text(args, budget));
    const auto bytes = [&](bytes_t b) { return ok ? format_bytes(b) : std::string("-"); };
    print_table(std::cout,
                {"planner", "ok", "arena", "live peak", "high water", "compactions", "compacted", "pinned", "wall ms"},
                {{r.result.planner, ok ? "yes" : "no",
                  ok ? format_bytes(s.arena_bytes) : (r.result.arena_bytes > 0 ? format_bytes(r.result.arena_bytes) : "-"),
                  bytes(s.peak_live_bytes), bytes(s.arena_high_water_bytes), ok ? std::to_string(s.compactions) : "-",
                  bytes(s.compacted_bytes), bytes(run.pinned_bytes), ok ? fixed(run.run_seconds * 1e3, 2) : "-"}});
  }
  if (!ok) std::cerr << "memplan execute: failed: " << failure << "\n";
  return exit_status(kind);
}

/// Runs `command` with its arguments (`--help`: its help instead).
int dispatch(std::string_view command, std::span<const char* const> rest) {
  const command_spec* spec = find_command(command);
  if (spec == nullptr) {
    std::ostringstream usage;
    print_usage(usage);
    throw invalid_argument(memplan::detail::concat("unknown command '", command, "'\n", usage.str()));
  }
  const std::vector<option_spec> accepted = spec->accepted();
  const arguments args(command, accepted, rest);
  if (args.wants_help()) {
    const auto planner = args.get("planner");
    if (planner) (void)find_planner(*planner);  // an unknown name is an error, not an empty list
    print_help(std::cout, *spec, planner.value_or(""));
    return 0;
  }
  args.check_required(accepted);
  if (command == "models") return cmd_models(args);
  if (command == "info") return cmd_info(args);
  if (command == "import") return cmd_import(args);
  if (command == "plan") return cmd_plan(args);
  if (command == "compare") return cmd_compare(args);
  if (command == "maxbatch") return cmd_maxbatch(args);
  if (command == "execute") return cmd_execute(args);
  if (command == "simulate") return cmd_simulate(args);
  return cmd_validate(args);
}

}  // namespace
}  // namespace memplan::cli

int main(int argc, char** argv) {
  using namespace memplan;
  const std::span<const char* const> words(argv, static_cast<std::size_t>(argc));
  if (argc < 2 || std::string_view(argv[1]) == "--help" || std::string_view(argv[1]) == "help") {
    if (argc >= 3 && cli::find_command(argv[2]) != nullptr) {  // memplan help CMD
      cli::print_help(std::cout, *cli::find_command(argv[2]));
      return 0;
    }
    cli::print_usage(argc < 2 ? std::cerr : std::cout);
    return argc < 2 ? 1 : 0;
  }
  bool as_json = false;
  for (const auto* w : words) as_json = as_json || std::string_view(w) == "--json";
  const auto fail = [&](std::string_view kind, const std::string& message, int status) {
    std::cerr << (message.starts_with("memplan") ? "" : "memplan: ") << message << "\n";
    if (as_json) {
      std::cout << nlohmann::json{{"error", {{"kind", std::string(kind)}, {"message", message}}}}.dump(2) << "\n";
    }
    return status;
  };
  try {
    return cli::dispatch(argv[1], words.subspan(2));
  } catch (const infeasible_budget& e) {  // a verdict: its kind names it and sets the status
    return fail(to_string(e.kind()), e.what(), cli::exit_status(e.kind()));
  } catch (const invalid_graph& e) {
    return fail("invalid_graph", e.what(), 1);
  } catch (const invalid_argument& e) {
    return fail("invalid_argument", e.what(), 1);
  } catch (const error& e) {
    return fail("error", e.what(), 1);
  } catch (const std::bad_alloc&) {
    return fail("out_of_host_memory", "out of host memory", 1);
  }
}
