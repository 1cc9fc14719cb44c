// Tests of memplan/io: memplan-graph and memplan-plan documents, SIZE.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <sstream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "memplan/compile.hpp"
#include "memplan/io/device_profile.hpp"
#include "memplan/io/graph_json.hpp"
#include "memplan/io/plan_json.hpp"
#include "memplan/io/size.hpp"
#include "memplan/plan.hpp"
#include "memplan/plan_builder.hpp"
#include "memplan/problem.hpp"

namespace {

using nlohmann::json;
namespace io = memplan::io;

std::filesystem::path fixture(std::string_view name) {
  return std::filesystem::path(MEMPLAN_SOURCE_DIR) / "tests" / "data" / name;
}

std::string text_of(std::string_view name) {
  std::ifstream in(fixture(name));
  std::ostringstream text;
  text << in.rdbuf();
  return std::move(text).str();
}

json tiny() { return json::parse(text_of("tiny.json")); }

/// `text` with its only occurrence of `from` replaced by `to`.
std::string replaced(std::string text, std::string_view from, std::string_view to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  REQUIRE(text.find(from, at + 1) == std::string::npos);
  return text.replace(at, from.size(), to);
}

/// Reading `text` throws exactly `Error` whose message contains every needle.
template <class Error, class Read>
void expect_error(Read&& read, std::initializer_list<std::string_view> needles) {
  try {
    read();
    FAIL("no exception; expected one mentioning ", *needles.begin());
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const auto needle : needles) {
      CHECK_MESSAGE(message.find(needle) != std::string::npos, "'", needle, "' not in: ", message);
    }
  }
}

void expect_invalid_graph(const std::string& text, std::initializer_list<std::string_view> needles) {
  expect_error<memplan::invalid_graph>([&] { static_cast<void>(io::read_graph(text)); }, needles);
}

/// `tiny.json` with one change.
std::string tiny_with(const std::function<void(json&)>& change) {
  json doc = tiny();
  change(doc);
  return doc.dump();
}

// Positions in tiny.json's arrays.
constexpr int fc1 = 1, relu = 2, relu_grad = 5, x = 0, h = 2;

void check_same(const memplan::graph& a, const memplan::graph& b) {
  CHECK(a.name() == b.name());
  REQUIRE(a.num_tensors() == b.num_tensors());
  REQUIRE(a.num_ops() == b.num_ops());
  for (memplan::index_t t = 0; t < static_cast<memplan::index_t>(a.num_tensors()); ++t) {
    const auto &p = a.tensor(t), &q = b.tensor(t);
    CHECK(p.id == q.id);
    CHECK(p.name == q.name);
    CHECK(p.bytes == q.bytes);
    CHECK(p.kind == q.kind);
    CHECK(p.shape == q.shape);
    CHECK(p.dtype == q.dtype);
  }
  for (memplan::index_t v = 0; v < static_cast<memplan::index_t>(a.num_ops()); ++v) {
    const auto &p = a.op(v), &q = b.op(v);
    CHECK(p.id == q.id);
    CHECK(p.name == q.name);
    CHECK(p.type == q.type);
    CHECK(p.phase == q.phase);
    CHECK(p.time_us == q.time_us);
    CHECK(p.workspace_bytes == q.workspace_bytes);
    CHECK(p.inputs == q.inputs);
    CHECK(p.outputs == q.outputs);
    CHECK(p.recomputable == q.recomputable);
    CHECK(p.split_dims == q.split_dims);
  }
}

io::graph_document round_trip(const io::graph_document& doc) {
  std::ostringstream out;
  io::write_graph(out, doc.graph, doc.schedule);
  return io::read_graph(out.str());
}

}  // namespace

TEST_CASE("a graph built in code gets ids from add_tensor and add_op, and writes a file that reads back") {
  memplan::graph g("in-code");
  const memplan::index_t x = g.add_tensor({.name = "x", .bytes = 400, .kind = memplan::tensor_kind::input, .shape = {}, .dtype = {}});
  const memplan::index_t w = g.add_tensor({.id = 10, .name = "w", .bytes = 40, .kind = memplan::tensor_kind::parameter, .shape = {}, .dtype = {}});
  const memplan::index_t y = g.add_tensor({.name = "y", .bytes = 400, .kind = memplan::tensor_kind::activation, .shape = {}, .dtype = {}});
  g.add_op({.name = "fc", .type = "linear", .time_us = 5, .inputs = {x, w}, .outputs = {y}, .split_dims = {}});
  g.add_op({.id = 7, .name = "relu", .type = "relu", .time_us = 1, .inputs = {y}, .outputs = {}, .split_dims = {}});
  // Ids left out are one more than the largest so far: x 0, w 10 (given), y 11; fc 0, relu 7 (given).
  CHECK(g.tensor(x).id == 0);
  CHECK(g.tensor(w).id == 10);
  CHECK(g.tensor(y).id == 11);
  CHECK(g.op(0).id == 0);
  CHECK(g.op(1).id == 7);
  // The framework drops x after relu (a DTR log's RELEASE): written as relu's id, read back as its index.
  g.set_released_after(x, 1);
  CHECK_THROWS_WITH_AS(g.set_released_after(y, 2),
                       "tensor 'y': released_after names op index 2, which the graph does not have (2 ops)",
                       memplan::invalid_graph);
  const auto back = round_trip({g, memplan::topological_schedule(g)});
  REQUIRE(back.graph.num_tensors() == 3);
  CHECK(back.graph.tensor(2).id == 11);
  CHECK(back.graph.op(1).id == 7);
  CHECK(back.graph.tensor(x).released_after == 1);
  CHECK(back.graph.tensor(y).released_after == memplan::no_index);
  const memplan::problem p = memplan::compile(back.graph, back.schedule);
  CHECK(p.live_end(x) == 0);
  CHECK(p.held_until(x) == 1);
  CHECK(p.held_until(y) == 1);
}

