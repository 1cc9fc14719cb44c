#pragma once
/// \file
/// `tsplit` and `tsplit-nosplit`: TSPLIT (Nie et al., "TSPLIT: Fine-grained GPU Memory
/// Management for Efficient DNN Training via Tensor Splitting", ICDE 2022)
/// with and without its split option (the latter is the paper's "TSPLIT
/// w/o Split", Fig. 13).
///
/// Algo 2 walks the DFS schedule (Algo 1); at every memory bottleneck it
/// evicts the live tensor whose swap (Eq. 2-3, with the PCIe occupancy
/// Oc_u of the current plan) or recompute (Eq. 4) option has the smallest
/// ΔT/ΔM, until the bottleneck is gone (tsplit/algo2.hpp). The
/// decisions become an action list with swaps on the copy streams and
/// memory-centric recomputation and its LRU improvement (§V-D,
/// tsplit/emit.hpp; the room it keeps intermediates in is measured
/// by simulating the memory-centric plan, room_left), with swap-ins issued
/// at their prefetch steps and in the order they are due; the fastest of
/// these plans that fits is kept.
///
/// The simulator is the judge. Algo 2's memory model counts tensors at step
/// granularity; where the simulated plan still overflows (a swap-out that
/// ends late, a recomputation chain's transient tensors), the walk is
/// repeated against a budget lowered by the overflow, a few times — a
/// feedback step the paper's one-shot planner does not have — and so it is
/// where a plan fits but a faster variant of it does not
/// (plan_with_feedback). Where the
/// plan's swaps stall the compute stream, Algo 2 runs again assuming
/// slower links, and the fastest plan that fits is kept (plan_on_links).
/// All of it runs with and without guarded checkpoints
/// (`walk_options::guard_checkpoints`), the better plan kept (plan_tsplit).

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "memplan/error.hpp"
#include "memplan/planners/parallel.hpp"
#include "memplan/planners/tsplit/algo2.hpp"
#include "memplan/planners/tsplit/emit.hpp"
#include "memplan/planners/verdict.hpp"
#include "memplan/planners/planner.hpp"
#include "memplan/sim/simulator.hpp"

