#pragma once
/// \file
/// The simulator: the single judge of what a plan costs (DESIGN.md §5),
/// implementing exactly the action-list semantics of plan.hpp.
///
/// Two passes over flat arrays:
/// 1. `resolve`, in list (issue) order: which device copy of a tensor each
///    action reads, makes or releases, what it allocates, and how many
///    actions hold each copy. Plan errors that do not depend on timing
///    (reading a tensor that is not on the device, a double release, ...)
///    are found here.
/// 2. `execute`, a discrete-event run of the three streams. A copy is freed
///    when the last of its holders to end ends; that holder carries the free.
///    At each instant, frees due are applied first, then the lowest-indexed
///    action that can start does; this repeats until nothing can start, and
///    time advances to the next end.
///
/// Memory waits are first come, first served in issue order: while an
/// allocating action waits for memory, no later-issued action may allocate.
/// An executor that issues the list in order behaves so, and it keeps
/// prefetches from starving the compute stream. A split op (parts > 1) needs
/// only one part's workspace at a time, ceil(workspace / parts): its kernels
/// run one after another on the compute stream (TSPLIT §III-C). Micro-ops
/// and micro-tensors (part >= 0) are copies of their own; a micro-tensor
/// released from a whole tensor first splits it in place: the whole copy's
/// bytes pass to `parts` micro copies, once its earlier holders have ended.
///
/// `validator.hpp` checks the same rules with independent, naive code.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "memplan/cost/device.hpp"
#include "memplan/cost/split.hpp"
#include "memplan/error.hpp"
#include "memplan/format_bytes.hpp"
#include "memplan/plan.hpp"
#include "memplan/problem.hpp"
#include "memplan/sim/report.hpp"

namespace memplan {

/// What the simulator records besides the summary numbers. Both are off by
/// default: planners call the simulator in their inner loops.
struct simulate_options {
  bool record_timeline = false;  ///< fill `report::timeline`
  bool record_memory = false;    ///< fill `report::memory_curve`
};

/// What a plan needs with no budget: the verdict of
/// `simulator::run(p, pl, dev, simulator::unlimited)` in brief.
struct unbounded_need {
  bool feasible = false;  ///< the plan is valid and runs
  bytes_t peak_bytes = 0;
  double time_us = 0;
};

/// A simulator that keeps its buffers between runs, so that repeated calls
/// (HOME's PSO evaluates thousands of plans) allocate nothing once warm.
/// Not thread-safe: use one per thread.
class simulator {
 public:
  /// Memory that never binds: what `run` is given to find what a plan needs.
  static constexpr bytes_t unlimited = std::numeric_limits<bytes_t>::max() / 2;

  /// Simulates `pl` on `dev` under `budget`.
  /// \returns a report; an out-of-memory or invalid plan gives
  ///          `feasible == false`, its `kind` and a `failure` naming the
  ///          action, never an exception.
  /// \throws invalid_argument if `budget` is negative.
  report run(const problem& p, const plan& pl, const device_spec& dev, bytes_t budget,
             const simulate_options& opts = {}) {
    return run(p, pl, dev, budget, opts, nullptr);
  }

  /// `run` under `budget`, and for a plan that runs out of memory, also what
  /// it needs with no budget (`need`; the report of `run(p, pl, dev,
  /// unlimited)` otherwise), for a search that ranks the plans that do not
  /// fit by how far they exceed the budget (HOME). Pass 1 does not depend on
  /// the budget, so it runs once for both where the plan's issue-order times
  /// are valid — the unbounded pass 2 first: a plan whose peak fits the
  /// budget has exactly that verdict under it.
  /// \returns the report under `budget`; when it is infeasible, `need` is
  ///          the verdict without a budget (`need.feasible` false: the plan
  ///          is invalid, whatever the budget).
  report run(const problem& p, const plan& pl, const device_spec& dev, bytes_t budget, unbounded_need& need) {
    return run(p, pl, dev, budget, {}, &need);
  }

 private:
  static constexpr double never = std::numeric_limits<double>::infinity();
  /// `copy_info::release_by` of a persistent tensor's last copy, which stays.
  static constexpr index_t kept = -2;
  /// `saved_by_` of offloaded state: its host copy is there from the start.
  static constexpr index_t from_start = -3;

  report run(const problem& p, const plan& pl, const device_spec& dev, bytes_t budget, const simulate_options& opts,
             unbounded_need* need) {
    MEMPLAN_EXPECTS(budget >= 0, invalid_argument, "simulate: the budget must be non-negative, got ", budget);
    report r;
    r.planner = pl.planner;
    r.budget_bytes = budget;
    r.baseline_peak_bytes = p.baseline_peak();
    r.baseline_time_us = p.baseline_time_us();
    bool needs_rerun = false;  // for `need`: pass 1 must run again, without a budget
    if (need != nullptr) *need = {};
    if (resolve(p, pl, dev, r)) {
      const bool unbounded = run_unbounded(pl, need != nullptr ? unlimited : budget, opts, r);
      if (unbounded && need != nullptr) *need = {true, r.peak_bytes, r.time_us};
      if (!unbounded || r.peak_bytes > budget) {
        r.memory_curve.clear();
        execute(p, pl, budget, opts, r);
        needs_rerun = need != nullptr && !unbounded && r.kind != failure_kind::none;
      }
      if (opts.record_timeline) {
        for (std::size_t i = 0; i < pl.actions.size(); ++i) {
          if (end_[i] != never) r.timeline.push_back({static_cast<index_t>(i), info_[i].stream, start_[i], end_[i]});
        }
      }
    }
    r.feasible = r.kind == failure_kind::none;
    r.overhead = r.baseline_time_us > 0 ? r.time_us / r.baseline_time_us - 1 : 0;
    if (needs_rerun) {
      const report free_run = run(p, pl, dev, unlimited, {}, nullptr);
      *need = {free_run.feasible, free_run.peak_bytes, free_run.time_us};
    }
    return r;
  }