TEST_CASE("memplan-graph: tiny.json reads with its ids, schedule and defaults") {
  const auto doc = io::read_graph_file(fixture("tiny.json"));
  const auto& g = doc.graph;
  CHECK(g.name() == "tiny-hand");
  REQUIRE(g.num_tensors() == 9);
  REQUIRE(g.num_ops() == 7);
  // The file lists sgd (id 70) first; the schedule maps ids to dense indices.
  CHECK(doc.schedule == memplan::schedule{1, 2, 3, 4, 5, 6, 0});
  CHECK(g.tensor(x).id == 100);
  CHECK(g.tensor(x).shape == std::vector<std::int64_t>{10, 25});
  CHECK(g.tensor(x).dtype == "float32");
  CHECK(g.tensor(h).shape.empty());
  CHECK(g.tensor(h).dtype.empty());
  CHECK(g.op(fc1).id == 10);
  CHECK(g.op(fc1).time_us == 40.5);
  CHECK(g.op(fc1).workspace_bytes == 300);
  CHECK(g.op(fc1).inputs == std::vector<memplan::index_t>{0, 1});
  CHECK(g.op(fc1).split_dims == std::vector<int>{0});
  // Defaults: recomputable follows the phase; workspace 0; split_dims [].
  CHECK(g.op(fc1).recomputable);
  CHECK_FALSE(g.op(relu).recomputable);  // given: false
  CHECK_FALSE(g.op(4).recomputable);     // loss_grad, backward, absent
  CHECK(g.op(relu_grad).recomputable);   // given: true
  CHECK_FALSE(g.op(0).recomputable);     // sgd, update, absent
  CHECK(g.op(relu).workspace_bytes == 0);
  CHECK(g.op(relu).split_dims.empty());
  CHECK(g.producer(h) == fc1);
}

TEST_CASE("memplan-graph: tiny.json's baseline peak is the hand-computed 9900 bytes") {
  // tests/data/README.md: step 4 (relu_grad) holds x 1000 + w 200 + h 4000 +
  // dy 500 + dh 4000 + w.momentum 200 = 9900.
  const auto doc = io::read_graph_file(fixture("tiny.json"));
  const auto p = memplan::compile(doc.graph, doc.schedule);
  CHECK(p.baseline_memory() == std::vector<memplan::bytes_t>{5700, 5900, 5904, 5904, 9900, 6600, 600});
  CHECK(p.baseline_peak() == 9900);
  CHECK(p.baseline_time_us() == doctest::Approx(130.75));
}

TEST_CASE("memplan-graph: the PyTorch exports' baseline peaks are the hand-computed ones") {
  // tests/data/README.md works both out tensor by tensor.
  const auto mlp_doc = io::read_graph_file(fixture("pytorch_mlp.json"));
  const auto mlp = memplan::compile(mlp_doc.graph, mlp_doc.schedule);
  CHECK(mlp.num_steps() == 26);
  CHECK(mlp.num_tensors() == 25);
  CHECK(mlp.baseline_peak() == 9520);  // 4112 at steps 11 and 12 + 5408 persistent
  CHECK(mlp.baseline_memory()[11] == 9520);
  CHECK(mlp.baseline_memory()[12] == 9520);
  CHECK(mlp.baseline_memory().back() == 5408);

  const auto cnn_doc = io::read_graph_file(fixture("pytorch_cnn.json"));
  const auto cnn = memplan::compile(cnn_doc.graph, cnn_doc.schedule);
  CHECK(cnn.num_steps() == 37);
  CHECK(cnn.num_tensors() == 42);
  CHECK(cnn.baseline_peak() == 28288);  // 22088 at step 16 + 6200 persistent
  CHECK(cnn.baseline_memory()[15] == 21064 + 6200);
  CHECK(cnn.baseline_memory()[16] == 28288);
  CHECK(cnn.baseline_memory()[17] == 18024 + 6200);
  CHECK(cnn.baseline_memory().back() == 6200);
  // BatchNorm's forward updates running statistics: the exporter forbids recomputing it.
  CHECK(cnn_doc.graph.op(3).name == "forward.native_batch_norm.1");
  CHECK_FALSE(cnn_doc.graph.op(3).recomputable);
  CHECK(cnn_doc.graph.op(0).recomputable);

  for (const auto* doc : {&mlp_doc, &cnn_doc}) {
    const auto again = round_trip(*doc);
    check_same(doc->graph, again.graph);
    CHECK(again.schedule == doc->schedule);
  }
}