namespace memplan {

namespace detail::tsplit {

/// One run of Algo 2 against `target`, the plans it gives and the
/// simulator's verdicts on them under the budget.
struct attempt {
  /// The action lists of its decisions: memory-centric recomputation
  /// first, then those of the variants that differ from it — swap-ins
  /// issued in the order they are due (where one is issued early), and
  /// with either, §V-D's LRU improvement where it spares a recomputation
  /// and fits.
  std::vector<plan> plans;
  std::vector<report> verdicts;  ///< per plan
  unbounded_need need;           ///< the memory-centric plan's needs, when it does not fit
  index_t stuck = no_index;      ///< the first step no option could bring under `target`
  bytes_t stuck_memory = 0;      ///< M_i there after every option
};

struct emitted {
  plan result;
  std::size_t kept_reads = 0;
  std::size_t issued_early = 0;
};

/// The action list of Algo 2's decisions (tsplit_emit.hpp), in two passes:
/// the first finds the tensors that recomputations read after their last
/// use, the second frees those early.
inline emitted emit(const problem& p, const algo2& walk, std::string_view name, bytes_t budget,
                    std::span<const bytes_t> room, bool due_first) {
  const std::vector<std::uint8_t> none(p.num_tensors(), 0);
  emitter first(p, walk.evictions(), walk.splits(), std::string(name), budget, none, room, due_first);
  first.run();
  emitter second(p, walk.evictions(), walk.splits(), std::string(name), budget, first.read_dead(), room, due_first);
  second.run();
  const std::size_t kept_reads = second.kept_reads();
  const std::size_t issued_early = second.issued_early();
  return {std::move(second).finish(), kept_reads, issued_early};
}

/// The memory a plan holds, simulated without a budget (in_use).
struct held {
  /// Per step, the most while the step's inputs are brought and its op runs
  /// (from the end of the previous step's compute to the end of its own);
  /// empty when the plan is invalid.
  std::vector<bytes_t> most;
  bytes_t peak = 0;  ///< the most at any time
};

[[nodiscard]] inline held in_use(const problem& p, const plan& pl, const device_spec& dev, simulator& sim) {
  const report r = sim.run(p, pl, dev, simulator::unlimited, {.record_timeline = true, .record_memory = true});
  if (!r.feasible) return {};
  std::vector<double> end(p.num_steps(), 0);  // of the step's compute (its last micro-op)
  for (const action_interval& a : r.timeline) {
    const action& act = pl.actions[static_cast<std::size_t>(a.action)];
    if (act.kind != action_kind::compute) continue;
    double& e = end[static_cast<std::size_t>(act.step)];
    e = std::max(e, a.end_us);
  }
  held h{std::vector<bytes_t>(p.num_steps()), r.peak_bytes};
  std::vector<bytes_t>& most = h.most;
  std::size_t next = 0;  // into the memory curve
  bytes_t level = 0;
  for (std::size_t s = 0; s < most.size(); ++s) {
    most[s] = level;
    for (; next < r.memory_curve.size() && r.memory_curve[next].time_us < end[s]; ++next) {
      level = r.memory_curve[next].bytes;
      most[s] = std::max(most[s], level);
    }
  }
  return h;
}

/// The room §V-D's LRU improvement may keep recomputed intermediates in:
/// per step, what `budget` leaves free at most (in_use) in `pl`, the
/// memory-centric plan. Empty when the plan is invalid.
///
/// Algo 2's own memory model (M_i, counted at step granularity) gave the
/// room before: on resnet101 at batch 1,460 on titan-rtx the plans that
/// kept intermediates in it needed 25.4-34.2 GiB of 24, and the room had
/// to shrink by 2-11 GiB before one fit. With the simulated room they fit
/// at the first try or the second, and `tsplit-nosplit`'s plan is 52.0 %
/// over the baseline instead of 66.8 %.
[[nodiscard]] inline std::vector<bytes_t> room_left(const problem& p, const plan& pl, const device_spec& dev,
                                                    bytes_t budget, simulator& sim) {
  std::vector<bytes_t> room = in_use(p, pl, dev, sim).most;
  for (bytes_t& r : room) r = std::max<bytes_t>(budget - r, 0);
  return room;
}

/// Lowers `limit` (Algo 2's target or the LRU improvement's room, per
/// step) where a plan that needs `peak` under `budget` overflows: at the
/// steps where it holds more than the budget (`most`, in_use), by as much,
/// at least 1/64 of the budget; if there are none (the overflow is outside
/// every step's window) or their limit is 0 already, at every step by the
/// overflow. Never below 0.
inline void lower_at_overflow(std::vector<bytes_t>& limit, const std::vector<bytes_t>& most, bytes_t budget,
                              bytes_t peak) {
  const bytes_t margin = budget / 64 + 1;
  bool lowered = false;
  for (std::size_t s = 0; s < most.size(); ++s) {
    if (most[s] <= budget || limit[s] == 0) continue;
    limit[s] = std::max<bytes_t>(limit[s] - std::max(most[s] - budget, margin), 0);
    lowered = true;
  }
  if (lowered) return;
  for (bytes_t& l : limit) l = std::max<bytes_t>(l - std::max(peak - budget, margin), 0);
}

/// Tries of §V-D's LRU improvement in the simulated room (room_left):
/// keeping intermediates makes the plan faster than the one the room was
/// measured on, so its swaps arrive at other times; where the plan
/// overflows, the room shrinks there (lower_at_overflow) and the
/// intermediates are kept again, `lru_tries` times, and if that does not
/// fit, `lru_tries` - 1 times more with the room shrunk everywhere by the
/// overflow. The room Algo 2's model leaves is tried first, once, and
/// the simulated one only where that plan keeps intermediates and does
/// not fit (on gpt2 with 96k ops, trying it also where Algo 2's room
/// keeps nothing cost 15-30 % more planning time): neither is better
/// everywhere (Algo 2's gives the DTR InceptionV4 log at 30 % 1.161, the
/// simulated one alone 1.217; resnet101 above is the other way), and
/// where Algo 2's fits, the LRU improvement costs one emission and one
/// simulation, as before the simulated room.
///
/// The room shrank only everywhere before: on resnet101 at batch 1,690 on
/// titan-rtx (`tsplit`, guarded split walk) the plan that kept
/// intermediates needed 28.1 GiB, the room shrank by 4.1 GiB everywhere
/// and the plan that fit was 68.6 % over the baseline; shrunk where it
/// overflows, 54.7 %. Shrunk only there, inception_v4 at batch 1,552 (split
/// walk) fit no plan that keeps intermediates in three tries (28.3 → 24.8
/// GiB) and was 219.9 % over; shrunk everywhere after, 127.7 %.
inline constexpr int lru_tries = 3;

/// Algo 2 against `target` (per step) on `assumed` links, its plans
/// simulated on `dev`.
inline attempt plan_once(const problem& p, const device_spec& dev, const device_spec& assumed, std::string_view name,
                         bytes_t budget, const std::vector<bytes_t>& target, walk_options options, simulator& sim) {
  algo2 walk(p, assumed, target, options);
  attempt a;
  for (std::size_t s = 0; s < p.num_steps(); ++s) {
    walk.advance();
    if (!walk.resolve() && a.stuck == no_index) {
      a.stuck = walk.step();
      a.stuck_memory = walk.memory();
    }
  }
  walk.finish();
  // Without recomputations the LRU improvement has nothing to keep.
  std::vector<bytes_t> model_room;  // what Algo 2's model leaves under `target`
  if (std::ranges::any_of(walk.evictions(), [](const eviction& e) { return e.how == option::recompute; })) {
    model_room = walk.memory_curve();
    for (std::size_t i = 0; i < model_room.size(); ++i) model_room[i] = std::max<bytes_t>(target[i] - model_room[i], 0);
  }
  // The LRU improvement in `room`; where the plan overflows, the room
  // shrinks where it does (lower_at_overflow) for `local` tries, then, from
  // the first try's overflow, everywhere for `everywhere` more (each way
  // fits where the other does not: resnet101 at batch 1,690 and
  // inception_v4 at 1,552 on titan-rtx, docs/results.md). A plan that fits
  // joins `a`. Returns whether the last try kept intermediates and
  // overflowed.
  const auto keep_in = [&](const std::vector<bytes_t>& room, bool due_first, int local, int everywhere) {
    std::vector<bytes_t> shrunk = room;
    bytes_t first_peak = 0;
    for (int t = 0; t < local + everywhere && !room.empty(); ++t) {
      emitted lru = emit(p, walk, name, budget, shrunk, due_first);
      if (lru.kept_reads == 0) return false;
      unbounded_need need;
      report r = sim.run(p, lru.result, dev, budget, need);
      if (r.feasible) {
        a.plans.push_back(std::move(lru.result));
        a.verdicts.push_back(std::move(r));
        return false;
      }
      if (!need.feasible) return false;
      if (t == 0) first_peak = need.peak_bytes;
      if (t + 1 < local) {
        lower_at_overflow(shrunk, in_use(p, lru.result, dev, sim).most, budget, need.peak_bytes);
      } else if (t + 1 == local) {
        shrunk = room;
        lower_at_overflow(shrunk, {}, budget, first_peak);
      } else {
        lower_at_overflow(shrunk, {}, budget, need.peak_bytes);
      }
    }
    return true;
  };
  for (const bool due_first : {false, true}) {
    emitted e = emit(p, walk, name, budget, {}, due_first);
    if (due_first && e.issued_early == 0) return a;  // the same swap-ins as without
    a.verdicts.push_back(due_first ? sim.run(p, e.result, dev, budget) : sim.run(p, e.result, dev, budget, a.need));
    a.plans.push_back(std::move(e.result));
    if (!model_room.empty() && keep_in(model_room, due_first, 1, 0)) {
      keep_in(room_left(p, a.plans.back(), dev, budget, sim), due_first, lru_tries, lru_tries - 1);
    }
  }
  return a;
}

/// A plan and, if it fits, the simulator's run of it under the budget
/// (else a report that is not feasible), so that callers comparing plans
/// do not simulate them again.
struct judged {
  plan result;
  report verdict;
  /// The most any variant of its decisions that fits stalls the compute
  /// stream (plan_on_links' signal that Eq. 3 saw the swaps as cheaper
  /// than they are: issuing swap-ins due first can hide the stall at the
  /// price of memory held earlier, which a slower-link walk may not need).
  double stall_us = 0;
};

/// Algo 2 with the simulator's feedback (see the file comment); Algo 2
/// costs swaps on `assumed`, the simulator runs the plan on `dev`.
///
/// Where a round's plans do not fit, the next walks against a target
/// lowered first only at the steps where the memory-centric plan holds
/// more than the budget (in_use), by as much (lower_at_overflow):
/// Algo 2's count misses what is in flight there, and lowering it
/// everywhere adds evictions elsewhere. If that finds no plan that fits,
/// the target is lowered everywhere by the overflow, round after round,
/// as before. Measured on resnet101 on titan-rtx, every 20th batch from
/// 1,500 to 2,000 (docs/results.md, Fig. 14a): lowered everywhere only,
/// `tsplit` fit 22 of 26 batches with 77.0 % mean overhead; locally first,
/// 23 with 69.2 %; vgg16 at batch 668 went from 10.5 to 2.4 %.
///
/// Where a round's fastest plan fits but a variant of the same decisions
/// does not (swap-ins issued due first, whose LRU tries overflow too), the
/// local rounds go on, the target lowered where that variant overflows,
/// and the fastest plan that fits in any round is kept: under a lower
/// target such a variant fits, and it is often faster. On resnet101 at
/// batch 1,690 (guarded split walk) 54.7 → 43.8 % over the baseline;
/// every 6th batch from 1,500 to 2,006, `tsplit` is faster at 23 of the 80
/// batches that fit and slower at none. resnet152 at batch 256 and gpt2
/// (bench_tsplit) fit with every variant at the first round.
inline judged plan_with_feedback(const problem& p, const device_spec& dev, const device_spec& assumed, bytes_t budget,
                                 std::string_view name, walk_options options) {
  constexpr int rounds = 6;
  simulator sim;
  plan best;
  bytes_t best_peak = simulator::unlimited;
  std::string why;
  bytes_t first_overflow = 0;  // of the first round, which both ways of lowering start from
  std::optional<judged> fit;  // the fastest plan that fits so far
  // Lowers `target` where the last of a's variants that does not fit (but
  // runs without a budget) overflows; false if there is none, or the
  // target reaches 0.
  const auto lower_for_variant = [&](const attempt& a, std::vector<bytes_t>& target) {
    for (std::size_t k = a.plans.size(); k-- > 0;) {
      if (a.verdicts[k].feasible) continue;
      const held h = in_use(p, a.plans[k], dev, sim);
      if (h.most.empty()) continue;
      lower_at_overflow(target, h.most, budget, h.peak);
      return std::ranges::none_of(target, [](bytes_t t) { return t <= 0; });
    }
    return false;
  };
  for (const bool local : {true, false}) {
    if (!local && first_overflow == 0) break;  // the first round could not be lowered
    std::vector<bytes_t> target(p.num_steps(), budget - (local ? 0 : first_overflow));
    for (int round = local ? 0 : 1; round < rounds; ++round) {
      attempt a = plan_once(p, dev, assumed, name, budget, target, options, sim);
      std::size_t fastest = a.plans.size();  // the fastest that fits
      double stall = 0;
      for (std::size_t k = 0; k < a.plans.size(); ++k) {
        if (!a.verdicts[k].feasible) continue;
        stall = std::max(stall, a.verdicts[k].stall_us);
        if (fastest == a.plans.size() || a.verdicts[k].time_us < a.verdicts[fastest].time_us) fastest = k;
      }
      if (fastest != a.plans.size()) {
        a.plans[fastest].best_peak = a.verdicts[fastest].peak_bytes;
        const double most_stall = std::max(stall, fit ? fit->stall_us : 0.0);
        if (!fit || a.verdicts[fastest].time_us < fit->verdict.time_us) {
          fit = judged{std::move(a.plans[fastest]), std::move(a.verdicts[fastest]), most_stall};
        } else {
          fit->stall_us = most_stall;
        }
        if (!local || !lower_for_variant(a, target)) return std::move(*fit);
        continue;
      }
      if (fit) return std::move(*fit);
      const unbounded_need& need = a.need;
      const bool lower = a.stuck == no_index && need.feasible;  // else a lower target cannot help
      const std::vector<bytes_t> most =
          local && lower ? in_use(p, a.plans.front(), dev, sim).most : std::vector<bytes_t>{};
      if (need.feasible && need.peak_bytes < best_peak) {
        best_peak = need.peak_bytes;
        best = std::move(a.plans.front());
        why = a.stuck != no_index
                  ? concat("no option is left at op '", p.op_name[static_cast<std::size_t>(a.stuck)],
                           "' (step ", a.stuck, "), where ", format_bytes(a.stuck_memory), " stay on the device")
                  : a.verdicts.front().failure;
      }
      if (!lower) break;
      if (round == 0) first_overflow = std::max(need.peak_bytes - budget, budget / 64 + 1);
      lower_at_overflow(target, most, budget, need.peak_bytes);  // everywhere in the global rounds (`most` empty)
      if (std::ranges::any_of(target, [](bytes_t t) { return t <= 0; })) break;
    }
  }
  if (fit) return std::move(*fit);
  if (best.actions.empty()) {
    best = std::move(
        plan_once(p, dev, assumed, name, budget, std::vector<bytes_t>(p.num_steps(), budget), options, sim)
            .plans.front());
  }
  best.feasible = false;
  best.kind = failure_kind::out_of_memory;
  best.best_peak = best_peak;
  best.reason = concat(name, ": ", why, "; the smallest peak reached is ", best_peak, " bytes (",
                       format_bytes(best_peak), "), the budget ", budget, " bytes (", format_bytes(budget), ")");
  return {std::move(best), report{}};
}

/// The better of two plans (better_plan); `a` on a tie.
inline judged better(judged a, judged b) {
  return better_plan(b.result, b.verdict, a.result, a.verdict) ? std::move(b) : std::move(a);
}

/// Algo 2 with feedback, first without swapping parameters and optimizer
/// state, then, if that plan does not fit, with, and if that does not fit
/// either, with the state offloaded between iterations: Algo 2's memory
/// model is conservative (a step it cannot resolve may still fit in the
/// simulator), and swapping the state there only to satisfy the model
/// costs time (the DTR Transformer log at 90 %: 6.6 % overhead instead of
/// 0.3 %). `options.swap_state` and `options.offload_state` are ignored.
inline judged plan_state(const problem& p, const device_spec& dev, const device_spec& assumed, bytes_t budget,
                         std::string_view name, walk_options options) {
  options.swap_state = false;
  options.offload_state = false;
  judged best = plan_with_feedback(p, dev, assumed, budget, name, options);
  if (best.result.feasible) return best;
  options.swap_state = true;
  best = better(std::move(best), plan_with_feedback(p, dev, assumed, budget, name, options));
  if (best.result.feasible) return best;
  options.offload_state = true;
  return better(std::move(best), plan_with_feedback(p, dev, assumed, budget, name, options));
}

/// The share of the links' bandwidth Algo 2 is told it gets, tried in turn.
inline constexpr double link_shares[] = {1.0, 0.5, 0.25, 0.125};
/// `dev` with `share` of its d2h and h2d bandwidth.
[[nodiscard]] inline device_spec with_link_share(const device_spec& dev, double share) {
  device_spec assumed = dev;
  assumed.d2h.bandwidth_gb_s *= share;
  assumed.h2d.bandwidth_gb_s *= share;
  return assumed;
}
/// Stalls below this share of the iteration are not worth another run of
/// Algo 2 (on gpt2 with 96k ops at 80 %: 23 ms of 11.9 s; Algo 2 at the
/// lower shares took 4 s there instead of 0.2 s, its swap bounds pruning less).
inline constexpr double stall_worth_replanning = 0.01;

/// Algo 2 on the device as profiled, and, while the best plan so far
/// (or a variant of its decisions, judged::stall_us) stalls the compute
/// stream for more than 1 % of the iteration, again
/// with Eq. 2-3 costing swaps on links of a half, a quarter and an eighth
/// of the bandwidth; the fastest plan that fits is kept. Eq. 3 charges a swap only the transfer time its window's
/// idle link cannot hide, but a swap-out frees its memory only when the
/// copy ends, and allocations wait for it: on the DTR logs the plans
/// stalled 50-130 ms (InceptionV4 at 30 %: 122 ms, 19 % of the iteration)
/// where Eq. 3 saw the swaps as nearly free. Assuming slower links moves
/// Algo 2 towards recomputation until the stalls are gone (the DELTA
/// paper's link efficiency, §4.1, plays the same part).
inline judged plan_on_links(const problem& p, const device_spec& dev, bytes_t budget, std::string_view name,
                            walk_options options) {
  judged best = plan_state(p, dev, dev, budget, name, options);
  if (!best.result.feasible) return best;  // the fastest plan is sought among those that fit
  for (const double share : std::span(link_shares).subspan(1)) {
    if (best.stall_us <= stall_worth_replanning * best.verdict.time_us) break;
    best = better(std::move(best), plan_state(p, dev, with_link_share(dev, share), budget, name, options));
  }
  return best;
}

/// plan_on_links with each `walk_options::split` of `splits`, each without
/// and with `walk_options::guard_checkpoints`, the best plan kept, the
/// first of equals in that order (`tsplit`: with split, then without).
/// Algo 2 is greedy: a split taken early can leave a later bottleneck with
/// fewer options, or cost more time than the evictions it spared; Algo 2
/// line 15 compares the options per bottleneck, this also compares whole
/// plans. Neither guard setting is
/// better everywhere (measured with each alone, before swap-ins were issued
/// due first: guarded, the DTR logs at 30 % went from 1.255 to 1.222 on
/// ResNet-32 and from 1.307 to 1.171 on InceptionV4, and inception_v4 on
/// titan-rtx fit batch 1,330 instead of 1,279; unguarded, resnet50 fit
/// 1,783 instead of 1,633). The walks are independent and run on
/// `threads` threads (planner_options::threads; 0: every core): on this
/// machine's two cores, resnet152 at batch 256 plans in 33 ms instead of 52
/// (bench_tsplit).
inline judged plan_tsplit(const problem& p, const device_spec& dev, bytes_t budget, std::string_view name,
                          std::initializer_list<bool> splits, int threads) {
  std::vector<walk_options> walks;
  for (const bool split : splits) {
    for (const bool guard : {false, true}) walks.push_back({.split = split, .guard_checkpoints = guard});
  }
  std::vector<judged> plans(walks.size());
  parallel_for(thread_count(threads), walks.size(),
               [&](std::size_t, std::size_t k) { plans[k] = plan_on_links(p, dev, budget, name, walks[k]); });
  judged best = std::move(plans.front());
  for (std::size_t k = 1; k < plans.size(); ++k) best = better(std::move(best), std::move(plans[k]));
  return best;
}

}  // namespace detail::tsplit

/// TSPLIT w/o Split: Algo 2 over swap and recompute (Eq. 2-4).
struct tsplit_nosplit_planner {
  plan operator()(const problem& p, const device_spec& dev, bytes_t budget, const planner_options& options) const {
    MEMPLAN_EXPECTS(budget >= 0, invalid_argument, "tsplit-nosplit: the budget must be non-negative, got ", budget);
    return detail::tsplit::plan_tsplit(p, dev, budget, "tsplit-nosplit", {false}, options.threads).result;
  }
};
static_assert(planner<tsplit_nosplit_planner>);

/// TSPLIT: Algo 2 over swap, recompute and split (Eq. 2-6).
struct tsplit_planner {
  plan operator()(const problem& p, const device_spec& dev, bytes_t budget, const planner_options& options) const {
    MEMPLAN_EXPECTS(budget >= 0, invalid_argument, "tsplit: the budget must be non-negative, got ", budget);
    return detail::tsplit::plan_tsplit(p, dev, budget, "tsplit", {true, false}, options.threads).result;
  }
};
static_assert(planner<tsplit_planner>);

}  // namespace memplan