  /// What the timed pass needs of an action (one cache line, not seven arrays).
  struct action_info {
    double duration_us;
    bytes_t alloc;        ///< outputs made + workspace, allocated at start
    bytes_t workspace;    ///< freed at its end
    bytes_t frees;        ///< freed at its end: workspace and the copies whose last holder it is
    index_t source;       ///< swap_in: the swap_out whose host copy it reads
    index_t touch_begin;  ///< into `touches_`; the next action's is the end
    index_t next;         ///< the next action on its stream, or the action count
    index_t splits;       ///< the whole copy it splits in place into micro-tensors, or no_index
    stream_kind stream;
  };
  /// A copy an action holds, and the action that must have ended before it
  /// starts because it reads what that one made or last wrote (no_index: none).
  struct touch_info {
    index_t copy;
    index_t after;
  };
  /// One device copy of a tensor: made by one action (or there at time 0),
  /// released once every holder has ended.
  struct copy_info {
    bytes_t bytes;
    double release_us;  ///< latest end of the holders started so far
    index_t release_by; ///< the holder ending then: the copy is freed at its end; or `kept`
    index_t creator;    ///< the action that made it, or last wrote it (a later micro-op); no_index: there at time 0
    index_t tensor;
    /// Holders that have not started. A persistent tensor's last copy has
    /// one more that never starts — the next iteration — so it is never freed.
    index_t pending;
  };

  /// "action 17 (compute 'conv3')"; only for actions `resolve` accepted.
  static std::string describe(const problem& p, const plan& pl, index_t a) {
    const action& act = pl.actions[static_cast<std::size_t>(a)];
    const bool runs_op = act.kind == action_kind::compute || act.kind == action_kind::recompute;
    const std::string& name = runs_op ? p.op_name[static_cast<std::size_t>(act.step)]
                                      : p.tensor_name[static_cast<std::size_t>(act.tensor)];
    return detail::concat("action ", a, " (", to_string(act.kind), " '", name, "')");
  }

  bool fail(std::string why, report& r) {
    r.kind = failure_kind::invalid_plan;
    r.failure = "invalid plan: " + std::move(why);
    return false;
  }

  index_t new_copy(index_t t, bytes_t b, index_t creator) {
    copy_info& c = copies_[copy_count_];
    c.bytes = b;
    c.release_us = 0;
    c.release_by = no_index;
    c.creator = creator;
    c.tensor = t;
    c.pending = 0;
    return static_cast<index_t>(copy_count_++);
  }
  /// Room for `touches` more touches and `copies` more copies: the loop of
  /// `resolve` writes through indices, as vector growth checks on every
  /// write cost more than the rest of its work.
  void make_room(std::size_t touches, std::size_t copies) {
    if (touch_count_ + touches > touches_.size() || copy_count_ + copies > copies_.size()) grow(touches, copies);
  }
  void grow(std::size_t touches, std::size_t copies) {
    touches_.resize(std::max(touches_.size(), 2 * (touch_count_ + touches)));
    copies_.resize(std::max(copies_.size(), 2 * (copy_count_ + copies)));
  }
  /// Action being resolved holds copy c; `reads` says the copy's maker or
  /// latest writer so far (in issue order) must have ended first.
  void touch(index_t c, bool reads) {
    copy_info& info = copies_[static_cast<std::size_t>(c)];
    touches_[touch_count_++] = {c, reads ? info.creator : no_index};
    ++info.pending;
  }

