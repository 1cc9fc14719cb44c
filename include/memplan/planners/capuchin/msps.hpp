#pragma once
/// \file
/// Capuchin (Peng et al., ASPLOS 2020) §4.4, Eq. 2 and Algo 2: the
/// recomputation policy — sources and time from the lineage, Memory Saving
/// Per Second, and the iterative MSPS update as tensors are chosen.

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <utility>
#include <span>
#include <vector>

#include "memplan/planners/capuchin/measured.hpp"
#include "memplan/planners/capuchin/swap.hpp"
#include "memplan/problem.hpp"

namespace memplan::detail::capuchin {

/// Algo 2 over a candidate set: each candidate's recomputation sources,
/// recomputation time and extra (repeated) time, updated as targets are chosen.
class msps_recomputation {
 public:
  struct target {
    std::vector<index_t> srcs;  ///< tensors the recomputation starts from
    std::vector<index_t> ops;   ///< steps it runs again, in schedule order
    double rp_time_us = 0;      ///< time to recompute from `srcs`
    double ext_time_us = 0;     ///< repeated recomputation it causes (Algo 2 lines 21-31)
    bool recomputable = false;  ///< every op of its lineage may run again
    bool candidate = true;      ///< still in the candidate set
  };

  /// \param candidates the candidate set (§4.5).
  msps_recomputation(const problem& p, const measured_execution& m, std::span<const candidate> candidates)
      : p_(&p), targets_(candidates.size()), mem_(candidates.size()) {
    for (std::size_t i = 0; i < candidates.size(); ++i) mem_[i] = p.bytes[static_cast<std::size_t>(candidates[i].tensor)];
    std::vector<index_t> seen(p.num_steps(), no_index);
    for (std::size_t i = 0; i < candidates.size(); ++i) lineage(m, candidates[i], static_cast<index_t>(i), seen);
  }

  [[nodiscard]] const target& of(index_t i) const { return targets_[static_cast<std::size_t>(i)]; }
  /// Eq. 2: memory saving over recomputation time (repeats included); 0 if
  /// the candidate cannot be recomputed.
  [[nodiscard]] double msps(index_t i) const {
    const target& t = targets_[static_cast<std::size_t>(i)];
    if (!t.recomputable) return 0;
    const double time = t.rp_time_us + t.ext_time_us;
    return static_cast<double>(mem_[static_cast<std::size_t>(i)]) / std::max(time, 1e-9);
  }
  /// Its overhead if chosen: its recomputation and the repeats it causes.
  [[nodiscard]] double overhead_us(index_t i) const {
    const target& t = targets_[static_cast<std::size_t>(i)];
    return t.rp_time_us + t.ext_time_us;
  }
  /// Leaves the candidate set without being recomputed (chosen for swap).
  void drop(index_t i) { targets_[static_cast<std::size_t>(i)].candidate = false; }

  /// Algo 2 lines 5-34: inserts candidate `i` into the recomputation
  /// targets and updates the sources and MSPS of the others.
  void choose(index_t i) {
    const auto ii = static_cast<std::size_t>(i);
    const index_t t = tensor_of(i);
    const target chosen = targets_[ii];
    // Lines 5-12: targets that started from t now start from t's sources.
    double ext_ct = 1;
    for (const index_t r : recomps_) {
      target& rp = targets_[static_cast<std::size_t>(r)];
      if (replace_source(rp.srcs, t, chosen.srcs)) {
        merge_ops(rp.ops, chosen.ops);
        ext_ct += 1;
      }
    }
    recomps_.push_back(i);   // line 13
    targets_[ii].candidate = false;  // line 14
    // Lines 17-34: update the candidates' MSPS.
    for (std::size_t c = 0; c < targets_.size(); ++c) {
      target& cand = targets_[c];
      if (!cand.candidate) continue;
      if (replace_source(cand.srcs, t, chosen.srcs)) {  // lines 18-29
        merge_ops(cand.ops, chosen.ops);
        cand.rp_time_us += chosen.rp_time_us;
        cand.ext_time_us = 0;
        const index_t ct = tensor_of(static_cast<index_t>(c));
        for (const index_t r : recomps_) {
          if (contains(targets_[static_cast<std::size_t>(r)].srcs, ct)) cand.ext_time_us += cand.rp_time_us;
        }
      }
      if (contains(chosen.srcs, tensor_of(static_cast<index_t>(c)))) {  // lines 30-33
        cand.ext_time_us = ext_ct * cand.rp_time_us;
      }
    }
  }