TEST_CASE("memplan-graph: without a schedule, ops run in array order") {
  const auto doc = io::read_graph(tiny_with([](json& d) {
    d.erase("schedule");
    d["ops"].erase(0);  // sgd, listed first, would run before fc1_grad makes dw
  }));
  CHECK(doc.schedule == memplan::schedule{0, 1, 2, 3, 4, 5});
}

TEST_CASE("memplan-graph: write then read round-trips exactly") {
  const auto doc = io::read_graph_file(fixture("tiny.json"));
  const auto again = round_trip(doc);
  check_same(doc.graph, again.graph);
  CHECK(again.schedule == doc.schedule);
  // And to_json is a fixed point.
  CHECK(io::to_json(again.graph, again.schedule) == io::to_json(doc.graph, doc.schedule));

  // Integers up to 2^63 - 1 and fractional times survive.
  auto big = io::read_graph(tiny_with([](json& d) {
    d["tensors"] = json::array({{{"id", 9223372036854775807LL}, {"name", "huge"}, {"bytes", 9223372036854775807LL},
                                 {"kind", "other"}}});
    d["ops"] = json::array({{{"id", 9223372036854775807LL}, {"name", "n"}, {"type", "t"}, {"phase", "forward"},
                             {"time_us", 0.1 + 0.2}, {"inputs", {9223372036854775807LL}}, {"outputs", json::array()}}});
    d.erase("schedule");
  }));
  const auto again_big = round_trip(big);
  check_same(big.graph, again_big.graph);
  CHECK(again_big.graph.tensor(0).bytes == 9223372036854775807LL);
  CHECK(again_big.graph.op(0).time_us == 0.1 + 0.2);
}

TEST_CASE("memplan-graph: not JSON, truncated, wrong header") {
  expect_invalid_graph("", {"memplan-graph", "not valid JSON", "line 1"});
  expect_invalid_graph(tiny().dump().substr(0, 200), {"not valid JSON", "line 1, column"});
  expect_invalid_graph("[1, 2]", {"memplan-graph", "must be a JSON object"});
  expect_invalid_graph(tiny_with([](json& d) { d.erase("format"); }), {"format", "missing"});
  expect_invalid_graph(tiny_with([](json& d) { d["format"] = "memplan-plan"; }), {"format", "memplan-graph"});
  expect_invalid_graph(tiny_with([](json& d) { d["version"] = 2; }), {"version", "must be 1", "got 2"});
  expect_invalid_graph(tiny_with([](json& d) { d["version"] = "1"; }), {"version", "integer"});
  expect_invalid_graph(tiny_with([](json& d) { d.erase("version"); }), {"version", "missing"});
  expect_invalid_graph(tiny_with([](json& d) { d["tensors"] = json::object(); }), {"tensors", "must be an array"});
  expect_invalid_graph(tiny_with([](json& d) { d.erase("ops"); }), {"ops", "missing"});
  expect_invalid_graph(tiny_with([](json& d) { d["name"] = 3; }), {"name", "must be a string"});
}

TEST_CASE("memplan-graph: tensor fields") {
  const auto set = [](const char* field, json value) {
    return tiny_with([&](json& d) { d["tensors"][h][field] = value; });
  };
  // bytes: 1.5, "12", -1, 1e30, 2^63 all rejected, naming the field, the tensor and its id.
  for (const json& bad : {json(1.5), json("12"), json(-1), json(1e30), json(9223372036854775808ULL), json(true),
                          json(nullptr)}) {
    CAPTURE(bad.dump());
    expect_invalid_graph(set("bytes", bad), {"tensor 'h' (id 102)", "field 'bytes'", "integer", bad.dump()});
  }
  expect_invalid_graph(tiny_with([](json& d) { d["tensors"][h].erase("bytes"); }),
                       {"tensor 'h' (id 102)", "field 'bytes' is missing"});
  expect_invalid_graph(set("kind", "weights"), {"tensor 'h' (id 102)", "field 'kind'", "\"parameter\"", "weights"});
  expect_invalid_graph(set("kind", 1), {"tensor 'h' (id 102)", "field 'kind'"});
  expect_invalid_graph(set("name", json::array()), {"tensor id 102 (tensors[2])", "field 'name'", "string"});
  expect_invalid_graph(set("shape", "3x4"), {"tensor 'h' (id 102)", "field 'shape'", "array"});
  expect_invalid_graph(set("shape", {3, -4}), {"tensor 'h' (id 102)", "field 'shape[1]'", "-4"});
  expect_invalid_graph(set("dtype", 32), {"tensor 'h' (id 102)", "field 'dtype'", "string"});
  expect_invalid_graph(set("released_after", 999), {"tensor 'h' (id 102)", "field 'released_after'", "names op id 999"});
  expect_invalid_graph(set("released_after", -1), {"tensor 'h' (id 102)", "field 'released_after'"});
  expect_invalid_graph(tiny_with([](json& d) { d["tensors"][h] = 5; }), {"tensors[2]", "must be a JSON object"});
}

