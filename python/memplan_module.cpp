// memplan's Python module (docs/python.md): graphs, planners, the simulator
// and the validator, through the same code the CLI runs
// (memplan/io/planned.hpp), so that `memplan.plan(...)` and `memplan plan
// --json` give the same numbers for the same input.
//
//   import memplan
//   g = memplan.load_graph("tests/data/pytorch_cnn.json")
//   p = memplan.plan(g, device="titan-rtx", budget="60%", planner="tsplit")
//   p.feasible, p.time_us, p.arena_bytes, p.report, p.to_json()
//
// The GIL is released while a planner, the simulator or the validator runs.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <fstream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "memplan/compile.hpp"
#include "memplan/cost/cluster.hpp"
#include "memplan/cost/devices.hpp"
#include "memplan/distributed/data_parallel.hpp"
#include "memplan/cost/roofline.hpp"
#include "memplan/error.hpp"
#include "memplan/graph/schedule.hpp"
#include "memplan/io/dtr_log.hpp"
#include "memplan/io/graph_json.hpp"
#include "memplan/io/plan_json.hpp"
#include "memplan/io/planned.hpp"
#include "memplan/io/size.hpp"
#include "memplan/model/zoo.hpp"
#include "memplan/planners/registry.hpp"
#include "memplan/problem.hpp"
#include "memplan/sim/validator.hpp"

namespace py = pybind11;
using json = nlohmann::json;

namespace memplan::python {
namespace {

// ---- JSON <-> Python ----

py::object to_python(const json& j) {
  switch (j.type()) {
    case json::value_t::boolean: return py::bool_(j.get<bool>());
    case json::value_t::number_integer: return py::int_(j.get<std::int64_t>());
    case json::value_t::number_unsigned: return py::int_(j.get<std::uint64_t>());
    case json::value_t::number_float: return py::float_(j.get<double>());
    case json::value_t::string: return py::str(j.get_ref<const std::string&>());
    case json::value_t::array: {
      py::list out;
      for (const json& e : j) out.append(to_python(e));
      return out;
    }
    case json::value_t::object: {
      py::dict out;
      for (const auto& [key, value] : j.items()) out[py::str(key)] = to_python(value);
      return out;
    }
    default: return py::none();  // null (binary and discarded never come from memplan)
  }
}

json from_python(py::handle o) {
  if (o.is_none()) return nullptr;
  if (py::isinstance<py::bool_>(o)) return o.cast<bool>();  // before int: bool is an int in Python
  if (py::isinstance<py::int_>(o)) {
    if (o.cast<py::int_>() >= py::int_(0)) return o.cast<std::uint64_t>();
    return o.cast<std::int64_t>();
  }
  if (py::isinstance<py::float_>(o)) return o.cast<double>();
  if (py::isinstance<py::str>(o)) return o.cast<std::string>();
  if (py::isinstance<py::dict>(o)) {
    json out = json::object();
    for (const auto& [key, value] : o.cast<py::dict>()) {
      MEMPLAN_EXPECTS(py::isinstance<py::str>(key), invalid_argument, "a JSON object's keys are strings, not ",
                      py::str(py::type::of(key)).cast<std::string>());
      out[key.cast<std::string>()] = from_python(value);
    }
    return out;
  }
  if (py::isinstance<py::list>(o) || py::isinstance<py::tuple>(o)) {
    json out = json::array();
    for (const py::handle e : o) out.push_back(from_python(e));
    return out;
  }
  throw invalid_argument(
      detail::concat("cannot write a ", py::str(py::type::of(o)).cast<std::string>(), " as JSON"));
}

/// Reads a document given as a dict, a JSON string, or a path (str or
/// os.PathLike): `from_text` parses text, `from_file` reads a file.
template <class FromText, class FromFile>
auto read_document(py::handle source, std::string_view what, FromText from_text, FromFile from_file) {
  if (py::isinstance<py::dict>(source)) return from_text(from_python(source).dump());
  if (py::isinstance<py::str>(source)) {
    const auto text = source.cast<std::string>();
    const auto first = text.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && text[first] == '{') return from_text(text);
    return from_file(std::filesystem::path(text));
  }
  if (py::hasattr(source, "__fspath__")) {
    return from_file(std::filesystem::path(py::module_::import("os").attr("fspath")(source).cast<std::string>()));
  }
  throw py::type_error(detail::concat(what, ": expected a path, a JSON string or a dict, got ",
                                      py::str(py::type::of(source)).cast<std::string>()));
}

// ---- graphs ----

/// A graph, the order its ops run in, and the two compiled.
struct compiled {
  memplan::graph g;
  schedule order;
  problem p;
};

std::shared_ptr<const compiled> compile_shared(memplan::graph g, schedule order) {
  problem p = compile(g, order);
  return std::make_shared<const compiled>(compiled{std::move(g), std::move(order), std::move(p)});
}

/// A zoo model's name and options: its op times depend on the device, so it
/// is built again for each device it is planned on (as the CLI's `--model`).
struct model_source {
  std::string name;
  model::options options;
};

std::shared_ptr<const compiled> build_model(const model_source& m, const device_spec& d) {
  py::gil_scoped_release unlocked;
  memplan::graph g = model::build(m.name, m.options, d);
  schedule order = dfs_schedule(g);  // compile(g)'s order
  return compile_shared(std::move(g), std::move(order));
}

/// `memplan.Graph`.
class graph_handle {
 public:
  graph_handle(std::shared_ptr<const compiled> c, std::optional<model_source> m, std::string device)
      : compiled_(std::move(c)), model_(std::move(m)), device_(std::move(device)) {}

