#pragma once
/// \file
/// `tsplit` and `tsplit-nosplit`: TSPLIT (Nie et al., "TSPLIT: Fine-grained
/// GPU Memory Management for Efficient DNN Training via Tensor Splitting",
/// ICDE 2022), §IV-C Algo 2 over swap, recompute and split (Eq. 2-6), or
/// without split (Eq. 2-4, the paper's "TSPLIT w/o Split", Fig. 13);
/// the walk is tsplit/algo2.hpp, its action list (§V-A, §V-D) tsplit/emit.hpp.
///
/// The simulator judges every plan, and where it disagrees with Algo 2's
/// step-granular memory count, Algo 2 runs again (not in the paper, whose
/// planner is one-shot): against a target lowered where the plan
/// overflows (plan_with_feedback), on slower links where its swaps stall
/// the compute stream (plan_on_links), with and without guarded
/// checkpoints and split (plan_walks), and, on a graph that communicates,
/// with the paper's one-stream link model too. The fastest plan whose
/// memory layout fits the budget is kept (plan_tsplit).

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
  std::size_t could_stay = 0;  ///< state that `state_stays` keeps in host memory (emitter::could_stay)
};


/// The action list of Algo 2's decisions (tsplit/emit.hpp), in two passes:
/// the first finds the tensors that recomputations read after their last
/// use, the second frees those early.
inline emitted emit(const problem& p, const algo2& walk, std::string_view name, bytes_t budget,
                    std::span<const bytes_t> room, bool due_first, bool state_stays = false) {
  const std::vector<std::uint8_t> none(p.num_tensors(), 0);
  emitter first(p, walk.evictions(), walk.splits(), std::string(name), budget, none, room, due_first, state_stays);
  first.run();
  emitter second(p, walk.evictions(), walk.splits(), std::string(name), budget, first.read_dead(), room, due_first,
                 state_stays);
  second.run();
  const std::size_t kept_reads = second.kept_reads();
  const std::size_t issued_early = second.issued_early();
  const std::size_t could_stay = second.could_stay();
  return {std::move(second).finish(), kept_reads, issued_early, could_stay};
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
/// memory-centric plan. Empty when the plan is invalid. Simulated because
/// Algo 2's own count (M_i, per step) misses the copies in flight, and a
/// room taken from it can hold more than the device has.
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
/// keeping intermediates makes the plan faster than the memory-centric one
/// the room comes from, so its swaps arrive at other times; where the plan
/// overflows, the room shrinks there (lower_at_overflow) and the
/// intermediates are kept again, `lru_tries` times, and if that does not
/// fit, `lru_tries` - 1 times more with the room shrunk everywhere by the
/// overflow (each way fits plans the other does not). The room Algo 2's
/// model leaves is tried first, once, and the simulated one only where
/// that plan keeps intermediates and does not fit: neither room is better
/// everywhere, and where Algo 2's fits, the LRU improvement costs one
/// emission and one simulation.
inline constexpr int lru_tries = 3;

/// a's last plan, whose decisions swap state out after its last use with no
/// time left to bring it back before the end (emitter::stays_in_host): its
/// twin that keeps that state in host memory between iterations, swapped in
/// as the iteration starts, takes its place where both fit and it is
/// faster. Back after the last op the iteration waits for
/// the copy; swapped in at the start it overlaps the ops before its first
/// use but takes the h2d link from swap-ins Algo 2 planned there, so
/// neither is faster everywhere. The twin replaces rather than joins, and
/// only a plan that fits, so the feedback rounds see the same variants
/// and overflows.
inline void keep_in_host(const problem& p, const algo2& walk, std::string_view name, bytes_t budget, bool due_first,
                         const device_spec& dev, simulator& sim, attempt& a) {
  emitted twin = emit(p, walk, name, budget, {}, due_first, true);
  report r = sim.run(p, twin.result, dev, budget);
  if (!r.feasible || !a.verdicts.back().feasible || r.time_us >= a.verdicts.back().time_us) return;
  a.plans.back() = std::move(twin.result);
  a.verdicts.back() = std::move(r);
}

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
  // the first try's overflow, everywhere for `everywhere` more (lru_tries).
  // A plan that fits joins `a`. Returns whether the last try kept
  // intermediates and overflowed.
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
    if (e.could_stay > 0) keep_in_host(p, walk, name, budget, due_first, dev, sim, a);
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

/// Algo 2 with the simulator's feedback, round after round (at most
/// `max_rounds`); Algo 2 costs swaps on `assumed`, the simulator runs the
/// plans on `dev`. Holds the fastest plan that fits so far, and, while
/// none does, the plan of the smallest peak.
///
/// Local rounds: where a round's plans do not fit, the next walks against
/// a target lowered only at the steps where the memory-centric plan holds
/// more than the budget (in_use), by as much (lower_at_overflow): Algo 2's
/// count misses what is in flight there, and lowering it everywhere adds
/// evictions elsewhere. Where a round's fastest plan fits but a variant of
/// the same decisions does not (swap-ins issued due first, whose LRU tries
/// overflow too), the local rounds go on with the target lowered where
/// that variant overflows: under a lower target such a variant fits, and
/// it is often faster.
///
/// Global rounds, if the local ones find no plan that fits: the target is
/// lowered everywhere by the overflow, starting from the first round's.
class feedback_rounds {
 public:
  feedback_rounds(const problem& p, const device_spec& dev, const device_spec& assumed, bytes_t budget,
                  std::string_view name, walk_options options)
      : p_(&p), dev_(&dev), assumed_(&assumed), budget_(budget), name_(name), options_(options) {}

  /// The fastest plan that fits, else the plan of the smallest peak,
  /// infeasible, saying why.
  [[nodiscard]] judged run() {
    const std::size_t n = p_->num_steps();
    if (!rounds(std::vector<bytes_t>(n, budget_), true) && first_overflow_ != 0) {
      rounds(std::vector<bytes_t>(n, budget_ - first_overflow_), false);
    }
    return fit_ ? std::move(*fit_) : gave_up();
  }

 private:
  static constexpr int max_rounds = 6;
  /// What a round leaves the next to do.
  enum class next : std::uint8_t { again, stop, done };

  /// Local (`local`) or global rounds from `target`; the global ones count
  /// on from round 1. \returns whether the search is over.
  bool rounds(std::vector<bytes_t> target, bool local) {
    for (int round = local ? 0 : 1; round < max_rounds; ++round) {
      const next n = one_round(target, local, round == 0);
      if (n != next::again) return n == next::done;
    }
    return false;
  }

  /// Algo 2 against `target`; lowers it for the next round.
  next one_round(std::vector<bytes_t>& target, bool local, bool first) {
    attempt a = plan_once(*p_, *dev_, *assumed_, name_, budget_, target, options_, sim_);
    if (keep_fastest(a)) return local && lower_for_variant(a, target) ? next::again : next::done;
    if (fit_) return next::done;
    return lower_for_overflow(a, target, local, first);
  }

  /// Keeps a's fastest plan that fits where it is faster than the fit so
  /// far, and the most any plan that fits stalls (judged::stall_us).
  /// \returns whether one of a's plans fits.
  bool keep_fastest(attempt& a) {
    std::size_t fastest = a.plans.size();
    double stall = 0;
    for (std::size_t k = 0; k < a.plans.size(); ++k) {
      if (!a.verdicts[k].feasible) continue;
      stall = std::max(stall, a.verdicts[k].stall_us);
      if (fastest == a.plans.size() || a.verdicts[k].time_us < a.verdicts[fastest].time_us) fastest = k;
    }
    if (fastest == a.plans.size()) return false;
    a.plans[fastest].best_peak = a.verdicts[fastest].peak_bytes;
    const double most_stall = std::max(stall, fit_ ? fit_->stall_us : 0.0);
    if (!fit_ || a.verdicts[fastest].time_us < fit_->verdict.time_us) {
      fit_ = judged{std::move(a.plans[fastest]), std::move(a.verdicts[fastest]), most_stall};
    } else {
      fit_->stall_us = most_stall;
    }
    return true;
  }

  /// Lowers `target` where the last of a's variants that does not fit (but
  /// runs without a budget) overflows. \returns false if there is none, or
  /// the target reaches 0.
  bool lower_for_variant(const attempt& a, std::vector<bytes_t>& target) {
    for (std::size_t k = a.plans.size(); k-- > 0;) {
      if (a.verdicts[k].feasible) continue;
      const held h = in_use(*p_, a.plans[k], *dev_, sim_);
      if (h.most.empty()) continue;
      lower_at_overflow(target, h.most, budget_, h.peak);
      return std::ranges::none_of(target, [](bytes_t t) { return t <= 0; });
    }
    return false;
  }

  /// No plan fits yet: keeps a's memory-centric plan if its peak is the
  /// smallest so far, and lowers `target` by its overflow, where it
  /// overflows (`local`) or everywhere. Stops where a lower target cannot
  /// help (a step no option resolves, or a plan that cannot run) or the
  /// target reaches 0.
  next lower_for_overflow(attempt& a, std::vector<bytes_t>& target, bool local, bool first) {
    const unbounded_need& need = a.need;
    const bool lower = a.stuck == no_index && need.feasible;
    const std::vector<bytes_t> most =
        local && lower ? in_use(*p_, a.plans.front(), *dev_, sim_).most : std::vector<bytes_t>{};
    if (need.feasible && need.peak_bytes < best_peak_) keep_smallest(a);
    if (!lower) return next::stop;
    if (first) first_overflow_ = std::max(need.peak_bytes - budget_, budget_ / 64 + 1);
    lower_at_overflow(target, most, budget_, need.peak_bytes);  // everywhere where `most` is empty
    return std::ranges::any_of(target, [](bytes_t t) { return t <= 0; }) ? next::stop : next::again;
  }

  /// a's memory-centric plan becomes the smallest peak so far.
  void keep_smallest(attempt& a) {
    best_peak_ = a.need.peak_bytes;
    best_ = std::move(a.plans.front());
    why_ = a.stuck != no_index
               ? concat("no option is left at op '", p_->op_name[static_cast<std::size_t>(a.stuck)], "' (step ",
                        a.stuck, "), where ", format_bytes(a.stuck_memory), " stay on the device")
               : a.verdicts.front().failure;
  }

  /// The plan of the smallest peak (or the first round's), infeasible.
  judged gave_up() {
    if (best_.actions.empty()) {
      const std::vector<bytes_t> target(p_->num_steps(), budget_);
      best_ = std::move(plan_once(*p_, *dev_, *assumed_, name_, budget_, target, options_, sim_).plans.front());
    }
    best_.feasible = false;
    best_.kind = failure_kind::out_of_memory;
    best_.best_peak = best_peak_;
    best_.reason = concat(name_, ": ", why_, "; the smallest peak reached is ", best_peak_, " bytes (",
                          format_bytes(best_peak_), "), the budget ", budget_, " bytes (", format_bytes(budget_), ")");
    return {std::move(best_), report{}};
  }

  const problem* p_;
  const device_spec* dev_;
  const device_spec* assumed_;
  bytes_t budget_;
  std::string_view name_;
  walk_options options_;
  simulator sim_;
  std::optional<judged> fit_;                    ///< the fastest plan that fits so far
  plan best_;                                    ///< while none fits: the plan of the smallest peak
  bytes_t best_peak_ = simulator::unlimited;
  std::string why_;                              ///< why best_ does not fit
  bytes_t first_overflow_ = 0;                   ///< of the first round, where the global rounds start
};

/// Algo 2 with the simulator's feedback (feedback_rounds); Algo 2 costs
/// swaps on `assumed`, the simulator runs the plan on `dev`.
inline judged plan_with_feedback(const problem& p, const device_spec& dev, const device_spec& assumed, bytes_t budget,
                                 std::string_view name, walk_options options) {
  return feedback_rounds(p, dev, assumed, budget, name, options).run();
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
/// costs time. `options.swap_state` and `options.offload_state` are ignored.
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
/// Algo 2 (at the lower shares its swap bounds prune less, and a walk on a
/// large graph takes many times longer).
inline constexpr double stall_worth_replanning = 0.01;

/// Algo 2 on the device as profiled, and, while the best plan so far
/// (or a variant of its decisions, judged::stall_us) stalls the compute
/// stream for more than 1 % of the iteration, again with Eq. 2-3 costing
/// swaps on links of a half, a quarter and an eighth of the bandwidth; the
/// fastest plan that fits is kept. Eq. 3 charges a swap only the transfer
/// time its window's idle link cannot hide, but a swap-out frees its
/// memory only when the copy ends, and allocations wait for it, so plans
/// whose swaps Eq. 3 sees as nearly free can stall. Assuming slower links
/// moves Algo 2 towards recomputation until the stalls are gone (DELTA's
/// link efficiency, §4.1, plays the same part).
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

/// Algo 2's walks for tsplit (`splits`: with split, without, or both, in
/// that order), each without and with `walk_options::guard_checkpoints`;
/// on a graph that communicates, each also with Eq. 3's occupancy as the
/// paper models it, collectives aside (`walk_options::collectives_on_link`):
/// a link Algo 2 sees busier can lead it to a slower plan.
[[nodiscard]] inline std::vector<walk_options> walks_of(const problem& p, std::initializer_list<bool> splits) {
  std::vector<walk_options> walks;
  for (const bool split : splits) {
    for (const bool guard : {false, true}) {
      for (const bool seen : {true, false}) {
        if (!seen && p.comm.empty()) continue;
        walks.push_back({.split = split, .guard_checkpoints = guard, .collectives_on_link = seen});
      }
    }
  }
  return walks;
}

/// plan_on_links with each of `walks`, the best plan kept, the first of
/// equals in their order. Algo 2 is greedy: a split taken early can leave
/// a later bottleneck with fewer options, or cost more time than the
/// evictions it spared; Algo 2 line 15 compares the options per
/// bottleneck, this also compares whole plans; neither guard setting is
/// better everywhere. The walks are independent and run on `threads`
/// threads (planner_options::threads; 0: every core).
inline judged plan_walks(const problem& p, const device_spec& dev, bytes_t budget, std::string_view name,
                         const std::vector<walk_options>& walks, int threads) {
  std::vector<judged> plans(walks.size());
  parallel_for(thread_count(threads), walks.size(),
               [&](std::size_t, std::size_t k) { plans[k] = plan_on_links(p, dev, budget, name, walks[k]); });
  judged best = std::move(plans.front());
  for (std::size_t k = 1; k < plans.size(); ++k) best = better(std::move(best), std::move(plans[k]));
  return best;
}

/// tsplit's plan with its memory layout (DESIGN.md §6: the budget is the
/// arena): plan_walks under with_layout. The fastest plan's layout can
/// need more than its live peak (a split's micro-tensors leave gaps) at
/// every tighter target; then each walk is laid out on its own and the
/// fastest plan that fits is kept.
inline plan plan_tsplit(const problem& p, const device_spec& dev, bytes_t budget, std::string_view name,
                        std::initializer_list<bool> splits, int threads) {
  const std::vector<walk_options> walks = walks_of(p, splits);
  plan pl = with_layout([&](bytes_t target) { return plan_walks(p, dev, target, name, walks, threads).result; }, p,
                        dev, budget);
  if (pl.feasible || pl.arena_bytes <= budget) return pl;  // fits, or Algo 2 found no plan
  std::vector<plan> plans(walks.size());
  std::vector<report> verdicts(walks.size());
  parallel_for(thread_count(threads), walks.size(), [&](std::size_t, std::size_t k) {
    const std::vector<walk_options> one{walks[k]};
    plans[k] =
        with_layout([&](bytes_t target) { return plan_walks(p, dev, target, name, one, 1).result; }, p, dev, budget);
    if (plans[k].feasible) verdicts[k] = simulator{}.run(p, plans[k], dev, budget);
  });
  std::size_t best = 0;
  for (std::size_t k = 1; k < plans.size(); ++k) {
    if (better_plan(plans[k], verdicts[k], plans[best], verdicts[best])) best = k;
  }
  return plans[best].feasible ? std::move(plans[best]) : pl;
}

}  // namespace detail::tsplit

/// TSPLIT w/o Split: Algo 2 over swap and recompute (Eq. 2-4).
struct tsplit_nosplit_planner {
  static constexpr bool lays_out = true;  ///< each walk's plan laid out (plan_tsplit)

  /// Plans `p` on `dev` within `budget`, on `options.threads` threads.
  /// \throws invalid_argument if `budget` is negative.
  plan operator()(const problem& p, const device_spec& dev, bytes_t budget, const planner_options& options) const {
    MEMPLAN_EXPECTS(budget >= 0, invalid_argument, "tsplit-nosplit: the budget must be non-negative, got ", budget);
    return detail::tsplit::plan_tsplit(p, dev, budget, "tsplit-nosplit", {false}, options.threads);
  }
};
static_assert(planner<tsplit_nosplit_planner>);

/// TSPLIT: Algo 2 over swap, recompute and split (Eq. 2-6).
struct tsplit_planner {
  static constexpr bool lays_out = true;  ///< each walk's plan laid out (plan_tsplit)

  /// Plans `p` on `dev` within `budget`, on `options.threads` threads.
  /// \throws invalid_argument if `budget` is negative.
  plan operator()(const problem& p, const device_spec& dev, bytes_t budget, const planner_options& options) const {
    MEMPLAN_EXPECTS(budget >= 0, invalid_argument, "tsplit: the budget must be non-negative, got ", budget);
    return detail::tsplit::plan_tsplit(p, dev, budget, "tsplit", {true, false}, options.threads);
  }
};
static_assert(planner<tsplit_planner>);

}  // namespace memplan