TEST_CASE("memplan-graph: tensor and op ids") {
  expect_invalid_graph(tiny_with([](json& d) { d["tensors"][h].erase("id"); }),
                       {"tensor 'h' (tensors[2])", "field 'id' is missing"});
  expect_invalid_graph(tiny_with([](json& d) { d["tensors"][h]["id"] = -3; }),
                       {"tensor 'h' (tensors[2])", "field 'id'", "-3"});
  expect_invalid_graph(tiny_with([](json& d) { d["tensors"][h]["id"] = 2.5; }),
                       {"tensor 'h' (tensors[2])", "field 'id'", "2.5"});
  expect_invalid_graph(tiny_with([](json& d) { d["tensors"][h]["id"] = 100; }),
                       {"tensor 'h' (id 100)", "field 'id'", "repeats the id of tensor 'x' (id 100)"});
  expect_invalid_graph(tiny_with([](json& d) { d["ops"][relu]["id"] = 10; }),
                       {"op 'relu' (id 10)", "field 'id'", "repeats the id of op 'fc1' (id 10)"});
  expect_invalid_graph(tiny_with([](json& d) { d["ops"][relu]["id"] = "20"; }),
                       {"op 'relu' (ops[2])", "field 'id'", "\"20\""});
}

TEST_CASE("memplan-graph: op fields") {
  const auto set = [](const char* field, json value) {
    return tiny_with([&](json& d) { d["ops"][relu][field] = value; });
  };
  const auto drop = [](const char* field) { return tiny_with([&](json& d) { d["ops"][relu].erase(field); }); };
  for (const char* field : {"name", "type", "phase", "time_us", "inputs", "outputs"}) {
    CAPTURE(field);
    expect_invalid_graph(drop(field), {"field '", field, "' is missing"});
  }
  expect_invalid_graph(drop("time_us"), {"op 'relu' (id 20)", "field 'time_us' is missing"});
  for (const json& bad : {json(-1), json("12"), json(nullptr), json::array()}) {
    expect_invalid_graph(set("time_us", bad), {"op 'relu' (id 20)", "field 'time_us'", "non-negative number"});
  }
  expect_invalid_graph(set("phase", "fwd"), {"op 'relu' (id 20)", "field 'phase'", "\"forward\", \"backward\""});
  expect_invalid_graph(set("type", 1), {"op 'relu' (id 20)", "field 'type'", "string"});
  expect_invalid_graph(set("inputs", 102), {"op 'relu' (id 20)", "field 'inputs' must be an array"});
  expect_invalid_graph(set("inputs", {"h"}), {"op 'relu' (id 20)", "field 'inputs[0]'", "\"h\""});
  expect_invalid_graph(set("outputs", json::object()), {"op 'relu' (id 20)", "field 'outputs' must be an array"});
  expect_invalid_graph(set("workspace_bytes", -1), {"op 'relu' (id 20)", "field 'workspace_bytes'", "-1"});
  expect_invalid_graph(set("workspace_bytes", 0.5), {"op 'relu' (id 20)", "field 'workspace_bytes'", "0.5"});
  expect_invalid_graph(set("recomputable", "yes"), {"op 'relu' (id 20)", "field 'recomputable'", "true or false"});
  expect_invalid_graph(set("recomputable", 1), {"op 'relu' (id 20)", "field 'recomputable'"});
  expect_invalid_graph(set("split_dims", 0), {"op 'relu' (id 20)", "field 'split_dims' must be an array"});
  expect_invalid_graph(set("split_dims", {-1}), {"op 'relu' (id 20)", "field 'split_dims[0]'"});
  expect_invalid_graph(set("split_dims", {4294967296LL}), {"op 'relu' (id 20)", "field 'split_dims[0]'", "2147483647"});
  expect_invalid_graph(tiny_with([](json& d) { d["ops"][relu] = "relu"; }), {"ops[2]", "must be a JSON object"});
}