  /// The graph compiled for `d`: a model is built again for another device.
  [[nodiscard]] std::shared_ptr<const compiled> on(const device_spec& d) const {
    if (!model_ || d.name == device_) return compiled_;
    return build_model(*model_, d);
  }
  [[nodiscard]] const compiled& get() const { return *compiled_; }
  [[nodiscard]] const std::string& device() const { return device_; }

 private:
  std::shared_ptr<const compiled> compiled_;
  std::optional<model_source> model_;
  std::string device_;  ///< the device a model was built for; empty for a file
};

graph_handle load_graph(py::handle source) {
  if (py::isinstance<graph_handle>(source)) return source.cast<graph_handle>();
  auto doc = read_document(
      source, "graph", [](const std::string& text) { return io::read_graph(text); },
      [](const std::filesystem::path& path) { return io::read_graph_file(path); });
  return {compile_shared(std::move(doc.graph), std::move(doc.schedule)), std::nullopt, {}};
}

/// One rank's iteration of data-parallel training of `source` (the CLI's
/// --parallel MODE --ranks N --cluster C): a graph file's, as it is.
graph_handle data_parallel_rank(py::handle source, const std::string& mode, int ranks, const std::string& cluster,
                                double bucket_cap_mb) {
  const graph_handle single = load_graph(source);
  const auto m = distributed::parse_data_parallel(mode);
  MEMPLAN_EXPECTS(m.has_value(), invalid_argument, "mode: unknown mode '", mode, "'; known modes: ddp, zero1, zero2, zero3");
  MEMPLAN_EXPECTS(bucket_cap_mb > 0, invalid_argument, "bucket_cap_mb must be positive, got ", bucket_cap_mb);
  distributed::data_parallel_options o{.mode = *m, .group = {&find_cluster(cluster), ranks}};
  o.bucket_cap = static_cast<bytes_t>(bucket_cap_mb * (1 << 20));
  memplan::graph rank = distributed::data_parallel_rank(single.get().g, single.get().order, o);
  schedule order = distributed::listed_order(rank);
  return {compile_shared(std::move(rank), std::move(order)), std::nullopt, {}};
}

graph_handle load_model(const std::string& name, const std::string& device, int batch, double scale, int resolution,
                        int seq_len, const std::string& dtype, const std::string& optimizer, int layers, bool cifar) {
  model::options o;
  o.batch = batch;
  o.scale = scale;
  o.resolution = resolution;
  o.seq_len = seq_len;
  o.type = io::parse_dtype(dtype);
  o.opt = io::parse_optimizer(optimizer);
  o.layers = layers;
  o.cifar = cifar;
  const device_spec& d = find_device(device);
  model_source m{name, o};
  return {build_model(m, d), std::move(m), d.name};
}

graph_handle load_dtr_log(py::handle path) {
  const auto p = std::filesystem::path(py::module_::import("os").attr("fspath")(path).cast<std::string>());
  io::dtr_log log = io::read_dtr_log_file(p);
  return {compile_shared(std::move(log.graph), std::move(log.schedule)), std::nullopt, {}};
}

// ---- sizes and options ----

/// `value` as bytes if it is an int (not a bool).
std::optional<bytes_t> as_bytes(py::handle value, std::string_view what) {
  if (!py::isinstance<py::int_>(value) || py::isinstance<py::bool_>(value)) return std::nullopt;
  const auto bytes = value.cast<std::int64_t>();
  MEMPLAN_EXPECTS(bytes >= 0, invalid_argument, what, ": ", bytes, " bytes is negative");
  return bytes;
}

/// A budget: bytes (int) or a SIZE string (`24GiB`, `60%` of `p`'s baseline peak).
bytes_t read_budget(py::handle budget, const problem& p) {
  if (py::isinstance<py::str>(budget)) return io::resolve(io::parse_size(budget.cast<std::string>()), p.baseline_peak());
  if (const auto bytes = as_bytes(budget, "budget")) return *bytes;
  throw py::type_error("budget: expected bytes (int) or a size string such as '24GiB' or '60%'");
}

/// The host memory a plan's host copies may take at once: bytes or a SIZE without a percent; None: no limit.
std::optional<bytes_t> read_host_memory(py::handle host_memory) {
  if (host_memory.is_none()) return std::nullopt;
  if (py::isinstance<py::str>(host_memory)) return io::parse_host_memory(host_memory.cast<std::string>(), "host_memory");
  if (const auto bytes = as_bytes(host_memory, "host_memory")) return bytes;
  throw py::type_error("host_memory: expected bytes (int), a size string such as '256GiB', or None");
}

/// The CLI's `--seed`, `--time-limit`, `--threads` and planner-specific
/// `--NAME VALUE` options (`options={"filter": "lru"}`).
planner_options read_planner_options(const std::optional<std::uint64_t>& seed, double time_limit, int threads,
                                     const std::optional<py::dict>& options, std::span<const std::string> chosen) {
  planner_options o;
  o.seed = seed.value_or(1);  // the CLI's default
  MEMPLAN_EXPECTS(time_limit >= 0 && threads >= 0, invalid_argument, "time_limit and threads must not be negative");
  o.time_limit_s = time_limit;
  o.threads = threads;
  if (options) {
    for (const auto& [name, value] : *options) {
      io::set_planner_option(o, py::str(name).cast<std::string>(), py::str(value).cast<std::string>(), chosen);
    }
  }
  return o;
}

// ---- plans ----

/// `memplan.Plan`: a plan, its simulation, and the graph it was made for.
struct plan_handle {
  std::shared_ptr<const compiled> source;
  io::planned run;

