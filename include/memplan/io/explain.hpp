#pragma once
/// \file
/// What a practitioner asks of a graph and a plan, in tensor names: where
/// the unplanned peak is and what makes it (`peak_breakdown`), and what a
/// plan does to each tensor it touches — when it leaves the device and
/// comes back or is rebuilt, and the stall it causes (`explain`). The CLI's
/// `info` and `plan --explain` print them; `--json` carries them.

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "memplan/graph/vocabulary.hpp"
#include "memplan/plan.hpp"
#include "memplan/problem.hpp"
#include "memplan/sim/report.hpp"

namespace memplan::io {

/// The unplanned peak: its step, bytes per tensor kind, the largest tensors live there.
struct peak_breakdown {
  index_t step = no_index;  ///< the step of the peak; no_index for a graph with no steps
  bytes_t bytes = 0;        ///< the peak: tensors live at the step plus its workspace
  bytes_t workspace = 0;    ///< the step's op's workspace, part of `bytes`
  /// Bytes of the tensors live at the step, per tensor kind (indexed by `tensor_kind`).
  std::array<bytes_t, tensor_kind_names.size()> by_kind{};
  std::vector<index_t> largest;  ///< tensors live at the step, largest first
};

/// The step of `p.baseline_peak()` (the first, if several) and what is live there.
[[nodiscard]] inline peak_breakdown breakdown_of_peak(const problem& p, std::size_t largest = 5) {
  peak_breakdown b;
  const std::vector<bytes_t> live = p.baseline_memory();
  if (live.empty()) return b;
  b.step = static_cast<index_t>(std::ranges::max_element(live) - live.begin());
  b.bytes = live[static_cast<std::size_t>(b.step)];
  b.workspace = p.workspace[static_cast<std::size_t>(b.step)];
  std::vector<index_t> there;
  for (std::size_t t = 0; t < p.num_tensors(); ++t) {
    const auto ti = static_cast<index_t>(t);
    if (p.live_begin(ti) > b.step || p.live_end(ti) < b.step) continue;
    b.by_kind[static_cast<std::size_t>(p.kind[t])] += p.bytes[t];
    there.push_back(ti);
  }
  std::ranges::stable_sort(there, std::greater<>{}, [&](index_t t) { return p.bytes[static_cast<std::size_t>(t)]; });
  there.resize(std::min(there.size(), largest));
  b.largest = std::move(there);
  return b;
}

/// `b` as `info --json` writes it: step, op name, bytes, `bytes_by_kind` by
/// kind name, and the largest tensors by name, kind and bytes (`p` names them).
[[nodiscard]] inline nlohmann::json to_json(const peak_breakdown& b, const problem& p) {
  nlohmann::json kinds = nlohmann::json::object();
  for (std::size_t k = 0; k < b.by_kind.size(); ++k) kinds[std::string(tensor_kind_names[k])] = b.by_kind[k];
  nlohmann::json largest = nlohmann::json::array();
  for (const index_t t : b.largest) {
    largest.push_back({{"name", p.tensor_name[static_cast<std::size_t>(t)]},
                       {"kind", std::string(to_string(p.kind[static_cast<std::size_t>(t)]))},
                       {"bytes", p.bytes[static_cast<std::size_t>(t)]}});
  }
  return {{"step", b.step},
          {"op", b.step == no_index ? std::string() : p.op_name[static_cast<std::size_t>(b.step)]},
          {"bytes", b.bytes},
          {"workspace_bytes", b.workspace},
          {"bytes_by_kind", std::move(kinds)},
          {"largest_tensors", std::move(largest)}};
}

/// One tensor a plan moves, rebuilds or splits.
struct tensor_story {
  index_t tensor = no_index;       ///< the tensor (dense index)
  decision what = decision::keep;  ///< the plan's decision for it (plan::decisions)
  ///@{
  /// How many times it is swapped out, swapped in, and rebuilt by a recomputation.
  int swap_outs = 0, swap_ins = 0, recomputes = 0;
  ///@}
  index_t parts = 1;          ///< split: the most micro-tensors it is cut into
  double out_us = -1;         ///< first leaves the device: its first swap-out or free starts
  double back_us = -1;        ///< last comes back: its last swap-in or recomputation ends (-1: never)
  double stall_us = 0;        ///< compute-stream idle before ops that waited for it to come back
};

namespace detail {

/// Per action, the tensors it brings back to the device: a swap-in's, and
/// those of a recomputation's outputs that are gone (swapped out or freed
/// earlier in the list); a recomputation leaves outputs still there alone.
inline std::vector<std::vector<index_t>> brought_back(const problem& p, const plan& pl) {
  std::vector<std::vector<index_t>> back(pl.actions.size());
  std::vector<char> gone(p.num_tensors(), 0);
  for (std::size_t a = 0; a < pl.actions.size(); ++a) {
    const action& act = pl.actions[a];
    if (act.kind == action_kind::swap_out || act.kind == action_kind::free) {
      gone[static_cast<std::size_t>(act.tensor)] = 1;
    } else if (act.kind == action_kind::swap_in) {
      gone[static_cast<std::size_t>(act.tensor)] = 0;
      back[a].push_back(act.tensor);
    } else if (act.kind == action_kind::recompute) {
      for (const index_t t : p.outputs(act.step)) {
        if (gone[static_cast<std::size_t>(t)] == 0) continue;
        gone[static_cast<std::size_t>(t)] = 0;
        back[a].push_back(t);
      }
    }
  }
  return back;
}

/// Per action, the compute stream's idle time just before it started (0
/// for actions of other streams): what a wait held the compute stream.
inline std::vector<double> compute_gaps(const plan& pl, const report& r) {
  std::vector<double> gap(pl.actions.size(), 0.0);
  double last_end = 0;
  std::vector<action_interval> compute;
  for (const action_interval& i : r.timeline) {
    if (i.stream == stream_kind::compute) compute.push_back(i);
  }
  std::ranges::sort(compute, {}, &action_interval::start_us);
  for (const action_interval& i : compute) {
    gap[static_cast<std::size_t>(i.action)] = std::max(0.0, i.start_us - last_end);
    last_end = std::max(last_end, i.end_us);
  }
  return gap;
}

}  // namespace detail

/// What `pl` does to each tensor it does not simply keep, from the recorded
/// simulation `r` (simulate with recording: `report::timeline`). A compute
/// stall is charged to the bring-back (swap-in or recomputation) the
/// stalled action waited for that ended last. Ordered by stall, then bytes.
[[nodiscard]] inline std::vector<tensor_story> explain(const problem& p, const plan& pl, const report& r) {
  std::vector<tensor_story> story(p.num_tensors());
  for (std::size_t t = 0; t < story.size(); ++t) {
    story[t].tensor = static_cast<index_t>(t);
    if (t < pl.decisions.size()) story[t].what = pl.decisions[t];
  }
  std::vector<const action_interval*> when(pl.actions.size(), nullptr);
  for (const action_interval& i : r.timeline) when[static_cast<std::size_t>(i.action)] = &i;
  const std::vector<double> gap = detail::compute_gaps(pl, r);
  const std::vector<std::vector<index_t>> back = detail::brought_back(p, pl);
  for (std::size_t a = 0; a < pl.actions.size(); ++a) {
    const action& act = pl.actions[a];
    const action_interval* at = when[a];
    if (act.parts > 1 && act.tensor != no_index) story[static_cast<std::size_t>(act.tensor)].parts = std::max(
        story[static_cast<std::size_t>(act.tensor)].parts, act.parts);
    if (at == nullptr) continue;
    if (act.kind == action_kind::swap_out || act.kind == action_kind::free) {
      tensor_story& s = story[static_cast<std::size_t>(act.tensor)];
      s.swap_outs += act.kind == action_kind::swap_out;
      if (s.out_us < 0) s.out_us = at->start_us;
    }
    for (const index_t t : back[a]) {
      tensor_story& s = story[static_cast<std::size_t>(t)];
      (act.kind == action_kind::swap_in ? s.swap_ins : s.recomputes) += 1;
      s.back_us = std::max(s.back_us, at->end_us);
    }
    if (gap[a] <= 0) continue;
    // The stall goes to the latest-ending bring-back among the action's waits.
    const action_interval* culprit = nullptr;
    for (index_t w = pl.wait_begin[a]; w < pl.wait_begin[a + 1]; ++w) {
      const auto waited = static_cast<std::size_t>(pl.waits[static_cast<std::size_t>(w)]);
      if (when[waited] == nullptr || back[waited].empty()) continue;
      if (culprit == nullptr || when[waited]->end_us > culprit->end_us) culprit = when[waited];
    }
    if (culprit == nullptr) continue;
    // Charged once, to the first tensor it brings back.
    story[static_cast<std::size_t>(back[static_cast<std::size_t>(culprit->action)].front())].stall_us += gap[a];
  }
  std::erase_if(story, [](const tensor_story& s) {
    return s.what == decision::keep && s.swap_outs + s.swap_ins + s.recomputes == 0 && s.parts == 1;
  });
  std::ranges::stable_sort(story, [&](const tensor_story& a, const tensor_story& b) {
    if (a.stall_us != b.stall_us) return a.stall_us > b.stall_us;
    return p.bytes[static_cast<std::size_t>(a.tensor)] > p.bytes[static_cast<std::size_t>(b.tensor)];
  });
  return story;
}

/// `stories` as `plan --explain --json` writes them, one object per tensor
/// (named from `p`), times in ms (null: never).
[[nodiscard]] inline nlohmann::json to_json(const std::vector<tensor_story>& stories, const problem& p) {
  nlohmann::json rows = nlohmann::json::array();
  for (const tensor_story& s : stories) {
    const auto t = static_cast<std::size_t>(s.tensor);
    const auto ms = [](double us) { return us < 0 ? nlohmann::json(nullptr) : nlohmann::json(us / 1e3); };
    rows.push_back({{"name", p.tensor_name[t]},
                    {"kind", std::string(to_string(p.kind[t]))},
                    {"bytes", p.bytes[t]},
                    {"decision", std::string(to_string(s.what))},
                    {"swap_outs", s.swap_outs},
                    {"swap_ins", s.swap_ins},
                    {"recomputes", s.recomputes},
                    {"parts", s.parts},
                    {"out_ms", ms(s.out_us)},
                    {"back_ms", ms(s.back_us)},
                    {"stall_ms", s.stall_us / 1e3}});
  }
  return rows;
}

}  // namespace memplan::io