TEST_CASE("memplan-graph: references, producers, cycles and schedules") {
  expect_invalid_graph(tiny_with([](json& d) { d["ops"][relu]["inputs"] = {102, 999}; }),
                       {"op 'relu' (id 20)", "field 'inputs[1]'", "tensor id 999"});
  expect_invalid_graph(tiny_with([](json& d) { d["ops"][relu]["outputs"] = {999}; }),
                       {"op 'relu' (id 20)", "field 'outputs[0]'", "tensor id 999"});
  expect_invalid_graph(tiny_with([](json& d) { d["ops"][relu]["outputs"] = {103, 102}; }),
                       {"op 'relu' (id 20)", "field 'outputs'", "tensor 'h' (id 102)", "op 'fc1' (id 10)",
                        "one producer"});
  expect_invalid_graph(tiny_with([](json& d) { d["ops"][relu]["outputs"] = {103, 103}; }),
                       {"op 'relu' (id 20)", "field 'outputs'", "tensor 'y' (id 103) twice"});
  expect_invalid_graph(tiny_with([](json& d) { d["ops"][relu]["inputs"] = {103}; }),
                       {"op 'relu' (id 20)", "field 'outputs'", "tensor 'y' (id 103)", "also reads"});
  // A cycle: fc1 reads y, which relu makes from fc1's h.
  expect_invalid_graph(tiny_with([](json& d) { d["ops"][fc1]["inputs"] = {100, 101, 103}; }), 
                       {"field 'ops' has a cycle", "op 'relu' (id 20) -> op 'fc1' (id 10) -> op 'relu' (id 20)"});
  // Schedules naming unknown or repeated ops, or leaving one out.
  expect_invalid_graph(tiny_with([](json& d) { d["schedule"][3] = 41; }), {"field 'schedule[3]'", "op id 41"});
  expect_invalid_graph(tiny_with([](json& d) { d["schedule"][3] = 30; }),
                       {"field 'schedule[3]'", "op 'loss' (id 30) a second time"});
  expect_invalid_graph(tiny_with([](json& d) { d["schedule"].erase(6); }),
                       {"field 'schedule'", "6 of the 7", "op 'sgd' (id 70) is missing"});
  expect_invalid_graph(tiny_with([](json& d) { d["schedule"][0] = -10; }), {"field 'schedule[0]'", "-10"});
  expect_invalid_graph(tiny_with([](json& d) { d["schedule"] = "10,20"; }), {"field 'schedule' must be an array"});
  // Not topological: relu before fc1.
  expect_invalid_graph(tiny_with([](json& d) { d["schedule"][0] = 20, d["schedule"][1] = 10; }),
                       {"field 'schedule'", "not a topological order", "op 'relu' (id 20) at position 0",
                        "tensor 'h' (id 102)", "op 'fc1' (id 10) at position 1"});
  // Without a schedule the array order must be topological: sgd is listed first.
  expect_invalid_graph(tiny_with([](json& d) { d.erase("schedule"); }),
                       {"field 'ops'", "array order", "op 'sgd' (id 70) at position 0", "tensor 'dw' (id 107)"});
}

TEST_CASE("memplan-graph: files") {
  expect_error<memplan::invalid_argument>(
      [] { static_cast<void>(io::read_graph_file(fixture("no-such-file.json"))); }, {"cannot open", "no-such-file"});
}

TEST_CASE("memplan-plan: round trip with every action kind, parts and waits") {
  const auto doc = io::read_graph_file(fixture("tiny.json"));
  const auto p = memplan::compile(doc.graph, doc.schedule);
  memplan::plan_builder b(p, "hand", 9000);
  b.compute(0, 4);  // fc1 in 4 parts: x has 10 samples
  b.compute(1);
  b.swap_out(2);    // h (tensor index 2)
  b.compute(2);
  b.compute(3);
  b.swap_in(2);
  b.compute(4);
  b.free(6);        // dh
  b.recompute(4);
  b.compute(5, 2);
  b.compute(6);
  b.decide(2, memplan::decision::swap);
  b.decide(6, memplan::decision::recompute);
  b.decide(3, memplan::decision::split);
  b.infeasible(memplan::failure_kind::out_of_memory, "op 'relu_grad' needs 9.7 KiB", 9900);
  const auto pl = std::move(b).finish();

  std::ostringstream out;
  io::write_plan(out, pl, p);
  const auto text = out.str();
  const auto again = io::read_plan(text, p);
  CHECK(again.planner == "hand");
  CHECK_FALSE(again.feasible);
  CHECK(again.reason == pl.reason);
  CHECK(again.budget == 9000);
  CHECK(again.best_peak == 9900);
  CHECK(again.decisions == pl.decisions);
  REQUIRE(again.actions.size() == pl.actions.size());
  for (std::size_t a = 0; a < pl.actions.size(); ++a) {
    CAPTURE(a);
    CHECK(again.actions[a].kind == pl.actions[a].kind);
    CHECK(again.actions[a].step == pl.actions[a].step);
    CHECK(again.actions[a].tensor == pl.actions[a].tensor);
    CHECK(again.actions[a].parts == pl.actions[a].parts);
  }
  CHECK(again.wait_begin == pl.wait_begin);
  CHECK(again.waits == pl.waits);
  CHECK(io::to_json(again, p) == io::to_json(pl, p));

  // Ids in the file are the graph file's ids; waits and parts only where needed.
  const auto j = json::parse(text);
  CHECK(j["actions"][0] == json{{"kind", "compute"}, {"op", 10}, {"parts", 4}});
  CHECK(j["actions"][9] == json{{"kind", "compute"}, {"op", 60}, {"parts", 2}});
  CHECK(j["actions"][2] == json{{"kind", "swap_out"}, {"tensor", 102}, {"waits", {0}}});
  CHECK(j["actions"][5] == json{{"kind", "swap_in"}, {"tensor", 102}, {"waits", {2}}});
  CHECK(j["decisions"]["102"] == "swap");
  CHECK(j["decisions"]["100"] == "keep");
  CHECK_FALSE(j.contains("offloaded_state"));  // only where the plan has some

  // Offloaded state by the graph's ids, read back as ascending indices.
  memplan::plan off = pl;
  off.offloaded_state = {1, 8};  // w (101), w.momentum (108)
  std::ostringstream off_out;
  io::write_plan(off_out, off, p);
  CHECK(json::parse(off_out.str())["offloaded_state"] == json{101, 108});
  json reordered = json::parse(off_out.str());
  reordered["offloaded_state"] = {108, 101};
  CHECK(io::read_plan(reordered.dump(), p).offloaded_state == std::vector<memplan::index_t>{1, 8});
}