  [[nodiscard]] json document() const { return io::to_json(run.result, source->p); }
};

plan_handle make_plan(py::handle graph, const std::string& device, py::handle budget, const std::string& planner,
                      std::optional<std::uint64_t> seed, py::handle host_memory, double time_limit, int threads,
                      const std::optional<py::dict>& options) {
  const device_spec& d = find_device(device);
  auto source = load_graph(graph).on(d);
  const bytes_t bytes = read_budget(budget, source->p);
  const planner_entry& entry = find_planner(planner);
  const std::string chosen[] = {planner};
  const planner_options o = read_planner_options(seed, time_limit, threads, options, chosen);
  const std::optional<bytes_t> host = read_host_memory(host_memory);
  py::gil_scoped_release unlocked;
  io::planned run = io::run_and_simulate(entry, source->p, d, bytes, o, false, host);
  return {std::move(source), std::move(run)};
}

py::list compare(py::handle graph, const std::string& device, py::handle budget,
                 std::optional<std::vector<std::string>> planners, std::optional<std::uint64_t> seed,
                 py::handle host_memory, double time_limit, int threads, const std::optional<py::dict>& options) {
  const device_spec& d = find_device(device);
  const auto source = load_graph(graph).on(d);
  const bytes_t bytes = read_budget(budget, source->p);
  const std::vector<std::string> names = planners.value_or(io::default_planner_names());
  std::vector<const planner_entry*> entries;
  for (const auto& name : names) entries.push_back(&find_planner(name));
  const planner_options o = read_planner_options(seed, time_limit, threads, options, names);
  const std::optional<bytes_t> host = read_host_memory(host_memory);
  std::vector<io::planned> rows;
  {
    py::gil_scoped_release unlocked;
    for (const planner_entry* e : entries) rows.push_back(io::run_and_simulate(*e, source->p, d, bytes, o, false, host));
  }
  return to_python(io::compare_json(source->p, d, bytes, rows)["rows"]).cast<py::list>();
}

/// A plan for `p`: a Plan (through its document, as the CLI's plan file
/// goes), a dict, a JSON string or a plan file.
plan read_plan(py::handle source, const problem& p) {
  if (py::isinstance<plan_handle>(source)) return io::read_plan(source.cast<const plan_handle&>().document().dump(), p);
  return read_document(
      source, "plan", [&p](const std::string& text) { return io::read_plan(text, p); },
      [&p](const std::filesystem::path& path) { return io::read_plan_file(path, p); });
}

py::dict simulate(py::handle graph, py::handle plan_source, const std::string& device, py::handle budget) {
  const device_spec& d = find_device(device);
  const auto source = load_graph(graph).on(d);
  plan pl = read_plan(plan_source, source->p);
  const bytes_t bytes = budget.is_none() ? pl.budget : read_budget(budget, source->p);
  io::planned run;
  {
    py::gil_scoped_release unlocked;
    run = io::simulate_plan(source->p, std::move(pl), d, bytes, false);
  }
  return to_python(io::to_json(run)).cast<py::dict>();
}

py::dict validate(py::handle graph, py::handle plan_source, py::handle budget, const std::string& device) {
  const device_spec& d = find_device(device);
  const auto source = load_graph(graph).on(d);
  const plan pl = read_plan(plan_source, source->p);
  const bytes_t bytes = read_budget(budget, source->p);
  validation v;
  {
    py::gil_scoped_release unlocked;
    v = memplan::validate(source->p, pl, d, bytes);
  }
  return to_python(io::to_json(v)).cast<py::dict>();
}

py::list actions_of(const plan_handle& h) {
  const plan& pl = h.run.result;
  const problem& p = h.source->p;
  py::list out;
  for (std::size_t a = 0; a < pl.actions.size(); ++a) {
    const action& act = pl.actions[a];
    const auto index_or_none = [](index_t i) { return i == no_index ? py::object(py::none()) : py::int_(i); };
    py::dict d;
    d["kind"] = std::string(to_string(act.kind));
    d["step"] = index_or_none(act.step);
    d["tensor"] = index_or_none(act.tensor);
    if (act.step >= 0 && static_cast<std::size_t>(act.step) < p.num_steps()) {
      d["op"] = p.op_name[static_cast<std::size_t>(act.step)];
    }
    if (act.tensor >= 0 && static_cast<std::size_t>(act.tensor) < p.num_tensors()) {
      d["tensor_name"] = p.tensor_name[static_cast<std::size_t>(act.tensor)];
    }
    d["parts"] = act.parts;
    d["part"] = index_or_none(act.part);
    const auto waits = pl.waits_of(a);
    d["waits"] = std::vector<index_t>(waits.begin(), waits.end());
    out.append(std::move(d));
  }
  return out;
}

/// The names of a table's rows (devices, planners, models).
template <class Rows, class Name>
std::vector<std::string> names_of(const Rows& rows, Name name) {
  std::vector<std::string> out;
  for (const auto& row : rows) out.emplace_back(std::invoke(name, row));
  return out;
}

// ---- the roofline ----

math_mode read_math(std::string_view math) {
  if (math == "fp32") return math_mode::fp32;
  if (math == "tf32") return math_mode::tf32;
  if (math == "half" || math == "fp16" || math == "bf16") return math_mode::half;
  throw invalid_argument(detail::concat("math: '", math, "' is not one of fp32, tf32, fp16, bf16, half"));
}

double estimate_time_us(const std::string& device, double flops, double bytes, bool gemm, const std::string& math) {
  return roofline_time_us(find_device(device), flops, bytes, read_math(math),
                          gemm ? gemm_efficiency : elementwise_efficiency);
}

// ---- the module ----

void register_errors(py::module_& m) {
  // pybind11 tries the translators registered last first: bases first.
  auto& base = py::register_exception<error>(m, "Error", PyExc_RuntimeError);
  auto& argument = py::register_exception<invalid_argument>(m, "InvalidArgument", PyExc_ValueError);
  py::register_exception<invalid_plan>(m, "InvalidPlan", argument);
  py::register_exception<invalid_graph>(m, "InvalidGraph", PyExc_ValueError);
  py::register_exception<infeasible_budget>(m, "InfeasibleBudget", base);
  py::register_exception<cuda_error>(m, "CudaError", base);
}

void define_graph(py::module_& m) {
  py::class_<graph_handle>(m, "Graph", "A training graph and its schedule (memplan.load_graph, load_model, load_dtr_log).")
      .def_property_readonly("name", [](const graph_handle& g) { return g.get().p.name; })
      .def_property_readonly("num_ops", [](const graph_handle& g) { return g.get().p.num_steps(); })
      .def_property_readonly("num_tensors", [](const graph_handle& g) { return g.get().p.num_tensors(); })
      .def_property_readonly("baseline_peak_bytes", [](const graph_handle& g) { return g.get().p.baseline_peak(); },
                             "Peak memory keeping every tensor (`memplan info`'s baseline_peak_bytes).")
      .def_property_readonly("device", [](const graph_handle& g) { return g.device().empty() ? py::object(py::none()) : py::str(g.device()); },
                             "The device a zoo model's op times are for; None for a graph file.")
      .def(
          "info",
          [](const graph_handle& g, const std::string& device) {
            const device_spec& d = find_device(device);
            const auto c = g.on(d);
            return to_python(io::info_json(c->g, c->p, d));
          },
          py::arg("device") = "titan-rtx", "The document `memplan info --json` prints.")
      .def(
          "to_json", [](const graph_handle& g) { return to_python(io::to_json(g.get().g, g.get().order)); },
          "The memplan-graph document (what `memplan import` writes), as a dict.")
      .def("__repr__", [](const graph_handle& g) {
        return detail::concat("<memplan.Graph '", g.get().p.name, "': ", g.get().p.num_steps(), " ops, ",
                              g.get().p.num_tensors(), " tensors>");
      });
}

void define_plan(py::module_& m) {
  const auto sim = [](auto field) { return [field](const plan_handle& h) { return h.run.sim.*field; }; };
  py::class_<plan_handle>(m, "Plan", "A planner's plan and its simulation (memplan.plan).")
      .def_property_readonly("planner", [](const plan_handle& h) { return h.run.sim.planner; })
      .def_property_readonly("feasible", [](const plan_handle& h) { return io::succeeded(h.run); })
      .def_property_readonly("reason", [](const plan_handle& h) { return h.run.result.reason; })
      .def_property_readonly("failure_kind", [](const plan_handle& h) { return std::string(to_string(io::verdict_of(h.run))); })
      .def_property_readonly("failure", [](const plan_handle& h) { return io::failure_of(h.run); })
      .def_property_readonly("budget_bytes", sim(&report::budget_bytes))
      .def_property_readonly("baseline_peak_bytes", sim(&report::baseline_peak_bytes))
      .def_property_readonly("peak_bytes", sim(&report::peak_bytes))
      .def_property_readonly("peak_live_bytes", sim(&report::peak_live_bytes))
      .def_property_readonly("arena_bytes", sim(&report::arena_bytes))
      .def_property_readonly("time_us", sim(&report::time_us))
      .def_property_readonly("baseline_time_us", sim(&report::baseline_time_us))
      .def_property_readonly("overhead", sim(&report::overhead))
      .def_property_readonly("swapped_bytes", sim(&report::swapped_out_bytes))
      .def_property_readonly("recomputed_ops", sim(&report::recomputed_ops))
      .def_property_readonly("split_ops", sim(&report::split_ops))
      .def_property_readonly("host_bytes", [](const plan_handle& h) { return h.run.host_bytes; })
      .def_property_readonly("planning_time_s", [](const plan_handle& h) { return h.run.planning_time_s; })
      .def_property_readonly(
          "report", [](const plan_handle& h) { return to_python(io::to_json(h.run)); },
          "The object `memplan plan --json` prints, as a dict.")
      .def_property_readonly("actions", &actions_of,
                             "The action list: dicts {kind, step, tensor, parts, part, waits} (dense indices; "
                             "None where not set), with `op` or `tensor_name`.")
      .def(
          "to_json", [](const plan_handle& h) { return to_python(h.document()); },
          "The memplan-plan document `memplan plan --out FILE` writes, as a dict.")
      .def(
          "save",
          [](const plan_handle& h, py::handle path) {
            const auto file = py::module_::import("os").attr("fspath")(path).cast<std::string>();
            std::ofstream f(file);
            MEMPLAN_EXPECTS(f.good(), invalid_argument, "save: cannot write '", file, "'");
            f << h.document().dump(1) << "\n";
          },
          py::arg("path"), "Writes the memplan-plan document, as `memplan plan --out FILE` does.")
      .def("__repr__", [](const plan_handle& h) {
        return detail::concat("<memplan.Plan ", h.run.sim.planner, io::succeeded(h.run) ? " feasible" : " infeasible",
                              ", time ", h.run.sim.time_us, " us, arena ", h.run.sim.arena_bytes, " B>");
      });
}

}  // namespace
}  // namespace memplan::python