  /// Pass 1, in issue order (plan.hpp's rules on which copy is on the device).
  bool resolve(const problem& p, const plan& pl, const device_spec& dev, report& r) {
    const std::size_t n = pl.actions.size();
    const std::size_t tensors = p.num_tensors();
    const std::size_t steps = p.num_steps();
    const auto& wb = pl.wait_begin;
    if (wb.size() != n + 1 || wb.front() != 0 || static_cast<std::size_t>(wb.back()) != pl.waits.size() ||
        !std::ranges::is_sorted(wb)) {
      return fail(detail::concat("wait_begin must hold ", n + 1, " non-decreasing offsets from 0 to ",
                                 pl.waits.size(), " (one per action, plus one)"),
                  r);
    }

    info_.resize(n + 1);
    touch_count_ = 0;
    copy_count_ = 0;
    make_room(0, tensors);
    for (index_t& first : first_) first = static_cast<index_t>(n);
    index_t last[stream_count] = {no_index, no_index, no_index};
    current_.assign(tensors, no_index);
    saved_by_.assign(tensors, no_index);
    computed_.assign(steps, 0);
    step_parts_.assign(steps, 1);
    micro_parts_.assign(tensors, 0);
    micro_at_.resize(tensors);
    micro_copy_.clear();
    host_parts_.assign(tensors, 0);
    host_at_.resize(tensors);
    host_copy_.clear();

    // Tensors without a producer are on the device at time 0, offloaded
    // state in host memory (plan.hpp).
    last_update_.assign(tensors, no_index);
    for (std::size_t k = 0; k < pl.offloaded_state.size(); ++k) {
      const index_t t = pl.offloaded_state[k];
      if (t < 0 || static_cast<std::size_t>(t) >= tensors) {
        return fail(detail::concat("offloaded_state names tensor ", t, ", but the problem has ", tensors, " tensors"),
                    r);
      }
      const auto ti = static_cast<std::size_t>(t);
      if (!p.persistent(t) || p.producer[ti] != no_index) {
        return fail(detail::concat("offloaded_state names tensor ", t, " ('", p.tensor_name[ti], "') of kind ",
                                   to_string(p.kind[ti]), p.producer[ti] != no_index ? ", made by an op" : "",
                                   "; only parameters and optimizer state that no op makes live in host memory "
                                   "between iterations"),
                    r);
      }
      if (k > 0 && pl.offloaded_state[k - 1] >= t) {
        return fail(detail::concat("offloaded_state must list tensors in increasing order, without repeats; ", t,
                                   " follows ", pl.offloaded_state[k - 1]),
                    r);
      }
      saved_by_[ti] = from_start;
      r.offloaded_state_bytes += p.bytes[ti];
    }
    initial_bytes_ = 0;
    for (std::size_t t = 0; t < tensors; ++t) {
      if (p.producer[t] != no_index || saved_by_[t] == from_start) continue;
      current_[t] = new_copy(static_cast<index_t>(t), p.bytes[t], no_index);
      initial_bytes_ += p.bytes[t];
    }

    // Alongside, the times if memory never binds (see `run_unbounded`):
    // each action starts once its stream and its waits are done.
    start_.resize(n);
    end_.resize(n);
    double stream_end[stream_count] = {};
    unbounded_ = true;
    compute_busy_us_ = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const auto a = static_cast<index_t>(i);
      const action& act = pl.actions[i];
      const auto touch_begin = static_cast<index_t>(touch_count_);
      const stream_kind stream = stream_of(act.kind);
      double start = stream_end[static_cast<std::size_t>(stream)];
      for (const index_t w : pl.waits_of(i)) {
        if (w < 0 || w >= a) {
          return fail(detail::concat("action ", a, " waits on action ", w, ", which is not an earlier action"), r);
        }
        start = std::max(start, end_[static_cast<std::size_t>(w)]);
      }
      bytes_t alloc = 0;
      bytes_t workspace = 0;
      double duration = 0;
      index_t source = no_index;
      index_t splits = no_index;
      const bool micro = act.part != no_index;
      if (micro && (act.part < 0 || act.part >= act.parts)) {
        return fail(detail::concat("action ", a, " (", to_string(act.kind), "): part ", act.part,
                                   " is outside [0, parts = ", act.parts, ")"),
                    r);
      }
      switch (act.kind) {
        case action_kind::compute:
        case action_kind::recompute: {
          const index_t s = act.step;
          if (s < 0 || static_cast<std::size_t>(s) >= steps) {
            return fail(detail::concat("action ", a, " (", to_string(act.kind), ") names step ", s,
                                       ", but the problem has ", steps, " steps"),
                        r);
          }
          if (act.parts < 1) {
            return fail(describe(p, pl, a) + detail::concat(": parts must be at least 1, got ", act.parts), r);
          }
          const auto si = static_cast<std::size_t>(s);
          index_t& done = computed_[si];
          if (act.kind == action_kind::compute) {
            // Whole once, or micro-ops 0, 1, ..., parts-1 in order (plan.hpp).
            if (done != 0 && (!micro || act.part == 0)) {
              return fail(describe(p, pl, a) + ": the step is computed twice (use recompute)", r);
            }
            if (micro && act.part > 0 && (step_parts_[si] != act.parts || done != act.part)) {
              return fail(describe(p, pl, a) + detail::concat(": micro-op ", act.part, " of ", act.parts,
                                                              " comes out of order; micro-ops computed so far: ",
                                                              done, " of ", step_parts_[si]),
                          r);
            }
            step_parts_[si] = micro ? act.parts : 1;
            done = micro ? act.part + 1 : 1;
          } else if (done == 0 || done != step_parts_[si]) {
            return fail(describe(p, pl, a) + ": recomputes a step that has not been computed yet", r);
          }
          for (const index_t t : p.inputs(s)) {
            const bool split = micro && splits_with_batch(p.kind[static_cast<std::size_t>(t)]);
            if (!hold(t, act.parts, split ? act.part : no_index, true)) {
              return fail(describe(p, pl, a) + not_on_device(p, pl, a, t), r);
            }
            if (p.op_phase[si] == phase::update && p.persistent(t)) last_update_[static_cast<std::size_t>(t)] = a;
          }
          // compute makes every output; recompute brings back those not on the device.
          for (const index_t t : p.outputs(s)) {
            const auto ti = static_cast<std::size_t>(t);
            make_room(1, 1);
            if (micro && splits_with_batch(p.kind[ti]) && current_[ti] == no_index) {
              if (!enter_parts(t, act.parts)) return fail(describe(p, pl, a) + other_parts(p, t), r);
              index_t& c = micro_copy_[micro_at_[ti] + static_cast<std::size_t>(act.part)];
              if (c != no_index) continue;
              const bytes_t b = micro_bytes(p.bytes[ti], act.parts, act.part);
              c = new_copy(t, b, a);
              touch(c, false);
              alloc += b;
              continue;
            }
            auto& c = current_[ti];
            if (c != no_index) {
              if (micro && act.kind == action_kind::compute) {  // a whole output made by micro-op 0, written by this one
                touch(c, true);
                copies_[static_cast<std::size_t>(c)].creator = a;  // a later reader (a swap-out) waits for this write
              }
              continue;
            }
            if (micro_parts_[ti] != 0) {
              if (all_micro(t)) continue;  // on the device as micro-tensors
              if (any_micro(t)) return fail(describe(p, pl, a) + partly_on_device(p, t), r);
              micro_parts_[ti] = 0;
            }
            const bytes_t b = p.bytes[ti];
            c = new_copy(t, b, a);
            touch(c, false);
            alloc += b;
          }
          const bytes_t w = p.workspace[si];
          workspace = act.parts == 1 ? w : (w + act.parts - 1) / act.parts;
          alloc += workspace;
          duration = split_time_us(dev, p.time_us[si], act.parts) / (micro ? act.parts : 1);
          if (act.kind == action_kind::recompute) {
            ++r.recomputed_ops;
            r.recompute_us += duration;
          }
          if (act.parts > 1 && act.part <= 0) ++r.split_ops;
          break;
        }
        case action_kind::swap_out:
        case action_kind::swap_in:
        case action_kind::free: {
          const index_t t = act.tensor;
          if (t < 0 || static_cast<std::size_t>(t) >= tensors) {
            return fail(detail::concat("action ", a, " (", to_string(act.kind), ") names tensor ", t,
                                       ", but the problem has ", tensors, " tensors"),
                        r);
          }
          const auto ti = static_cast<std::size_t>(t);
          if (micro) {
            if (!splits_with_batch(p.kind[ti])) {
              return fail(describe(p, pl, a) + ": only tensors of kind input, activation or gradient have micro-tensors",
                          r);
            }
            const bool ok = act.kind == action_kind::swap_in
                                ? micro_swap_in(p, pl, a, dev, r, alloc, duration, source)
                                : micro_release(p, pl, a, start, dev, r, duration, splits);
            if (!ok) return false;
            break;
          }
          make_room(1, 1);
          auto& c = current_[ti];
          const bytes_t b = p.bytes[ti];
          if (c == no_index && micro_parts_[ti] != 0 && any_micro(t)) {
            return fail(describe(p, pl, a) + partly_on_device(p, t), r);
          }
          micro_parts_[ti] = 0;
          if (act.kind == action_kind::swap_in) {
            if (c != no_index) return fail(describe(p, pl, a) + ": the tensor is already on the device", r);
            if (saved_by_[ti] == no_index) {
              return fail(describe(p, pl, a) + ": the tensor was never swapped out, so no host copy exists", r);
            }
            source = saved_by_[ti] == from_start ? no_index : saved_by_[ti];
            c = new_copy(t, b, a);
            touch(c, false);
            alloc = b;
            duration = dev.h2d.transfer_us(b);
            r.swapped_in_bytes += b;
            break;
          }
          if (c == no_index) {
            return fail(describe(p, pl, a) + ": releases a tensor that is not on the device" +
                            not_on_device(p, pl, a, t),
                        r);
          }
          // The release waits for this action too: a swap-out's copy must
          // end, and a free must have been reached on its stream.
          touch(c, act.kind == action_kind::swap_out);
          c = no_index;
          if (act.kind == action_kind::swap_out) {
            saved_by_[ti] = a;
            duration = dev.d2h.transfer_us(b);
            r.swapped_out_bytes += b;
          }
          break;
        }
        default:
          return fail(detail::concat("action ", a, " has unknown kind ", static_cast<int>(act.kind)), r);
      }
      info_[i] = {duration, alloc, workspace, workspace, source, touch_begin, static_cast<index_t>(n), splits, stream};
      const double end = start + duration;
      // Reading a copy (or a host copy) before its maker ends is invalid;
      // `execute` finds and reports it at the time it happens.
      if (source != no_index && end_[static_cast<std::size_t>(source)] > start) unbounded_ = false;
      for (std::size_t k = static_cast<std::size_t>(touch_begin); k < touch_count_; ++k) {
        copy_info& c = copies_[static_cast<std::size_t>(touches_[k].copy)];
        if (touches_[k].after != no_index && end_[static_cast<std::size_t>(touches_[k].after)] > start) {
          unbounded_ = false;
        }
        if (end >= c.release_us) {
          c.release_us = end;
          c.release_by = a;
        }
      }
      start_[i] = start;
      end_[i] = end;
      stream_end[static_cast<std::size_t>(stream)] = end;
      if (stream == stream_kind::compute) compute_busy_us_ += duration;
      index_t& before = last[static_cast<std::size_t>(stream)];
      (before == no_index ? first_[static_cast<std::size_t>(stream)] : info_[static_cast<std::size_t>(before)].next) = a;
      before = a;
    }
    info_[n].touch_begin = static_cast<index_t>(touch_count_);
    unbounded_time_us_ = std::max({stream_end[0], stream_end[1], stream_end[2]});