TEST_CASE("memplan-plan: malformed plans name the action and the field") {
  const auto doc = io::read_graph_file(fixture("tiny.json"));
  const auto p = memplan::compile(doc.graph, doc.schedule);
  std::ostringstream out;
  io::write_plan(out, memplan::keep_all_plan(p, 10000), p);
  const json good = json::parse(out.str());
  CHECK(io::read_plan(good.dump(), p).actions.size() == 7);
  const auto bad = [&](const std::function<void(json&)>& change, std::initializer_list<std::string_view> needles) {
    json d = good;
    change(d);
    expect_error<memplan::invalid_graph>([&] { static_cast<void>(io::read_plan(d.dump(), p)); }, needles);
  };
  bad([](json& d) { d["actions"][3]["op"] = 99; }, {"action 3", "field 'op'", "op id 99"});
  bad([](json& d) { d["actions"][3]["kind"] = "run"; }, {"action 3", "field 'kind'", "\"swap_out\"", "run"});
  bad([](json& d) { d["actions"][3]["waits"] = {3}; }, {"action 3", "field 'waits[0]'", "not earlier"});
  bad([](json& d) { d["actions"][3]["waits"] = {5}; }, {"action 3", "field 'waits[0]'", "action 5"});
  bad([](json& d) { d["actions"][3]["waits"] = 1; }, {"action 3", "field 'waits' must be an array"});
  bad([](json& d) { d["actions"][3]["parts"] = 0; }, {"action 3", "field 'parts'", "[1, 2147483647]"});
  bad([](json& d) { d["actions"][3]["tensor"] = 102; }, {"action 3", "field 'tensor'", "compute action"});
  bad([](json& d) { d["actions"][3].erase("op"); }, {"action 3", "field 'op' is missing"});
  bad([](json& d) { d["actions"][3] = {{"kind", "free"}, {"tensor", 555}}; }, {"action 3", "field 'tensor'", "555"});
  bad([](json& d) { d["actions"][3] = {{"kind", "free"}, {"tensor", 102}, {"parts", 2}}; },
      {"action 3", "field 'parts'", "free action"});
  bad([](json& d) { d["actions"][3] = {{"kind", "swap_in"}, {"op", 10}}; }, {"action 3", "field 'op'", "swap_in"});
  bad([](json& d) { d["actions"][3] = 7; }, {"action 3", "must be a JSON object"});
  bad([](json& d) { d["decisions"]["999"] = "keep"; }, {"field 'decisions.999'", "tensor id"});
  bad([](json& d) { d["decisions"]["abc"] = "keep"; }, {"field 'decisions.abc'"});
  bad([](json& d) { d["decisions"]["102"] = "evict"; }, {"field 'decisions.102'", "\"recompute\"", "evict"});
  bad([](json& d) { d["decisions"] = json::array(); }, {"field 'decisions' must be an object"});
  bad([](json& d) { d["format"] = "memplan-graph"; }, {"memplan-plan", "field 'format'"});
  bad([](json& d) { d["budget_bytes"] = -5; }, {"field 'budget_bytes'", "-5"});
  bad([](json& d) { d["feasible"] = "yes"; }, {"field 'feasible'", "true or false"});
  bad([](json& d) { d.erase("planner"); }, {"field 'planner' is missing"});
  bad([](json& d) { d["offloaded_state"] = {101, 999}; }, {"field 'offloaded_state[1]'", "tensor id 999"});
  bad([](json& d) { d["offloaded_state"] = {101, 101}; }, {"field 'offloaded_state[1]'", "101 again"});
  bad([](json& d) { d["offloaded_state"] = 101; }, {"field 'offloaded_state' must be an array"});
  expect_error<memplan::invalid_graph>([&] { static_cast<void>(io::read_plan("{\"format\": ", p)); },
                                       {"memplan-plan", "not valid JSON"});
}