PYBIND11_MODULE(memplan, m) {
  using namespace memplan::python;
  namespace mp = memplan;
  m.doc() = "memplan: GPU memory planning for DNN training (swap, recompute, split); docs/python.md";
#ifdef MEMPLAN_VERSION
  m.attr("__version__") = MEMPLAN_VERSION;
#endif
  register_errors(m);
  define_graph(m);
  define_plan(m);

  m.def("load_graph", &load_graph, py::arg("source"),
        "A memplan-graph document: a path (str or os.PathLike), a JSON string or a dict. Raises ValueError "
        "naming the field and the op or tensor if it is malformed.");
  m.def("load_model", &load_model, py::arg("name"), py::arg("device") = "v100", py::arg("batch") = 32,
        py::arg("scale") = 1.0, py::arg("resolution") = 0, py::arg("seq_len") = 0, py::arg("dtype") = "fp32",
        py::arg("optimizer") = "sgd", py::arg("layers") = 0, py::arg("cifar") = false,
        "A zoo model (the CLI's --model NAME and its options), its op times for `device`; planned on another "
        "device, it is built again for that one.");
  m.def("data_parallel_rank", &data_parallel_rank, py::arg("graph"), py::arg("mode") = "ddp", py::arg("ranks") = 8,
        py::arg("cluster") = "a100-node", py::arg("bucket_cap_mb") = 25.0,
        "One rank's iteration of data-parallel training of `graph` (ddp, zero1, zero2, zero3; docs/distributed.md): "
        "the CLI's --parallel MODE --ranks N --cluster C.");
  m.def("load_dtr_log", &load_dtr_log, py::arg("path"), "A DTR operator log (the CLI's --dtr-log FILE).");
  m.def("plan", &make_plan, py::arg("graph"), py::arg("device") = "v100", py::arg("budget") = "50%",
        py::arg("planner") = "tsplit", py::arg("seed") = py::none(), py::arg("host_memory") = py::none(),
        py::arg("time_limit") = 0.0, py::arg("threads") = 0, py::arg("options") = py::none(),
        "Plans `graph` (a Graph, path, JSON string or dict) on `device` within `budget` (bytes, or a SIZE "
        "string such as '24GiB' or '60%'), as `memplan plan`.");
  m.def("compare", &compare, py::arg("graph"), py::arg("device") = "v100", py::arg("budget") = "50%",
        py::arg("planners") = py::none(), py::arg("seed") = py::none(), py::arg("host_memory") = py::none(),
        py::arg("time_limit") = 0.0, py::arg("threads") = 0, py::arg("options") = py::none(),
        "The rows of `memplan compare --json`: one report dict per planner (by default every planner but the "
        "searches home and milp).");
  m.def("simulate", &simulate, py::arg("graph"), py::arg("plan"), py::arg("device") = "v100",
        py::arg("budget") = py::none(),
        "Simulates a plan (a Plan, dict, JSON string or plan file) as `memplan simulate --json`; budget: the "
        "plan's own when None.");
  m.def("validate", &validate, py::arg("graph"), py::arg("plan"), py::arg("budget"), py::arg("device") = "titan-rtx",
        "Checks a plan as `memplan validate --json`: {valid, errors, peak_bytes, time_s[, failure_kind]}.");
  m.def("devices", [] { return names_of(mp::devices(), &mp::device_spec::name); }, "The named devices.");
  m.def("planners", [] { return names_of(mp::planners(), &mp::planner_entry::name); }, "The registered planners.");
  m.def("models", [] { return names_of(mp::model::names(), std::identity{}); }, "The zoo's models.");
  m.def("estimate_time_us", &estimate_time_us, py::arg("device"), py::arg("flops"), py::arg("bytes"),
        py::arg("gemm") = true, py::arg("math") = "fp32",
        "memplan's roofline time in µs of one kernel on a named device (cost/roofline.hpp): launch + "
        "max(flops / (peak * compute_eff), bytes / (bandwidth * memory_eff)), with GEMM efficiencies when gemm "
        "else element-wise ones; math: fp32, tf32, fp16/bf16/half.");
}