    for (std::size_t s = 0; s < steps; ++s) {
      if (computed_[s] == 0) return fail(detail::concat("step ", s, " (op '", p.op_name[s], "') is never computed"), r);
      if (computed_[s] != step_parts_[s]) {
        return fail(detail::concat("step ", s, " (op '", p.op_name[s], "'): only ", computed_[s], " of its ",
                                   step_parts_[s], " micro-ops are computed"),
                    r);
      }
    }
    // Offloaded state ends the iteration in host memory, its update saved.
    for (const index_t t : pl.offloaded_state) {
      const auto ti = static_cast<std::size_t>(t);
      if (current_[ti] != no_index) {
        return fail(detail::concat("offloaded_state '", p.tensor_name[ti],
                                   "' is on the device at the end of the iteration; it must end in host memory "
                                   "(swap it out after its last use)"),
                    r);
      }
      const index_t update = last_update_[ti];
      if (update == no_index) continue;  // no op writes it: its host copy is current
      const index_t saved = saved_by_[ti];
      const auto waits = saved > update ? pl.waits_of(static_cast<std::size_t>(saved)) : std::span<const index_t>();
      if (std::ranges::find(waits, update) == waits.end()) {
        return fail(detail::concat("offloaded_state '", p.tensor_name[ti], "': its update, ", describe(p, pl, update),
                                   ", is not saved; the last swap_out of it must wait on that action"),
                    r);
      }
    }
    // The copies still on the device at the end die once their last holder
    // ends, unless the tensor persists across iterations (DESIGN.md §4).
    for (std::size_t t = 0; t < tensors; ++t) {
      const index_t c = current_[t];
      if (c == no_index || !p.persistent(static_cast<index_t>(t))) continue;
      copy_info& last_copy = copies_[static_cast<std::size_t>(c)];
      ++last_copy.pending;
      last_copy.release_by = kept;
    }
    return true;
  }