TEST_CASE("memplan-graph, memplan-plan, device profiles: an object that repeats a key is rejected") {
  // nlohmann keeps the last value of a repeated key; the readers refuse the document instead.
  const auto tiny_text = text_of("tiny.json");
  expect_invalid_graph(replaced(tiny_text, "\"version\": 1,", "\"version\": 1, \"version\": 1,"),
                       {"memplan-graph: the top-level object repeats the key \"version\""});
  // ops[1] is fc1 (the file lists sgd first).
  expect_invalid_graph(replaced(tiny_text, "\"time_us\": 40.5,", "\"time_us\": 40.5, \"time_us\": 4.05,"),
                       {"memplan-graph: the object at ops[1] repeats the key \"time_us\""});
  expect_invalid_graph(R"({"format": "memplan-graph", "a": [[1, {"k": 1}], {"k": {"x": 1, "y": 2, "x": 3}}]})",
                       {"memplan-graph: the object at a[1].k repeats the key \"x\""});
  CHECK(io::read_graph(tiny_text).graph.num_ops() == 7);  // the same keys in different objects are fine

  const auto doc = io::read_graph_file(fixture("tiny.json"));
  const auto p = memplan::compile(doc.graph, doc.schedule);
  const auto plan_text = text_of("tiny-invalid-plan.json");
  expect_error<memplan::invalid_graph>(
      [&] {
        static_cast<void>(
            io::read_plan(replaced(plan_text, R"("102": "recompute")", R"("102": "recompute", "102": "keep")"), p));
      },
      {"memplan-plan: the object at decisions repeats the key \"102\""});
  expect_error<memplan::invalid_graph>(
      [&] {
        const auto text = replaced(plan_text, R"({"kind": "free", "tensor": 102})",
                                   R"({"kind": "free", "tensor": 102, "tensor": 103})");
        static_cast<void>(io::read_plan(text, p));
      },
      {"memplan-plan: the object at actions[2] repeats the key \"tensor\""});

  memplan::device_spec base;
  base.name = "base";
  const auto profile = io::parse_device_profile(R"({"name": "mine", "h2d": {"bandwidth_gb_s": 24.5}})", base);
  CHECK(profile.name == "mine");
  CHECK(profile.h2d.bandwidth_gb_s == 24.5);
  expect_error<memplan::invalid_graph>(
      [&] {
        static_cast<void>(io::parse_device_profile(
            R"({"h2d": {"bandwidth_gb_s": 24.5, "latency_us": 9, "latency_us": 1}})", base));
      },
      {"device profile: the object at h2d repeats the key \"latency_us\""});
}

TEST_CASE("memplan-graph: op times must add up to a finite number") {
  // Each 1e308 us is finite; fc1 (step 0) and relu (step 1) together are not.
  const auto doc = io::read_graph(tiny_with([](json& d) {
    d["ops"][fc1]["time_us"] = 1e308;
    d["ops"][relu]["time_us"] = 1e308;
  }));
  expect_error<memplan::invalid_graph>(
      [&] { static_cast<void>(memplan::compile(doc.graph, doc.schedule)); },
      {"op 'relu' at step 1: time_us 1e+308 makes the sum of op times infinite (1e+308 us before it)"});
}

TEST_CASE("memplan-plan: an op split into more parts than it may be is rejected as the plan is read") {
  const auto doc = io::read_graph_file(fixture("tiny.json"));
  const auto p = memplan::compile(doc.graph, doc.schedule);
  REQUIRE(p.batch == 10);  // x's shape is [10, 25]
  CHECK(memplan::max_split_parts(p, 0) == 10);  // fc1: split_dims [0]
  CHECK(memplan::max_split_parts(p, 1) == 1);   // relu: no split dims
  std::ostringstream out;
  io::write_plan(out, memplan::keep_all_plan(p, 10000), p);
  const json good = json::parse(out.str());
  const auto read = [&](const std::function<void(json&)>& change) {
    json d = good;
    change(d);
    return io::read_plan(d.dump(), p);
  };
  CHECK(read([](json& d) { d["actions"][0]["parts"] = 10; }).actions[0].parts == 10);
  expect_error<memplan::invalid_graph>(
      [&] { static_cast<void>(read([](json& d) { d["actions"][0]["parts"] = 2147483647; })); },
      {"action 0: field 'parts' splits op 'fc1' into 2147483647 parts, more than the batch's 10 samples"});
  expect_error<memplan::invalid_graph>(
      [&] { static_cast<void>(read([](json& d) { d["actions"][1]["parts"] = 2; })); },
      {"action 1: field 'parts' splits op 'relu' into 2 parts along dimension 0 (the batch), which is not one of "
       "its split dimensions"});
  // Without input shapes the batch is unknown: fc1's largest sample tensor, h, has 4000 bytes.
  const auto unshaped = io::read_graph(tiny_with([](json& d) { d["tensors"][x].erase("shape"); }));
  const auto q = memplan::compile(unshaped.graph, unshaped.schedule);
  REQUIRE(q.batch == 0);
  CHECK(memplan::max_split_parts(q, 0) == 4000);
  expect_error<memplan::invalid_graph>(
      [&] {
        json d = good;
        d["actions"][0]["parts"] = 4001;
        static_cast<void>(io::read_plan(d.dump(), q));
      },
      {"action 0: field 'parts' splits op 'fc1' into 4001 parts, more than the 4000 bytes of its largest sample "
       "tensor"});
}

