#pragma once
/// \file
/// Reading and writing `memplan-plan` version 1 documents: a plan's
/// decisions and action list, with ops and tensors named by their ids in the
/// graph file (reference: docs/formats.md).

#include <algorithm>
#include <array>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <ostream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "memplan/error.hpp"
#include "memplan/fwd.hpp"
#include "memplan/io/json_fields.hpp"
#include "memplan/plan.hpp"
#include "memplan/problem.hpp"

namespace memplan::io {

/// The `format` field of a plan document.
inline constexpr std::string_view plan_format = "memplan-plan";
/// The only `version` of the plan format.
inline constexpr std::int64_t plan_format_version = 1;

/// `decision` names as plan documents spell them.

/// FNV-1a over what a plan's meaning depends on: each step's op id, its
/// inputs' and outputs' ids, bytes and kinds, and its workspace (not the op
/// times: a plan made for one device may be simulated on another).
[[nodiscard]] inline std::string graph_fingerprint(const problem& p) {
  std::uint64_t h = 1469598103934665603ull;
  const auto mix = [&](std::int64_t v) {
    for (int b = 0; b < 8; ++b) h = (h ^ ((static_cast<std::uint64_t>(v) >> (8 * b)) & 0xff)) * 1099511628211ull;
  };
  for (std::size_t s = 0; s < p.num_steps(); ++s) {
    mix(p.op_id[s]);
    mix(p.workspace[s]);
    for (const auto list : {p.inputs(static_cast<index_t>(s)), p.outputs(static_cast<index_t>(s))}) {
      mix(-1);
      for (const index_t t : list) {
        mix(p.tensor_id[static_cast<std::size_t>(t)]);
        mix(p.bytes[static_cast<std::size_t>(t)]);
        mix(static_cast<std::int64_t>(p.kind[static_cast<std::size_t>(t)]));
      }
    }
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

namespace detail {

[[nodiscard]] constexpr bool runs_op(action_kind k) noexcept {
  return k == action_kind::compute || k == action_kind::recompute;
}

/// Dense index of every file id in `ids`.
[[nodiscard]] inline std::unordered_map<std::int64_t, index_t> index_by_id(const std::vector<std::int64_t>& ids) {
  std::unordered_map<std::int64_t, index_t> out;
  for (std::size_t i = 0; i < ids.size(); ++i) out.emplace(ids[i], static_cast<index_t>(i));
  return out;
}

/// Reads a `memplan-plan` document against the problem it plans.
class plan_reader {
 public:
  plan_reader(const json& doc, const problem& p)
      : p_(&p), top_(doc, std::string(plan_format)), step_by_op_id_(index_by_id(p.op_id)),
        tensor_by_id_(index_by_id(p.tensor_id)) {
    expect_header(doc, plan_format, plan_format_version);
    if (top_.has("graph_fingerprint")) {
      const std::string theirs = top_.string("graph_fingerprint"), ours = graph_fingerprint(p);
      if (theirs != ours) {
        top_.fail("graph_fingerprint", "is ", theirs, ": the plan was made for another graph (this one's is ", ours,
                  "); plan it again for this graph");
      }
    }
    plan_.planner = top_.string("planner");
    plan_.feasible = top_.boolean("feasible");
    plan_.reason = top_.string_or("reason", "");
    plan_.budget = top_.integer("budget_bytes");
    plan_.best_peak = top_.integer("best_peak_bytes");
    read_decisions(p.num_tensors());
    read_offloaded_state();
    read_layout();
    if (top_.has("allocator_us")) plan_.allocator_us = top_.non_negative_number("allocator_us");
    read_actions(top_.array("actions"));
  }

  [[nodiscard]] plan finish() && { return std::move(plan_); }

 private:
  void read_decisions(std::size_t tensors) {
    plan_.decisions.assign(tensors, decision::keep);
    for (const auto& [key, value] : top_.object("decisions").items()) {
      const auto field = concat("decisions.", key);
      std::int64_t id = -1;
      const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
      const auto it = ec == std::errc{} && end == key.data() + key.size() ? tensor_by_id_.find(id) : tensor_by_id_.end();
      if (it == tensor_by_id_.end()) top_.fail(field, "does not name a tensor id of the graph");
      plan_.decisions[static_cast<std::size_t>(it->second)] = top_.choice_of<decision>(value, field, decision_names);
    }
  }

  /// Optional; tensor ids, in any order, each once.
  void read_offloaded_state() {
    const auto ids = top_.integers_or_empty("offloaded_state");
    for (std::size_t k = 0; k < ids.size(); ++k) {
      const auto it = tensor_by_id_.find(ids[k]);
      const auto field = field_reader::element("offloaded_state", k);
      if (it == tensor_by_id_.end()) top_.fail(field, "names tensor id ", ids[k], ", which the graph does not have");
      if (std::ranges::find(plan_.offloaded_state, it->second) != plan_.offloaded_state.end()) {
        top_.fail(field, "names tensor id ", ids[k], " again");
      }
      plan_.offloaded_state.push_back(it->second);
    }
    std::ranges::sort(plan_.offloaded_state);
  }

  /// Optional: {"arena_bytes": N, "offsets": [...]}; the simulator and the
  /// validator check the offsets against the actions.
  void read_layout() {
    if (!top_.has("layout")) return;
    const field_reader r(top_.object("layout"), "layout");
    plan_.arena_bytes = r.integer("arena_bytes");
    for (const std::int64_t o : r.integers_or_empty("offsets")) plan_.offsets.push_back(o);
  }

  void read_actions(const json& actions) {
    for (std::size_t a = 0; a < actions.size(); ++a) {
      const field_reader r(actions[a], concat("action ", a));
      action act;
      act.kind = r.choice<action_kind>("kind", action_kind_names);
      const bool on_op = runs_op(act.kind);
      const char* misplaced = on_op ? "tensor" : "op";
      if (r.has(misplaced)) r.fail(misplaced, "does not apply to a ", to_string(act.kind), " action");
      if (on_op) {
        act.step = resolve(r, "op", step_by_op_id_, "op");
      } else {
        act.tensor = resolve(r, "tensor", tensor_by_id_, "tensor");
        // A swap or free is of the whole tensor, or of one micro-tensor.
        if (r.has("parts") && !r.has("part")) {
          r.fail("parts", "applies to a ", to_string(act.kind), " action only with 'part' (a micro-tensor)");
        }
      }
      act.parts = static_cast<index_t>(r.integer_or("parts", 1, 1, INT32_MAX));
      // Before anything is sized by parts (the validator's micro-tensors): the rule they all apply.
      if (on_op) {
        if (const auto why = split_violation(*p_, act.step, act.parts); !why.empty()) r.fail("parts", why);
      }
      if (r.has("part")) act.part = static_cast<index_t>(r.integer_or("part", 0, 0, act.parts - 1));
      const auto waits = r.integers_or_empty("waits");
      for (std::size_t k = 0; k < waits.size(); ++k) {
        if (waits[k] >= static_cast<std::int64_t>(a)) {
          r.fail(field_reader::element("waits", k), "names action ", waits[k], ", which is not earlier than action ", a);
        }
        on_.push_back(static_cast<index_t>(waits[k]));
      }
      plan_.push(act, on_);
      on_.clear();
    }
  }

  [[nodiscard]] static index_t resolve(const field_reader& r, std::string_view field,
                                       const std::unordered_map<std::int64_t, index_t>& by_id, std::string_view what) {
    const auto id = r.integer(field);
    const auto it = by_id.find(id);
    if (it == by_id.end()) r.fail(field, "names ", what, " id ", id, ", which the graph does not have");
    return it->second;
  }

  const problem* p_;
  field_reader top_;
  std::unordered_map<std::int64_t, index_t> step_by_op_id_;
  std::unordered_map<std::int64_t, index_t> tensor_by_id_;
  plan plan_;
  std::vector<index_t> on_;
};

}  // namespace detail

/// Reads a `memplan-plan` v1 document.
/// \param text the JSON text.
/// \param p the problem the plan was made for: its `op_id` and `tensor_id`
///        map the document's ids back to steps and dense tensor indices.
/// \returns the plan; tensors the document's `decisions` leave out are `keep`.
/// \throws invalid_graph naming the action index (or top-level field) and the
///         field if the text is not JSON, an object repeats a key, the
///         header is wrong, or a field is missing, has a bad type, names an
///         unknown op or tensor id, splits an op into more parts than
///         `max_split_parts` allows, or waits on an action that is not earlier.
[[nodiscard]] inline plan read_plan(std::string_view text, const problem& p) {
  const auto doc = detail::parse_document(text, plan_format);
  return detail::plan_reader(doc, p).finish();
}

/// Reads a `memplan-plan` v1 file.
/// \throws invalid_argument if the file cannot be read; invalid_graph as `read_plan`.
[[nodiscard]] inline plan read_plan_file(const std::filesystem::path& path, const problem& p) {
  return read_plan(detail::read_text_file(path, plan_format), p);
}

/// The `memplan-plan` v1 document of `pl`, naming ops and tensors by the ids
/// `p` carries. Every tensor's decision is written.
/// \throws invalid_graph if the plan names a step or tensor `p` does not have.
[[nodiscard]] inline nlohmann::json to_json(const plan& pl, const problem& p) {
  using detail::json;
  MEMPLAN_EXPECTS(pl.decisions.size() <= p.num_tensors(), invalid_graph, "plan '", pl.planner, "': ",
                  pl.decisions.size(), " decisions for a problem of ", p.num_tensors(), " tensors");
  json decisions = json::object();
  for (std::size_t t = 0; t < pl.decisions.size(); ++t) {
    decisions[std::to_string(p.tensor_id[t])] = decision_names[static_cast<std::size_t>(pl.decisions[t])];
  }
  json offloaded = json::array();
  for (const index_t t : pl.offloaded_state) {
    MEMPLAN_EXPECTS(t >= 0 && static_cast<std::size_t>(t) < p.num_tensors(), invalid_graph, "offloaded_state: tensor ",
                    t, " is outside the problem's ", p.num_tensors(), " tensors");
    offloaded.push_back(p.tensor_id[static_cast<std::size_t>(t)]);
  }
  json actions = json::array();
  for (std::size_t a = 0; a < pl.actions.size(); ++a) {
    const action& act = pl.actions[a];
    json entry = {{"kind", to_string(act.kind)}};
    if (detail::runs_op(act.kind)) {
      MEMPLAN_EXPECTS(act.step >= 0 && static_cast<std::size_t>(act.step) < p.num_steps(), invalid_graph, "action ", a,
                      ": step ", act.step, " is outside the problem's ", p.num_steps(), " steps");
      entry["op"] = p.op_id[static_cast<std::size_t>(act.step)];
    } else {
      MEMPLAN_EXPECTS(act.tensor >= 0 && static_cast<std::size_t>(act.tensor) < p.num_tensors(), invalid_graph,
                      "action ", a, ": tensor ", act.tensor, " is outside the problem's ", p.num_tensors(), " tensors");
      entry["tensor"] = p.tensor_id[static_cast<std::size_t>(act.tensor)];
    }
    if (act.parts > 1 || act.part != no_index) entry["parts"] = act.parts;
    if (act.part != no_index) entry["part"] = act.part;
    const auto waits = pl.waits_of(a);
    if (!waits.empty()) entry["waits"] = std::vector<index_t>(waits.begin(), waits.end());
    actions.push_back(std::move(entry));
  }
  json doc = {{"format", plan_format},
              {"version", plan_format_version},
              {"graph_fingerprint", graph_fingerprint(p)},
              {"planner", pl.planner},
              {"feasible", pl.feasible},
              {"reason", pl.reason},
              {"budget_bytes", pl.budget},
              {"best_peak_bytes", pl.best_peak},
              {"decisions", std::move(decisions)},
              {"actions", std::move(actions)}};
  if (!offloaded.empty()) doc["offloaded_state"] = std::move(offloaded);
  if (!pl.offsets.empty()) doc["layout"] = {{"arena_bytes", pl.arena_bytes}, {"offsets", pl.offsets}};
  if (pl.allocator_us > 0) doc["allocator_us"] = pl.allocator_us;
  return doc;
}

/// Writes `to_json(pl, p)` with one action per line.
/// \throws invalid_graph as `to_json`.
inline void write_plan(std::ostream& out, const plan& pl, const problem& p) {
  static constexpr std::array<std::string_view, 12> keys{
      "format",       "version",         "graph_fingerprint", "planner", "feasible", "reason",
      "budget_bytes", "best_peak_bytes", "decisions",         "offloaded_state", "layout", "actions"};
  detail::write_lines(out, to_json(pl, p), keys);
}

}  // namespace memplan::io