  /// Action being resolved holds t: micro-tensor `part` of `parts`, or the
  /// whole tensor (part == no_index) — the whole copy, or every micro-tensor
  /// (an in-place merge, also how a micro-tensor of another parts count is
  /// read). \returns false if that is not on the device.
  bool hold(index_t t, index_t parts, index_t part, bool reads) {
    const auto ti = static_cast<std::size_t>(t);
    make_room(1, 0);
    if (current_[ti] != no_index) {
      touch(current_[ti], reads);
      return true;
    }
    const index_t q = micro_parts_[ti];
    if (q == 0) return false;
    const std::span<const index_t> slots(micro_copy_.data() + micro_at_[ti], static_cast<std::size_t>(q));
    if (part != no_index && q == parts) {
      if (slots[static_cast<std::size_t>(part)] == no_index) return false;
      touch(slots[static_cast<std::size_t>(part)], reads);
      return true;
    }
    if (std::ranges::find(slots, no_index) != slots.end()) return false;
    make_room(static_cast<std::size_t>(q), 0);
    for (const index_t c : slots) touch(c, reads);
    return true;
  }
  [[nodiscard]] bool any_micro(index_t t) const {
    const auto ti = static_cast<std::size_t>(t);
    for (index_t k = 0; k < micro_parts_[ti]; ++k) {
      if (micro_copy_[micro_at_[ti] + static_cast<std::size_t>(k)] != no_index) return true;
    }
    return false;
  }
  [[nodiscard]] bool all_micro(index_t t) const {
    const auto ti = static_cast<std::size_t>(t);
    for (index_t k = 0; k < micro_parts_[ti]; ++k) {
      if (micro_copy_[micro_at_[ti] + static_cast<std::size_t>(k)] == no_index) return false;
    }
    return true;
  }
  /// t is to hold micro-tensors of `parts`: false if it holds some of another count.
  bool enter_parts(index_t t, index_t parts) {
    const auto ti = static_cast<std::size_t>(t);
    if (micro_parts_[ti] == parts) return true;
    if (micro_parts_[ti] != 0 && any_micro(t)) return false;
    micro_parts_[ti] = parts;
    micro_at_[ti] = micro_copy_.size();
    micro_copy_.resize(micro_copy_.size() + static_cast<std::size_t>(parts), no_index);
    return true;
  }
  static std::string other_parts(const problem& p, index_t t) {
    return detail::concat(": tensor '", p.tensor_name[static_cast<std::size_t>(t)],
                          "' is on the device as micro-tensors of another parts count");
  }
  static std::string partly_on_device(const problem& p, index_t t) {
    return detail::concat(": tensor '", p.tensor_name[static_cast<std::size_t>(t)],
                          "' is on the device as micro-tensors; release or bring back each of them");
  }

  /// swap_in(t, parts, k): from the host copy of micro-tensor k, or of the whole tensor.
  bool micro_swap_in(const problem& p, const plan& pl, index_t a, const device_spec& dev, report& r, bytes_t& alloc,
                     double& duration, index_t& source) {
    const action& act = pl.actions[static_cast<std::size_t>(a)];
    const index_t t = act.tensor;
    const auto ti = static_cast<std::size_t>(t);
    if (current_[ti] != no_index) return fail(describe(p, pl, a) + ": the tensor is already on the device", r);
    if (!enter_parts(t, act.parts)) return fail(describe(p, pl, a) + other_parts(p, t), r);
    index_t& c = micro_copy_[micro_at_[ti] + static_cast<std::size_t>(act.part)];
    if (c != no_index) return fail(describe(p, pl, a) + ": the micro-tensor is already on the device", r);
    source = host_parts_[ti] == act.parts ? host_copy_[host_at_[ti] + static_cast<std::size_t>(act.part)] : no_index;
    if (source == no_index) source = saved_by_[ti];
    if (source == no_index) {
      return fail(describe(p, pl, a) + ": neither the micro-tensor nor the tensor was swapped out", r);
    }
    const bytes_t b = micro_bytes(p.bytes[ti], act.parts, act.part);
    make_room(1, 1);
    c = new_copy(t, b, a);
    touch(c, false);
    alloc = b;
    duration = dev.h2d.transfer_us(b);
    r.swapped_in_bytes += b;
    return true;
  }