TEST_CASE("SIZE: byte counts, units and percents") {
  CHECK(io::parse_size("1073741824") == io::size_spec{1073741824, 0, false});
  CHECK(io::parse_size("0").bytes == 0);
  CHECK(io::parse_size("512B").bytes == 512);
  CHECK(io::parse_size("1.5GiB").bytes == 1610612736);
  CHECK(io::parse_size("24GiB").bytes == 25769803776);
  CHECK(io::parse_size("800MiB").bytes == 838860800);
  CHECK(io::parse_size("3KiB").bytes == 3072);
  CHECK(io::parse_size("2TiB").bytes == 2199023255552);
  CHECK(io::parse_size("11GB").bytes == 11000000000);
  CHECK(io::parse_size("1.1TB").bytes == 1100000000000);
  CHECK(io::parse_size("2kB").bytes == 2000);
  CHECK(io::parse_size("2KB").bytes == 2000);
  CHECK(io::parse_size("0.5MB").bytes == 500000);
  CHECK(io::parse_size("1.3KiB").bytes == 1331);  // 1331.2, to the nearest byte
  CHECK(io::parse_size("9223372036854775807").bytes == 9223372036854775807LL);
  CHECK(io::parse_size("8388607TiB").bytes == 8388607LL << 40);

  const auto sixty = io::parse_size("60%");
  CHECK(sixty.is_percent);
  CHECK(sixty.percent == 60);
  CHECK(io::resolve(sixty, 1000) == 600);
  CHECK(io::resolve(io::parse_size("12.5%"), 1000) == 125);
  CHECK(io::resolve(io::parse_size("150%"), 1000) == 1500);
  CHECK(io::resolve(io::parse_size("33%"), 10) == 3);  // 3.3, rounded down
  CHECK(io::resolve(io::parse_size("11GB"), 1000) == 11000000000);
  expect_error<memplan::invalid_argument>([] { static_cast<void>(io::resolve(io::parse_size("200%"), 9223372036854775807LL)); },
                                          {"200%", "2^63 - 1"});
}

TEST_CASE("SIZE: malformed sizes quote the input and list the accepted forms") {
  for (const std::string_view bad : {"", "-1GiB", "12XB", "GiB", "1e999", "abc", "1.5", "1.5B", "1.", ".5GiB",
                                     "0%", "1 GiB", "12gib", "9223372036854775808", "8388608TiB", "9999999999GB",
                                     "99999999999999999999999999999999999999"}) {
    CAPTURE(bad);
    expect_error<memplan::invalid_argument>([&] { static_cast<void>(io::parse_size(bad)); },
                                            {memplan::detail::concat("'", bad, "'"), "accepted forms", "1.5GiB", "11GB", "60%"});
  }
  expect_error<memplan::invalid_argument>([] { static_cast<void>(io::parse_size("12XB")); }, {"unknown unit 'XB'"});
  expect_error<memplan::invalid_argument>([] { static_cast<void>(io::parse_size("9223372036854775808")); },
                                          {"exceeds 2^63 - 1"});
  expect_error<memplan::invalid_argument>([] { static_cast<void>(io::parse_size("-1GiB")); }, {"start with a digit"});
}

TEST_CASE("format_bytes") {
  CHECK(memplan::format_bytes(0) == "0 B");
  CHECK(memplan::format_bytes(512) == "512 B");
  CHECK(memplan::format_bytes(1023) == "1023 B");
  CHECK(memplan::format_bytes(1024) == "1.00 KiB");
  CHECK(memplan::format_bytes(1610612736) == "1.50 GiB");
  CHECK(memplan::format_bytes(838860800) == "800.00 MiB");
  CHECK(memplan::format_bytes(1048575) == "1.00 MiB");
  CHECK(memplan::format_bytes(-1536) == "-1.50 KiB");
  CHECK(memplan::format_bytes(9223372036854775807LL) == "8.00 EiB");
  CHECK(memplan::format_bytes(-9223372036854775807LL - 1) == "-8.00 EiB");
}