 private:
  [[nodiscard]] index_t tensor_of(index_t i) const { return tensors_[static_cast<std::size_t>(i)]; }
  static bool contains(const std::vector<index_t>& v, index_t t) { return std::ranges::find(v, t) != v.end(); }
  /// Adds the steps of `more` to the sorted `ops` (the recomputation now runs them too).
  static void merge_ops(std::vector<index_t>& ops, const std::vector<index_t>& more) {
    std::vector<index_t> both;
    both.reserve(ops.size() + more.size());
    std::ranges::set_union(ops, more, std::back_inserter(both));
    ops = std::move(both);
  }
  /// If `t` is in `srcs`: replaces it with `with` (no duplicates) and says so.
  static bool replace_source(std::vector<index_t>& srcs, index_t t, const std::vector<index_t>& with) {
    const auto it = std::ranges::find(srcs, t);
    if (it == srcs.end()) return false;
    srcs.erase(it);
    for (const index_t w : with) {
      if (!contains(srcs, w)) srcs.push_back(w);
    }
    return true;
  }

  /// §4.4: walks the lineage back from the candidate's producer. An input
  /// serves as a source if it is still live at the back-access (its last
  /// access is later); otherwise its producer runs again too.
  ///
  /// §4.4 (2) also assumes every other candidate on the device. That holds
  /// for those live at the back-access (a chosen one's sources replace it
  /// in `choose`, a swapped one excludes the recomputations it would feed,
  /// policy.hpp), but not for one whose last access is earlier: it is gone
  /// at run time, and its lineage runs again on every back-access that
  /// starts from it, so assuming it there underestimates the recomputation.
  void lineage(const measured_execution& m, const candidate& c, index_t i, std::vector<index_t>& seen) {
    const problem& p = *p_;
    tensors_.push_back(c.tensor);
    target& tg = targets_[static_cast<std::size_t>(i)];
    const index_t made = p.producer[static_cast<std::size_t>(c.tensor)];
    if (made == no_index) return;
    tg.recomputable = true;
    std::vector<index_t> stack{made};
    seen[static_cast<std::size_t>(made)] = i;
    while (!stack.empty()) {
      const index_t op = stack.back();
      stack.pop_back();
      const auto o = static_cast<std::size_t>(op);
      if (!p.recomputable[o]) {
        tg.recomputable = false;
        return;
      }
      tg.ops.push_back(op);
      // §4.3: an op's recomputation time is the gap between the accesses of its inputs and outputs.
      tg.rp_time_us += m.end_us[o] - m.start_us[o];
      for (const index_t in : p.inputs(op)) {
        const auto ii = static_cast<std::size_t>(in);
        if (p.persistent(in) || p.live_end(in) >= c.back_access) {
          if (!contains(tg.srcs, in)) tg.srcs.push_back(in);
          continue;
        }
        const index_t from = p.producer[ii];
        if (from == no_index) {
          tg.recomputable = false;
          return;
        }
        if (seen[static_cast<std::size_t>(from)] == i) continue;
        seen[static_cast<std::size_t>(from)] = i;
        stack.push_back(from);
      }
    }
    std::ranges::sort(tg.ops);
  }

  const problem* p_;
  std::vector<target> targets_;
  std::vector<bytes_t> mem_;
  std::vector<index_t> tensors_;  ///< per candidate: its tensor
  std::vector<index_t> recomps_;  ///< chosen targets, in order
};

}  // namespace memplan::detail::capuchin