  /// free / swap_out(t, parts, k): releases micro-tensor k, splitting a
  /// whole t in place first (its bytes pass to `parts` micro copies).
  bool micro_release(const problem& p, const plan& pl, index_t a, double start, const device_spec& dev, report& r,
                     double& duration, index_t& splits) {
    const action& act = pl.actions[static_cast<std::size_t>(a)];
    const index_t t = act.tensor;
    const auto ti = static_cast<std::size_t>(t);
    const bool out = act.kind == action_kind::swap_out;
    const auto k = static_cast<std::size_t>(act.part);
    const index_t whole = current_[ti];
    if (whole != no_index) {
      make_room(static_cast<std::size_t>(act.parts) + 1, static_cast<std::size_t>(act.parts));
      touch(whole, false);
      current_[ti] = no_index;
      micro_parts_[ti] = 0;
      enter_parts(t, act.parts);
      copy_info& w = copies_[static_cast<std::size_t>(whole)];
      // Issue-order times: an earlier holder may still run when it starts.
      if (w.release_us > start) unbounded_ = false;
      const bytes_t total = w.bytes;
      const index_t creator = w.creator;
      w.bytes = 0;
      for (index_t j = 0; j < act.parts; ++j) {
        const index_t m = new_copy(t, micro_bytes(total, act.parts, j), creator);
        micro_copy_[micro_at_[ti] + static_cast<std::size_t>(j)] = m;
        touch(m, out && static_cast<std::size_t>(j) == k);
      }
      splits = whole;
    } else if (micro_parts_[ti] != act.parts ||
               micro_copy_[micro_at_[ti] + k] == no_index) {
      return fail(describe(p, pl, a) + ": releases a micro-tensor that is not on the device" +
                      not_on_device(p, pl, a, t),
                  r);
    } else {
      make_room(1, 0);
      touch(micro_copy_[micro_at_[ti] + k], out);
    }
    micro_copy_[micro_at_[ti] + k] = no_index;
    if (!out) return true;
    if (host_parts_[ti] != act.parts) {
      host_parts_[ti] = act.parts;
      host_at_[ti] = host_copy_.size();
      host_copy_.resize(host_copy_.size() + static_cast<std::size_t>(act.parts), no_index);
    }
    host_copy_[host_at_[ti] + k] = a;
    const bytes_t b = micro_bytes(p.bytes[ti], act.parts, act.part);
    duration = dev.d2h.transfer_us(b);
    r.swapped_out_bytes += b;
    return true;
  }

  /// ": tensor 'x' is not on the device; action 9 (free 'x') released it ..."
  /// for action `a`, which found t missing.
  static std::string not_on_device(const problem& p, const plan& pl, index_t a, index_t t) {
    const auto ti = static_cast<std::size_t>(t);
    index_t by = a - 1;  // the latest release of t before a
    for (; by >= 0; --by) {
      const action& act = pl.actions[static_cast<std::size_t>(by)];
      if (act.tensor == t && (act.kind == action_kind::swap_out || act.kind == action_kind::free)) break;
    }
    if (by >= 0) {
      return detail::concat(": tensor '", p.tensor_name[ti], "' is not on the device; ", describe(p, pl, by),
                            " released it and nothing brought it back");
    }
    if (std::ranges::binary_search(pl.offloaded_state, t)) {
      return detail::concat(": tensor '", p.tensor_name[ti],
                            "' is not on the device; it is offloaded state, in host memory until a swap_in brings it");
    }
    return detail::concat(": tensor '", p.tensor_name[ti], "' is not on the device; nothing has made it yet");
  }

  /// Pass 2, the common case: memory never binds. Then every action starts
  /// as soon as its stream and its waits allow — the times `resolve` found
  /// in issue order — and a merge of the three streams' allocations and
  /// frees gives the memory level.
  /// \returns false, leaving the verdict to `execute`, if an allocation would
  ///          not fit (it would wait, changing the times) or an action would
  ///          start before a copy it reads is made (an invalid plan).
  bool run_unbounded(const plan& pl, bytes_t budget, const simulate_options& opts, report& r) {
    const std::size_t n = pl.actions.size();
    if (!unbounded_ || initial_bytes_ > budget) return false;
    bytes_t in_use = initial_bytes_;
    bytes_t peak = in_use;
    if (opts.record_memory) r.memory_curve.push_back({0, in_use});
    for (const copy_info& c : std::span(copies_).first(copy_count_)) {
      if (c.release_by == kept) continue;
      if (c.release_by != no_index) {
        info_[static_cast<std::size_t>(c.release_by)].frees += c.bytes;
      } else if (c.bytes > 0) {  // nobody holds it (an unused input): released at once
        in_use -= c.bytes;
        if (opts.record_memory) r.memory_curve.push_back({0, in_use});
      }
    }
    // Merge the streams' events as `execute` orders them at one instant:
    // frees of actions started earlier come first, then allocations in issue
    // order, each zero-length action's frees right after its allocation.
    std::size_t at[stream_count];
    bool allocated[stream_count] = {};  // at[s]'s allocation is done, its frees are next
    double time[stream_count];          // the stream's next event: (time, rank), the lowest first
    double rank[stream_count];
    const auto next_event = [&](std::size_t s) {
      const std::size_t a = at[s];
      if (a >= n) {
        time[s] = never;
        rank[s] = 0;
      } else if (!allocated[s]) {
        time[s] = start_[a];
        rank[s] = static_cast<double>(a);
      } else {
        time[s] = end_[a];
        rank[s] = start_[a] == end_[a] ? static_cast<double>(a) + 0.5 : -1.0;
      }
    };
    for (std::size_t s = 0; s < stream_count; ++s) {
      at[s] = static_cast<std::size_t>(first_[s]);
      next_event(s);
    }
    for (;;) {
      std::size_t best = 0;
      for (std::size_t s = 1; s < stream_count; ++s) {
        if (time[s] < time[best] || (time[s] == time[best] && rank[s] < rank[best])) best = s;
      }
      const double now = time[best];
      if (now == never) break;
      const action_info& info = info_[at[best]];
      bytes_t change = 0;
      if (allocated[best]) {
        allocated[best] = false;
        at[best] = static_cast<std::size_t>(info.next);
        change = -info.frees;
      } else {
        allocated[best] = true;
        change = info.alloc;
      }
      next_event(best);
      if (change == 0) continue;
      in_use += change;
      if (in_use > budget) return false;  // `run` discards the curve so far
      peak = std::max(peak, in_use);
      if (opts.record_memory) r.memory_curve.push_back({now, in_use});
    }
    r.peak_bytes = peak;
    r.time_us = unbounded_time_us_;
    r.stall_us = r.time_us - compute_busy_us_;
    return true;
  }

