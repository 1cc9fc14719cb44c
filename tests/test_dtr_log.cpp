// Tests of the DTR operator-log reader (io/dtr_log.hpp): a log written by
// hand with every instruction, and malformed lines. The real logs of
// ../shared/corpus/dtr-logs are test_dtr_corpus.cpp's.
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

#include "memplan/compile.hpp"
#include "memplan/error.hpp"
#include "memplan/io/dtr_log.hpp"
#include "memplan/problem.hpp"

namespace {

using namespace memplan;

io::dtr_log read(const std::string& text) {
  std::istringstream in(text);
  return io::read_dtr_log(in, "test");
}

// tests/data/dtr-hand.log (tests/python/test_dtr_simulator.py reads it too).
// A warm-up constant (ignored), then: w (constant, 40 B) kept to the end; x
// (100 B) read by conv (2 ms) -> y (300 B); relu_ (1 ms) mutates y: y' in
// new memory, which handle y names from then on; view (0.5 ms) of y' as v;
// COPY z = w; after BACKWARD, conv_backward (3 ms) reads v and z -> g (200
// B); releases drop x, y, v and g.

TEST_CASE("dtr log: every instruction, by hand") {
  const io::dtr_log log = io::read_dtr_log_file(MEMPLAN_SOURCE_DIR "/tests/data/dtr-hand.log");
  const graph& g = log.graph;
  // Tensors: w, x, y, y' (relu_'s version), g. The warm-up's 'old' is gone.
  REQUIRE(g.num_tensors() == 5);
  REQUIRE(g.num_ops() == 4);
  CHECK(g.tensor(0).name == "w");
  CHECK(g.tensor(0).kind == tensor_kind::parameter);  // still named (by z) at the end
  CHECK(g.tensor(1).kind == tensor_kind::input);      // released: not persistent
  CHECK(g.tensor(2).bytes == 300);
  CHECK(g.tensor(3).bytes == 300);                    // the mutated version, same bytes
  CHECK(g.tensor(4).kind == tensor_kind::gradient);
  CHECK(g.op(0).time_us == doctest::Approx(2000));
  CHECK(g.op(0).inputs == std::vector<index_t>{1, 0});
  CHECK(g.op(1).type == "relu_");
  CHECK(g.op(1).outputs == std::vector<index_t>{3});
  CHECK(g.op(2).outputs.empty());                    // a view makes no tensor
  CHECK(g.op(2).inputs == std::vector<index_t>{3});  // ... and reads the current version
  CHECK(g.op(3).phase == phase::backward);
  CHECK(g.op(3).inputs == std::vector<index_t>{3, 0});
  CHECK(g.op(1).recomputable);
  // DTR's simulator: w 40 + x 100 + y 300, and relu_ writes y' into new
  // memory: 740 at the peak; y's handle then names y', so y goes after
  // relu_, x after the view, y' (named by v) and g after conv_backward.
  CHECK(log.refcount_peak == 740);
  CHECK(g.tensor(0).released_after == no_index);  // still named at the end
  CHECK(g.tensor(1).released_after == 2);
  CHECK(g.tensor(2).released_after == 1);
  CHECK(g.tensor(3).released_after == 3);
  CHECK(g.tensor(4).released_after == 3);
  // memplan's: x dies after conv, y after relu_, y' after conv_backward:
  // conv_backward holds w, y' and g = 540; relu_ holds w, y and y' = 640.
  const problem p = compile(log.graph, log.schedule);
  CHECK(p.baseline_peak() == 640);
  CHECK(p.baseline_time_us() == doctest::Approx(6500));
  // The framework holds x until after the view (step 2), past its last read.
  CHECK(p.live_end(1) == 0);
  CHECK(p.held_until(1) == 2);
  CHECK(p.held_until(3) == 3);
}

TEST_CASE("dtr log: a constant after the first op counts from there in DTR's peak") {
  const io::dtr_log log = read(R"({"INSTRUCTION":"CONSTANT","NAME":"x"}
{"INSTRUCTION":"MEMORY","MEMORY":"100","NAME":"x"}
{"ARGS":["x"],"INSTRUCTION":"CALL","NAME":"relu","RESULT":["y"],"TIME":"1000"}
{"INSTRUCTION":"MEMORY","MEMORY":"100","NAME":"y"}
{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"y"}
{"INSTRUCTION":"RELEASE","NAME":"x"}
{"INSTRUCTION":"CONSTANT","NAME":"s"}
{"INSTRUCTION":"MEMORY","MEMORY":"8","NAME":"s"}
{"ARGS":["y","s"],"INSTRUCTION":"CALL","NAME":"mul","RESULT":["z"],"TIME":"1000"}
{"INSTRUCTION":"MEMORY","MEMORY":"100","NAME":"z"}
{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"z"}
)");
  // x 100 + y 100 = 200; x goes, then s 8 and z 100 join y: 208 at the peak.
  CHECK(log.refcount_peak == 208);
  // memplan has s on the device from the start: x, y and s at relu.
  const problem p = compile(log.graph, log.schedule);
  CHECK(log.graph.producer(2) == no_index);
  CHECK(p.baseline_peak() == 208);
}

TEST_CASE("dtr log: malformed lines name the line") {
  CHECK_THROWS_WITH_AS(read("{\"INSTRUCTION\":\"CONSTANT\",\"NAME\":\"a\"}\n{\"INSTRUCTION\":\"MEMORY\"}\n"),
                       "DTR log 'test' line 2: missing string field 'NAME'", invalid_graph);
  CHECK_THROWS_WITH_AS(read("{\"INSTRUCTION\":\"RELEASE\",\"NAME\":\"nobody\"}\n"),
                       "DTR log 'test' line 1: handle 'nobody' is not defined (or was released)", invalid_graph);
  CHECK_THROWS_WITH_AS(read("{\"INSTRUCTION\":\"JUMP\"}\n"), "DTR log 'test' line 1: unknown INSTRUCTION 'JUMP'",
                       invalid_graph);
  CHECK_THROWS_AS(read("\n\nnot json\n"), invalid_graph);
  CHECK_THROWS_WITH_AS(read("{\"INSTRUCTION\":\"CONSTANT\",\"NAME\":\"a\"}\n"
                            "{\"INSTRUCTION\":\"MEMORY\",\"MEMORY\":\"-5\",\"NAME\":\"a\"}\n"),
                       "DTR log 'test' line 2: field 'MEMORY' must be an integer >= 0, got '-5'", invalid_graph);
  CHECK_THROWS_WITH_AS(read("{\"INSTRUCTION\":\"CONSTANT\",\"NAME\":\"a\"}\n"
                            "{\"INSTRUCTION\":\"MEMORY\",\"MEMORY\":\"8\",\"NAME\":\"a\"}\n"
                            "{\"ARGS\":[\"a\"],\"INSTRUCTION\":\"CALL\",\"NAME\":\"f\",\"RESULT\":[\"b\"],\"TIME\":\"1\"}\n"
                            "{\"INSTRUCTION\":\"RELEASE\",\"NAME\":\"a\"}\n"),
                       "DTR log 'test' line 4: expected the MEMORY/ALIAS of 'b'", invalid_graph);
}

}  // namespace
