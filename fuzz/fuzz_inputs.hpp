#pragma once
// One input for each fuzz target (issue 5): the libFuzzer entry points in
// fuzz_*.cpp call these, and tests/test_fuzz_regressions.cpp replays the
// inputs under fuzz/regressions/ through them with any compiler.
//
// Malformed input must end in a memplan::error with a message; anything
// else escaping (a std::out_of_range, a JSON library exception), a crash, a
// sanitizer report or a broken round trip is a finding. `expect` aborts,
// which libFuzzer records as a crash with its input.

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>

#include "memplan/compile.hpp"
#include "memplan/cost/device.hpp"
#include "memplan/error.hpp"
#include "memplan/io/graph_json.hpp"
#include "memplan/io/plan_json.hpp"
#include "memplan/io/size.hpp"
#include "memplan/plan.hpp"
#include "memplan/plan_builder.hpp"
#include "memplan/problem.hpp"
#include "memplan/sim/simulator.hpp"
#include "memplan/sim/validator.hpp"
#include "memplan/testing/generators.hpp"

namespace memplan::fuzz {

inline void expect(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz property broken: %s\n", what);
  std::abort();
}

/// A device whose copies take exactly one µs per byte, so that times stay
/// small and exact.
inline device_spec fuzz_device() {
  device_spec d;
  d.name = "fuzz";
  d.h2d = {0.001, 0};
  d.d2h = {0.001, 0};
  return d;
}

/// memplan-graph: a document that reads writes back to one that reads the
/// same, compiles, and its keep-all plan fits its baseline peak. (Not always
/// exactly: the simulator releases a tensor without a producer that no op
/// reads at time 0, before the first op allocates, where DESIGN §4 counts
/// it live during step 0 — fuzz/regressions/graph_json/unread-inputs.json.)
inline void graph_json(std::string_view text) {
  io::graph_document doc;
  try {
    doc = io::read_graph(text);
  } catch (const error& e) {
    expect(*e.what() != '\0', "an error without a message");
    return;
  }
  std::ostringstream out;
  io::write_graph(out, doc.graph, doc.schedule);
  const io::graph_document again = io::read_graph(out.str());
  expect(io::to_json(again.graph, again.schedule) == io::to_json(doc.graph, doc.schedule),
         "write then read changes the graph");
  problem p;
  try {
    p = compile(doc.graph, doc.schedule);
  } catch (const invalid_graph&) {
    return;  // bytes adding up past 2^63 - 1: refused, with a message
  }
  const bytes_t peak = p.baseline_peak();
  expect(peak >= 0, "negative baseline peak");
  const report r = simulate(p, keep_all_plan(p, peak), fuzz_device(), peak);
  expect(r.feasible && r.peak_bytes <= peak, "keep-all does not fit the baseline peak");
}

/// The problem every fuzzed plan is read against: a small generated
/// training graph (fuzz/make_corpus.cpp writes plans for it).
inline const problem& plan_problem() {
  static const problem p = [] {
    testing::graph_options o;
    o.shape = testing::graph_shape::residual;
    o.forward_ops = 6;
    o.min_bytes = 1;
    o.max_bytes = 1000;
    return compile(testing::random_training_graph(o, 1));
  }();
  return p;
}

/// memplan-plan: a plan that reads is judged without throwing; the
/// validator never accepts what the simulator rejects, and where both
/// accept they agree on the peak.
inline void plan_json(std::string_view text) {
  const problem& p = plan_problem();
  plan pl;
  try {
    pl = io::read_plan(text, p);
  } catch (const error& e) {
    expect(*e.what() != '\0', "an error without a message");
    return;
  }
  if (pl.budget < 0) return;  // the simulator refuses it with invalid_argument
  const report r = simulate(p, pl, fuzz_device(), pl.budget);
  expect(r.feasible || !r.failure.empty(), "infeasible without a failure");
  expect(r.feasible == (r.kind == failure_kind::none), "the simulator's kind disagrees with feasible");
  if (pl.actions.size() > 400) return;  // the validator is quadratic
  const validation v = validate(p, pl, fuzz_device(), pl.budget);
  expect(v.ok == (v.kind == failure_kind::none), "the validator's kind disagrees with ok");
  // The validator is the stricter: a plan the simulator finds invalid, it finds invalid too.
  if (r.kind == failure_kind::invalid_plan) {
    expect(v.kind == failure_kind::invalid_plan, "invalid to the simulator only");
  }
  if (v.ok) {
    expect(r.feasible, "the validator accepts a plan the simulator rejects");
    expect(v.peak_bytes == r.peak_bytes, "validator and simulator disagree on the peak");
  }
}

/// SIZE: a size that parses is a non-negative byte count or a positive
/// percent; a byte count prints back to itself.
inline void size_text(std::string_view text) {
  io::size_spec spec;
  try {
    spec = io::parse_size(text);
  } catch (const error& e) {
    expect(*e.what() != '\0', "an error without a message");
    return;
  }
  if (spec.is_percent) {
    expect(spec.percent > 0, "a percent of 0 or below");
    try {
      expect(io::resolve(spec, bytes_t{1} << 40) >= 0, "a negative resolved size");
    } catch (const invalid_argument&) {
    }
    return;
  }
  expect(spec.bytes >= 0, "a negative size");
  expect(io::parse_size(std::to_string(spec.bytes)) == spec, "a byte count does not read back");
}

}  // namespace memplan::fuzz