  /// Pass 2: the discrete-event run (DESIGN.md §5). A copy is freed when
  /// the holder that ends last ends, so frees are kept on the actions (no
  /// heap): each stream's actions end in issue order, and the frees of ended
  /// actions are applied lazily, earliest first, just before an allocation
  /// at a later or equal time — frees at time t happen before allocations at t.
  void execute(const problem& p, const plan& pl, bytes_t budget, const simulate_options& opts, report& r) {
    const std::size_t n = pl.actions.size();
    end_.assign(n, never);
    start_.resize(n);
    for (std::size_t i = 0; i < n; ++i) info_[i].frees = info_[i].workspace;
    for (copy_info& c : std::span(copies_).first(copy_count_)) {
      c.release_us = 0;
      c.release_by = no_index;
    }
    std::size_t head[stream_count];     // per stream, its next action to start (n: none left)
    std::size_t drained[stream_count];  // per stream, its first action whose frees are not applied
    double busy_until[stream_count] = {};
    for (std::size_t s = 0; s < stream_count; ++s) head[s] = drained[s] = static_cast<std::size_t>(first_[s]);
    double compute_busy = 0;
    double now = 0;
    bytes_t in_use = initial_bytes_;
    r.peak_bytes = in_use;
    if (opts.record_memory) r.memory_curve.push_back({0, in_use});
    const auto finish = [&] {
      r.time_us = std::max({busy_until[0], busy_until[1], busy_until[2]});
      r.stall_us = r.time_us - compute_busy;
    };
    if (in_use > budget) {
      r.kind = failure_kind::out_of_memory;
      r.failure = detail::concat("out of memory at time 0: the tensors without a producer need ",
                                 format_bytes(in_use), ", budget ", format_bytes(budget));
      return;
    }
    // Copies nobody holds (unused inputs) are released at once.
    for (const copy_info& c : std::span(copies_).first(copy_count_)) {
      if (c.pending == 0 && c.bytes > 0) {
        in_use -= c.bytes;
        if (opts.record_memory) r.memory_curve.push_back({0, in_use});
      }
    }
    const auto apply_frees = [&](double until) {
      for (;;) {
        std::size_t s_min = stream_count;
        double t_min = until;
        for (std::size_t s = 0; s < stream_count; ++s) {
          if (drained[s] < n && end_[drained[s]] <= t_min) {
            s_min = s;
            t_min = end_[drained[s]];
          }
        }
        if (s_min == stream_count) return;
        const action_info& info = info_[drained[s_min]];
        drained[s_min] = static_cast<std::size_t>(info.next);
        if (info.frees == 0) continue;
        in_use -= info.frees;
        if (opts.record_memory) r.memory_curve.push_back({t_min, in_use});
      }
    };

    std::size_t started = 0;
    index_t blocked = no_index;  // the earliest-issued action waiting for memory
    for (;;) {
      // The idle streams' heads, lowest issue index first.
      std::size_t heads[stream_count];
      std::size_t idle = 0;
      for (std::size_t s = 0; s < stream_count; ++s) {
        if (busy_until[s] <= now && head[s] < n) {
          // Insertion into the sorted prefix: at most three entries.
          std::size_t k = idle++;
          for (; k > 0 && heads[k - 1] > head[s]; --k) heads[k] = heads[k - 1];
          heads[k] = head[s];
        }
      }
      std::size_t chosen = n;
      blocked = no_index;
      for (std::size_t k = 0; k < idle; ++k) {
        const std::size_t h = heads[k];
        bool ready = true;
        for (const index_t w : pl.waits_of(h)) ready = ready && end_[static_cast<std::size_t>(w)] <= now;
        if (!ready) continue;
        const bytes_t alloc = info_[h].alloc;
        if (alloc > 0) {
          if (blocked != no_index) continue;  // first come, first served
          apply_frees(now);                   // only allocations need the current level
          if (in_use + alloc > budget) {
            blocked = static_cast<index_t>(h);
            continue;
          }
        }
        chosen = h;
        break;
      }
      if (chosen != n) {
        action_info& info = info_[chosen];
        const index_t source = info.source;
        if (source != no_index && end_[static_cast<std::size_t>(source)] > now) {
          fail_late(p, pl, chosen, source, pl.actions[chosen].tensor, now, r);
          return finish();
        }
        if (info.splits != no_index) {
          // An in-place split: every other holder of the whole copy has ended.
          const copy_info& w = copies_[static_cast<std::size_t>(info.splits)];
          if (w.pending != 1 || w.release_us > now) {
            fail(describe(p, pl, static_cast<index_t>(chosen)) +
                     detail::concat(" splits tensor '", p.tensor_name[static_cast<std::size_t>(w.tensor)],
                                    "' in place at ", now,
                                    " us while an earlier action holding it has not ended: a wait is missing"),
                 r);
            return finish();
          }
        }
        const double end = now + info.duration_us;
        for (const touch_info& t : touches_of(chosen)) {
          copy_info& c = copies_[static_cast<std::size_t>(t.copy)];
          // A copy it reads must have been made (plan.hpp): a wait is missing otherwise.
          if (t.after != no_index && end_[static_cast<std::size_t>(t.after)] > now) {
            fail_late(p, pl, chosen, t.after, c.tensor, now, r);
            return finish();
          }
          // On a tie the starting action takes the free: an earlier holder
          // ending now may have had its frees applied already.
          if (end >= c.release_us) {
            c.release_us = end;
            c.release_by = static_cast<index_t>(chosen);
          }
          if (--c.pending == 0) info_[static_cast<std::size_t>(c.release_by)].frees += c.bytes;
        }
        start_[chosen] = now;
        end_[chosen] = end;
        busy_until[static_cast<std::size_t>(info.stream)] = end;
        head[static_cast<std::size_t>(info.stream)] = static_cast<std::size_t>(info.next);
        ++started;
        if (info.stream == stream_kind::compute) compute_busy += info.duration_us;
        if (info.alloc > 0) {
          in_use += info.alloc;
          r.peak_bytes = std::max(r.peak_bytes, in_use);
          if (opts.record_memory) r.memory_curve.push_back({now, in_use});
        }
        continue;
      }
      // Every pending free comes at the end of an action in flight, so the
      // next end is the next event.
      double wake = never;
      for (const double b : busy_until) {
        if (b > now) wake = std::min(wake, b);
      }
      if (wake == never) break;
      now = wake;
    }
    // Every started action has ended by `now`; the ones never started hold
    // workspace in `frees` too, which must not count.
    apply_frees(now);
    finish();
    if (started == n) return;
    // Nothing in flight and nothing left to free. Waits name only earlier
    // actions, so the earliest unstarted action is a head that is ready but
    // for memory: `blocked` is set, and its allocation can never fit.
    const bytes_t need = info_[static_cast<std::size_t>(blocked)].alloc;
    r.kind = failure_kind::out_of_memory;
    r.failure = detail::concat("out of memory at ", describe(p, pl, blocked), ", at ", now, " us: needs ",
                               format_bytes(need), " (", format_bytes(in_use + need - budget),
                               " more than is free), ", format_bytes(in_use), " in use, budget ",
                               format_bytes(budget));
  }

  [[nodiscard]] std::span<const touch_info> touches_of(std::size_t i) const {
    const auto b = static_cast<std::size_t>(info_[i].touch_begin);
    return {touches_.data() + b, static_cast<std::size_t>(info_[i + 1].touch_begin) - b};
  }

  /// An action may start only once the copies it reads have been made, and a
  /// swap-in only once its swap-out has ended (plan.hpp); the plan must order
  /// them with waits, so starting `a` before `before` ends makes it invalid.
  void fail_late(const problem& p, const plan& pl, std::size_t a, index_t before, index_t t, double now, report& r) {
    const double e = end_[static_cast<std::size_t>(before)];
    fail(detail::concat(describe(p, pl, static_cast<index_t>(a)), " starts at ", now, " us, but ",
                        describe(p, pl, before), ", which it needs for tensor '",
                        p.tensor_name[static_cast<std::size_t>(t)], "', ",
                        e == never ? std::string("has not started") : detail::concat("ends at ", e, " us"),
                        ": a wait is missing"),
         r);
  }

  std::vector<action_info> info_;  ///< per action, plus one for the end of the touches
  std::vector<touch_info> touches_;  ///< per action, the copies it holds
  std::size_t touch_count_ = 0;    ///< used part of `touches_`
  bool unbounded_ = false;         ///< the issue-order times are valid if memory never binds
  double unbounded_time_us_ = 0;   ///< and then the iteration time
  double compute_busy_us_ = 0;     ///< the compute stream's total busy time
  std::vector<double> start_;      ///< per action
  std::vector<double> end_;        ///< per action; `never` until it starts
  index_t first_[stream_count] = {};  ///< per stream, its first action
  std::vector<copy_info> copies_;
  std::size_t copy_count_ = 0;  ///< used part of `copies_`
  // Per tensor / step, during resolve.
  std::vector<index_t> current_;      ///< the copy on the device, or no_index
  std::vector<index_t> saved_by_;     ///< latest swap_out (the host copy); from_start for offloaded state
  std::vector<index_t> last_update_;     ///< per tensor: the latest update-phase compute reading it
  std::vector<index_t> computed_;    ///< per step: 1 when computed whole, else micro-ops computed
  std::vector<index_t> step_parts_;  ///< per step: 1, or the parts of its micro-ops
  std::vector<index_t> micro_parts_;     ///< per tensor: parts of its micro-tensors on the device, 0: none
  std::vector<std::size_t> micro_at_;    ///< per tensor: its slots in micro_copy_
  std::vector<index_t> micro_copy_;      ///< copies of micro-tensors, or no_index
  std::vector<index_t> host_parts_;      ///< per tensor: parts of its micro-tensors' host copies, 0: none
  std::vector<std::size_t> host_at_;     ///< per tensor: its slots in host_copy_
  std::vector<index_t> host_copy_;       ///< the swap_out of each micro-tensor, or no_index
  bytes_t initial_bytes_ = 0;
};

/// Simulates `pl` on `dev` under `budget` (DESIGN.md §5). Use a `simulator`
/// object instead to reuse its buffers across many calls.
/// \returns a report; infeasibility (out of memory, an invalid plan) is in
///          the report, never an exception.
/// \throws invalid_argument if `budget` is negative.
[[nodiscard]] inline report simulate(const problem& p, const plan& pl, const device_spec& dev, bytes_t budget,
                                     const simulate_options& opts = {}) {
  return simulator{}.run(p, pl, dev, budget, opts);
}

}  // namespace memplan
