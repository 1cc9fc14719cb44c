#pragma once
/// \file
/// The simulator: the single judge of what a plan costs (DESIGN.md §5),
/// implementing exactly the action-list semantics of plan.hpp.
///
/// Two passes over flat arrays:
/// 1. `resolve`, in list (issue) order, by the plan walk (plan_walk.hpp,
///    shared with the layout and plan_builder): which device copy of a
///    tensor each action reads, makes or releases, what it allocates, and how many
///    actions hold each copy. Plan errors that do not depend on timing
///    (reading a tensor that is not on the device, a double release, ...)
///    are found here, and so is a use of a copy that the plan's stream order
///    and waits do not guarantee to come after the action it needs (a
///    happens-before check with a vector clock per action): a timing that
///    happens to cover it is a race on a device.
/// 2. `execute`, a discrete-event run of the four streams. A copy is freed
///    when the last of its holders to end ends; that holder carries the free.
///    At each instant, frees due are applied first, then the lowest-indexed
///    action that can start does; this repeats until nothing can start, and
///    time advances to the next end.
///
/// Where collectives share the host link with swaps
/// (`device_spec::collectives_share_host_link`), the link serves them in
/// issue order: a communication action starts after the swaps issued before
/// it have ended, a swap after the communication actions issued before it.
/// This orders time only, never data (the plan's waits must).
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
#include <array>
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
#include "memplan/plan_layout.hpp"
#include "memplan/plan_walk.hpp"
#include "memplan/problem.hpp"
#include "memplan/sim/report.hpp"

namespace memplan {

/// What the simulator records besides the summary numbers. Both are off by
/// default: planners call the simulator in their inner loops.
struct simulate_options {
  bool record_timeline = false;  ///< fill `report::timeline`
  bool record_memory = false;    ///< fill `report::memory_curve`
  /// Say in `report::failure` why a plan runs out of memory (the kind is
  /// set either way). A search that ranks thousands of plans by their
  /// numbers turns it off: the message costs more than the run.
  bool describe_failure = true;
  /// Fill `report::baseline_peak_bytes` and `baseline_time_us` (and so
  /// `overhead`), which depend on the problem alone: recounting them costs
  /// a search that ranks plans by their time and peak a twentieth of each
  /// run. Off: both are 0, and so is `overhead`.
  bool baselines = true;
};

/// What a plan needs with no budget: the verdict of
/// `simulator::run(p, pl, dev, simulator::unlimited)` in brief.
struct unbounded_need {
  bool feasible = false;  ///< the plan is valid and runs
  bytes_t peak_bytes = 0;  ///< the device memory it takes (report::peak_bytes)
  double time_us = 0;      ///< its iteration time, µs (report::time_us)
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
  report run(const problem& p, const plan& pl, const device_spec& dev, bytes_t budget, unbounded_need& need,
             const simulate_options& opts = {}) {
    return run(p, pl, dev, budget, opts, &need);
  }

 private:
  static constexpr double never = std::numeric_limits<double>::infinity();
  /// `copy_info::release_by` of a persistent tensor's last copy, which stays.
  static constexpr index_t kept = -2;
  /// The host copy of offloaded state, there from the start (swap_outs name the others).
  static constexpr index_t from_start = -3;
  /// A vector clock (happens-before): per stream, the latest action of it
  /// that has surely ended at some point. Four indices, one SIMD register.
  struct alignas(16) clock : std::array<index_t, stream_count> {};

  report run(const problem& p, const plan& pl, const device_spec& dev, bytes_t budget, const simulate_options& opts,
             unbounded_need* need) {
    MEMPLAN_EXPECTS(budget >= 0, invalid_argument, "simulate: the budget must be non-negative, got ", budget);
    report r;
    r.planner = pl.planner;
    r.budget_bytes = budget;
    if (opts.baselines) {
      r.baseline_peak_bytes = p.baseline_peak(baseline_);
      r.baseline_time_us = p.baseline_time_us();
    }
    bool needs_rerun = false;  // for `need`: pass 1 must run again, without a budget
    if (need != nullptr) *need = {};
    if (!(pl.allocator_us >= 0 && pl.allocator_us < never)) {
      fail(detail::concat("allocator_us must be a finite number >= 0, got ", pl.allocator_us), r);
    } else if (resolve(p, pl, dev, r)) {
      const bool unbounded = run_unbounded(pl, need != nullptr ? unlimited : budget, opts, r);
      if (unbounded && need != nullptr) *need = {true, r.peak_bytes, r.time_us};
      timed_ = !unbounded || r.peak_bytes > budget;
      if (timed_) {
        r.memory_curve.clear();
        execute(p, pl, budget, opts, r);
        needs_rerun = need != nullptr && !unbounded && r.kind != failure_kind::none;
      }
      // plan.hpp: the allocator's driver calls block the host.
      r.allocator_us = pl.allocator_us;
      r.time_us += pl.allocator_us;
      r.stall_us += pl.allocator_us;
      if (opts.record_timeline) {
        record_start_order();
        for (std::size_t i = 0; i < pl.actions.size(); ++i) {
          if (end_[i] != never) {
            r.timeline.push_back({static_cast<index_t>(i), info_[i].stream, start_[i], end_[i], order_[i]});
          }
        }
      }
    }
    r.peak_live_bytes = r.peak_bytes;
    if (r.kind == failure_kind::none && !pl.offsets.empty()) judge_layout(p, pl, dev, budget, opts, r);
    r.feasible = r.kind == failure_kind::none;
    r.overhead = !r.feasible ? std::numeric_limits<double>::quiet_NaN()
                 : r.baseline_time_us > 0 ? r.time_us / r.baseline_time_us - 1
                                          : 0;
    if (needs_rerun) {
      const report free_run =
          run(p, pl, dev, unlimited, {.describe_failure = opts.describe_failure, .baselines = opts.baselines},
              nullptr);
      *need = {free_run.feasible, free_run.peak_bytes, free_run.time_us};
    }
    return r;
  }

  /// A plan with a layout (plan_layout.hpp): its offsets must hold its
  /// allocations apart in the timeline just run, and its arena is the peak
  /// and must fit the budget.
  void judge_layout(const problem& p, const plan& pl, const device_spec& dev, bytes_t budget,
                    const simulate_options& opts, report& r) {
    record_start_order();
    const runtime::layout l = runtime::layout_of(p, pl);
    const allocation_lifetimes a = lifetimes_of(l, start_, end_, order_);
    if (const std::string why = layout_conflict(p, pl, l, a, pl.offsets, dev.alignment); !why.empty()) {
      fail("layout: " + why, r);
      return;
    }
    r.arena_bytes = arena_extent(a, pl.offsets, dev.alignment);
    r.peak_bytes = r.arena_bytes;
    if (r.arena_bytes <= budget) return;
    r.kind = failure_kind::out_of_memory;
    if (!opts.describe_failure) return;
    // Bytes as well: an arena a few hundred bytes over formats like the budget.
    r.failure = detail::concat("out of memory: the layout's arena needs ", format_bytes(r.arena_bytes), " (",
                               r.arena_bytes, " B, ", r.arena_bytes - budget, " B over the budget of ", budget,
                               " B; peak of live bytes ", format_bytes(r.peak_live_bytes), ")");
  }

  /// `order_`: the timed pass records the order it starts actions in; where
  /// memory never binds they start in the order of (start time, issue index).
  void record_start_order() {
    if (timed_) return;
    const std::size_t n = start_.size();
    std::vector<index_t> by_start(n);
    for (std::size_t i = 0; i < n; ++i) by_start[i] = static_cast<index_t>(i);
    std::ranges::stable_sort(by_start, [&](index_t x, index_t y) {
      return start_[static_cast<std::size_t>(x)] < start_[static_cast<std::size_t>(y)];
    });
    order_.resize(n);
    for (std::size_t k = 0; k < n; ++k) order_[static_cast<std::size_t>(by_start[k])] = static_cast<index_t>(k);
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

  bool fail(std::string why, report& r) {
    r.kind = failure_kind::invalid_plan;
    r.failure = "invalid plan: " + std::move(why);
    return false;
  }

  /// Happens-before (plan.hpp: only stream order and waits order actions
  /// on different streams): per stream, the latest action of that stream
  /// guaranteed to have ended before action `a` starts — what has ended
  /// once its stream's previous action and its waits have. The clocks of
  /// the actions before `a` are filled in issue order on the first call
  /// that needs them: most plans order every use by its stream or a wait
  /// of its own (`resolver::ordered`), and need none.
  [[nodiscard]] clock clock_before(const plan& pl, index_t a) {
    for (; clocks_done_ < static_cast<std::size_t>(a); ++clocks_done_) {
      const std::size_t b = clocks_done_;
      clock c = joined(pl, static_cast<index_t>(b));
      // Once b ends, so has b itself on its stream (later than every entry).
      index_t& own = c[static_cast<std::size_t>(info_[b].stream)];
      own = std::max(own, static_cast<index_t>(b));
      clocks_[b] = c;
    }
    return joined(pl, a);
  }
  /// The clocks of action b's stream predecessor and waits, joined.
  [[nodiscard]] clock joined(const plan& pl, index_t b) const {
    clock c{{no_index, no_index, no_index, no_index}};
    const auto join = [&](index_t e) {
      const clock& ended = clocks_[static_cast<std::size_t>(e)];
      for (std::size_t k = 0; k < stream_count; ++k) c[k] = std::max(c[k], ended[k]);
    };
    if (const index_t before = stream_before_[static_cast<std::size_t>(b)]; before != no_index) join(before);
    for (const index_t w : pl.waits_of(static_cast<std::size_t>(b))) join(w);
    return c;
  }

  /// A new copy. `copies_` and `touches_` grow by index, not push_back:
  /// only their two writers (this and `resolver::touch`) check the room.
  [[gnu::always_inline]] index_t new_copy(index_t t, bytes_t b, index_t creator) {
    if (copy_count_ == copy_room_) grow_copies();
    copy_info& c = copies_[copy_count_];
    c.bytes = b;
    c.release_us = 0;
    c.release_by = no_index;
    c.creator = creator;
    c.tensor = t;
    c.pending = 0;
    if (splits_in_place_) holders_[copy_count_] = no_stream_actions;
    return static_cast<index_t>(copy_count_++);
  }
  void grow_copies() {
    copies_.resize(std::max<std::size_t>(64, 2 * copies_.size()));
    if (splits_in_place_) holders_.resize(copies_.size());
    copy_room_ = copies_.size();
  }
  void grow_touches() {
    touches_.resize(std::max<std::size_t>(64, 2 * touches_.size()));
    touch_room_ = touches_.size();
  }
  /// Pass 1, in issue order: the plan walk (plan_walk.hpp) says which copy
  /// each action reads, makes or releases; `resolver` records the copies'
  /// holders and the times if memory never binds (see `run_unbounded`):
  /// each action starts once its stream and its waits are done.
  bool resolve(const problem& p, const plan& pl, const device_spec& dev, report& r) {
    const std::size_t n = pl.actions.size();
    info_.resize(n + 1);
    start_.resize(n);
    end_.resize(n);
    touch_count_ = 0;
    copy_count_ = 0;
    // Only a release of a micro-tensor splits a whole copy in place, and
    // only such a split reads the copies' holders (resolver::split).
    splits_in_place_ = std::ranges::any_of(pl.actions, [](const action& x) {
      return x.part != no_index && (x.kind == action_kind::swap_out || x.kind == action_kind::free);
    });
    if (splits_in_place_) holders_.resize(copies_.size());
    for (index_t& first : first_) first = static_cast<index_t>(n);
    initial_bytes_ = 0;
    unbounded_ = true;
    compute_busy_us_ = 0;
    clocks_.resize(n);
    stream_before_.resize(n);
    clocks_done_ = 0;
    link_shared_ = dev.collectives_share_host_link;
    if (link_shared_) link_after_.resize(n);
    resolver v{*this, p, pl, dev, r};
    const bool walked = walk_.run(p, pl, v);
    if (!v.unordered.empty()) return fail(std::move(v.unordered), r);  // at an action before any the walk rejects
    if (!walked) return fail(walk_.why(), r);
    info_[n].touch_begin = static_cast<index_t>(touch_count_);
    unbounded_time_us_ = *std::ranges::max_element(v.stream_end);
    // The copies still on the device at the end die once their last holder
    // ends, unless the tensor persists across iterations (DESIGN.md §4).
    for (std::size_t t = 0; t < p.num_tensors(); ++t) {
      const index_t c = walk_.device_copy(static_cast<index_t>(t));
      if (c == no_index || !p.persistent(static_cast<index_t>(t))) continue;
      copy_info& last_copy = copies_[static_cast<std::size_t>(c)];
      ++last_copy.pending;
      last_copy.release_by = kept;
    }
    return true;
  }

  /// The plan walk's visitor for pass 1: copies and their holders (`touch`),
  /// and per action what `execute` needs (`action_info`) and its times in
  /// issue order. Host copies are named by their swap_out (`from_start`:
  /// offloaded state's, there at time 0).
  struct resolver {
    simulator& s;
    const problem& p;
    const plan& pl;
    const device_spec& dev;
    report& r;
    std::array<double, stream_count> stream_end{};
    std::array<index_t, stream_count> last = no_stream_actions;
    // The action being read.
    index_t a = 0;
    double start = 0;
    double duration = 0;
    double end_us = 0;  ///< start + duration
    bytes_t alloc = 0;
    bytes_t workspace_bytes = 0;
    index_t source = no_index;
    index_t splits = no_index;
    index_t split_creator = no_index;
    index_t touch_begin = 0;
    stream_kind stream = stream_kind::compute;
    clock seen{};             ///< the clock of the action being read, once `ordered` needed it
    bool seen_known = false;
    std::string unordered{};  ///< the first use not guaranteed to come after what it needs

    index_t initial_copy(index_t t) {
      const bytes_t b = p.bytes[static_cast<std::size_t>(t)];
      s.initial_bytes_ += b;
      return s.new_copy(t, b, no_index);
    }
    index_t initial_host(index_t t) {
      r.offloaded_state_bytes += p.bytes[static_cast<std::size_t>(t)];
      return from_start;
    }
    void begin(index_t action_index) {
      a = action_index;
      touch_begin = static_cast<index_t>(s.touch_count_);
      alloc = 0;
      workspace_bytes = 0;
      source = no_index;
      splits = no_index;
      const action& act = pl.actions[static_cast<std::size_t>(a)];
      stream = stream_of(p, act);
      duration = op_time(act);
      start = stream_end[static_cast<std::size_t>(stream)];
      for (const index_t w : pl.waits_of(static_cast<std::size_t>(a))) {
        start = std::max(start, s.end_[static_cast<std::size_t>(w)]);
      }
      if (s.link_shared_) share_link();
      s.stream_before_[static_cast<std::size_t>(a)] = last[static_cast<std::size_t>(stream)];
      seen_known = false;
      end_us = start + duration;
    }
    /// The host link serves swaps and communication in issue order (the file
    /// comment): the action being read starts after the latest ones of the
    /// other kind. Time only: no happens-before.
    void share_link() {
      auto& after = s.link_after_[static_cast<std::size_t>(a)];
      after = {no_index, no_index};
      if (stream == stream_kind::comm) {
        after = {last[static_cast<std::size_t>(stream_kind::d2h)], last[static_cast<std::size_t>(stream_kind::h2d)]};
      } else if (stream != stream_kind::compute) {
        after[0] = last[static_cast<std::size_t>(stream_kind::comm)];
      }
      for (const index_t w : after) {
        if (w != no_index) start = std::max(start, s.end_[static_cast<std::size_t>(w)]);
      }
    }
    /// The action being read holds copy c; `reads`: the copy's maker or
    /// latest writer so far (in issue order) must have ended first. A copy
    /// is released by its holder that ends last (the latest in issue order
    /// on a tie).
    [[gnu::always_inline]] void touch(index_t c, bool reads) {
      copy_info& info = s.copies_[static_cast<std::size_t>(c)];
      const index_t after = reads ? info.creator : no_index;
      if (s.touch_count_ == s.touch_room_) s.grow_touches();
      s.touches_[s.touch_count_++] = {c, after};
      ++info.pending;
      // Reading a copy before its maker ends is invalid; `execute` finds and
      // reports it at the time it happens. What the action needs must be
      // ordered before it, or it is a race.
      if (after != no_index && after != a) {
        if (s.end_[static_cast<std::size_t>(after)] > start) s.unbounded_ = false;
        if (!ordered(after)) unordered_use(after, "needs", info.tensor);
      }
      if (end_us >= info.release_us) {
        info.release_us = end_us;
        info.release_by = a;
      }
    }
    /// Action m (issued earlier) is guaranteed to have ended before the
    /// action being read starts: it is on the same stream, or waited for,
    /// or ordered through others (plan.hpp), which the vector clocks say.
    [[nodiscard]] [[gnu::always_inline]] bool ordered(index_t m) {
      const stream_kind on = s.info_[static_cast<std::size_t>(m)].stream;
      if (on == stream) return true;
      for (const index_t w : pl.waits_of(static_cast<std::size_t>(a))) {
        if (w == m) return true;
      }
      if (!seen_known) {
        seen = s.clock_before(pl, a);
        seen_known = true;
      }
      return seen[static_cast<std::size_t>(on)] >= m;
    }
    /// Records the first action that may start before `m`, which it needs
    /// (a timing that happens to cover it is a race on a device).
    [[gnu::cold]] [[gnu::noinline]] void unordered_use(index_t m, std::string_view what, index_t tensor) {
      if (!unordered.empty()) return;
      unordered = detail::concat(plan_walk::describe(p, pl, a), " ", what, " tensor '",
                                 p.tensor_name[static_cast<std::size_t>(tensor)], "' ",
                                 what == "splits" ? "in place while " : "from ", plan_walk::describe(p, pl, m),
                                 what == "splits" ? " holds it" : "",
                                 ", but no wait or stream order makes it start after that ends: a wait is missing");
    }
    void begin_access(index_t, bytes_t, bytes_t, bool) {}
    [[gnu::always_inline]] void read(index_t c, bytes_t, bytes_t) {
      touch(c, true);
    }
    void write(index_t c, bytes_t, bytes_t) {
      read(c, 0, 0);
      s.copies_[static_cast<std::size_t>(c)].creator = a;  // a later reader (a swap-out) waits for this write
    }
    [[gnu::always_inline]] index_t make(index_t t, bytes_t b, index_t, index_t) {
      const index_t c = s.new_copy(t, b, a);
      touch(c, false);
      alloc += b;
      return c;
    }
    void update(index_t c) {  // it writes c in place: a later swap_out must come after it
      s.copies_[static_cast<std::size_t>(c)].creator = a;
    }
    void workspace(bytes_t b) {
      workspace_bytes = b;
      alloc += b;
    }
    index_t swap_in(index_t t, bytes_t b, index_t host, bytes_t) {
      source = host == from_start ? no_index : host;
      r.swapped_in_bytes += b;
      return make(t, b, 1, no_index);
    }
    void split(index_t whole) {
      for (const index_t h : s.holders_[static_cast<std::size_t>(whole)]) {
        if (h != no_index && !ordered(h)) {
          unordered_use(h, "splits", s.copies_[static_cast<std::size_t>(whole)].tensor);
        }
      }
      copy_info& w = s.copies_[static_cast<std::size_t>(whole)];
      if (w.release_us > start) s.unbounded_ = false;  // an earlier holder may still run when it starts
      touch(whole, false);
      w.bytes = 0;
      split_creator = w.creator;
      splits = whole;
    }
    index_t split_part(index_t, index_t t, bytes_t, bytes_t b, index_t, index_t part) {
      const index_t m = s.new_copy(t, b, split_creator);
      if (part != pl.actions[static_cast<std::size_t>(a)].part) touch(m, false);  // the released one: `release`
      return m;
    }
    void release(index_t c, bool saves) {
      touch(c, saves);  // a swap-out's copy must end; a free must have been reached on its stream
    }
    index_t save(index_t, bytes_t b, index_t, index_t) {
      r.swapped_out_bytes += b;
      return a;
    }
    void end(index_t) {
      const action& act = pl.actions[static_cast<std::size_t>(a)];
      if (act.kind == action_kind::compute || act.kind == action_kind::recompute) count_op(act);
      const auto n = static_cast<index_t>(pl.actions.size());
      s.info_[static_cast<std::size_t>(a)] = {duration, alloc,  workspace_bytes, workspace_bytes, source,
                                              touch_begin, n, splits, stream};
      const double end = end_us;
      // A swap-in reads the host copy its swap-out wrote (as `touch`).
      if (source != no_index && s.end_[static_cast<std::size_t>(source)] > start) s.unbounded_ = false;
      if (source != no_index && !ordered(source)) unordered_use(source, "copies back", act.tensor);
      if (s.splits_in_place_) {  // a holds these copies now (resolver::split)
        for (std::size_t k = static_cast<std::size_t>(touch_begin); k < s.touch_count_; ++k) {
          s.holders_[static_cast<std::size_t>(s.touches_[k].copy)][static_cast<std::size_t>(stream)] = a;
        }
      }
      s.start_[static_cast<std::size_t>(a)] = start;
      s.end_[static_cast<std::size_t>(a)] = end;
      stream_end[static_cast<std::size_t>(stream)] = end;
      if (stream == stream_kind::compute) s.compute_busy_us_ += duration;
      index_t& before = last[static_cast<std::size_t>(stream)];
      (before == no_index ? s.first_[static_cast<std::size_t>(stream)] : s.info_[static_cast<std::size_t>(before)].next) = a;
      before = a;
    }
    /// How long `act` runs: an op, the split cost model's time for its
    /// parts, one part's share for a micro-op (TSPLIT Eq. 6); a swap, its
    /// bytes over the link; 0 for a free or an action the walk rejects.
    [[nodiscard]] double op_time(const action& act) const {
      const bool micro = act.part != no_index;
      if (act.parts < 1 || (micro && (act.part < 0 || act.part >= act.parts))) return 0;
      if (act.kind == action_kind::compute || act.kind == action_kind::recompute) {
        if (act.step < 0 || static_cast<std::size_t>(act.step) >= p.num_steps()) return 0;
        return split_time_us(dev, p.time_us[static_cast<std::size_t>(act.step)], act.parts) / (micro ? act.parts : 1);
      }
      if (act.kind == action_kind::free || act.tensor < 0 || static_cast<std::size_t>(act.tensor) >= p.num_tensors()) {
        return 0;
      }
      const bytes_t whole = p.bytes[static_cast<std::size_t>(act.tensor)];
      const bytes_t b = micro ? micro_bytes(whole, act.parts, act.part) : whole;
      return (act.kind == action_kind::swap_in ? dev.h2d : dev.d2h).transfer_us(b);
    }
    void count_op(const action& act) {
      if (act.kind == action_kind::recompute) {
        ++r.recomputed_ops;
        r.recompute_us += duration;
      }
      if (act.parts > 1 && act.part <= 0) ++r.split_ops;
    }
  };

  /// Pass 2, the common case: memory never binds. Then every action starts
  /// as soon as its stream and its waits allow — the times `resolve` found
  /// in issue order — and a merge of the four streams' allocations and
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
    // A stream's next event that changes the level: its actions' events
    // that change nothing (a free's allocation, a swap-out's, ...) are
    // skipped, which leaves the order of the others as it was.
    const auto next_event = [&](std::size_t s) {
      for (;;) {
        const std::size_t a = at[s];
        if (a >= n) {
          time[s] = never;
          rank[s] = 0;
          return;
        }
        const action_info& info = info_[a];
        if (!allocated[s]) {
          if (info.alloc != 0) {
            time[s] = start_[a];
            rank[s] = static_cast<double>(a);
            return;
          }
          allocated[s] = true;
        }
        if (info.frees != 0) {
          time[s] = end_[a];
          rank[s] = start_[a] == end_[a] ? static_cast<double>(a) + 0.5 : -1.0;
          return;
        }
        allocated[s] = false;
        at[s] = static_cast<std::size_t>(info.next);
      }
    };
    // The streams with events left, in stream order (most plans use two or
    // three of the four): the lowest (time, rank) wins, the first on a tie.
    std::size_t active[stream_count];
    std::size_t live = 0;
    for (std::size_t s = 0; s < stream_count; ++s) {
      at[s] = static_cast<std::size_t>(first_[s]);
      next_event(s);
      if (time[s] != never) active[live++] = s;
    }
    while (live > 0) {
      std::size_t k_best = 0;
      for (std::size_t k = 1; k < live; ++k) {
        const std::size_t s = active[k];
        const std::size_t b = active[k_best];
        if (time[s] < time[b] || (time[s] == time[b] && rank[s] < rank[b])) k_best = k;
      }
      const std::size_t best = active[k_best];
      const double now = time[best];
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
      if (time[best] == never) {
        std::copy(active + k_best + 1, active + live, active + k_best);
        --live;
      }
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
    timed_run run{*this, p, pl, budget, opts, r};
    if (!run.load()) return;
    for (;;) {
      const std::size_t chosen = run.choose();
      if (chosen != run.n) {
        if (!run.start(chosen)) return run.finish();
        continue;
      }
      if (!run.wait_for_next_end()) break;
    }
    // Every started action has ended by `now`; the ones never started hold
    // workspace in `frees` too, which must not count.
    run.apply_frees(run.now);
    run.finish();
    if (run.started != run.n) run.out_of_memory();
  }

  /// Pass 2's state: per stream, its next action to start, its first action
  /// whose frees are not applied and until when it is busy; the clock and
  /// the memory in use.
  struct timed_run {
    simulator& s;
    const problem& p;
    const plan& pl;
    bytes_t budget;
    const simulate_options& opts;
    report& r;
    std::size_t n = pl.actions.size();
    std::size_t head[stream_count] = {};
    std::size_t drained[stream_count] = {};
    double busy_until[stream_count] = {};
    double compute_busy = 0;
    double now = 0;
    bytes_t in_use = 0;
    std::size_t started = 0;
    index_t blocked = no_index;  ///< the earliest-issued action waiting for memory

    void record(double t) {
      if (opts.record_memory) r.memory_curve.push_back({t, in_use});
    }
    /// Time 0: the tensors without a producer; those nobody holds (unused
    /// inputs) are released at once. \returns false if they do not fit.
    bool load() {
      s.end_.assign(n, never);
      s.start_.resize(n);
      s.order_.assign(n, static_cast<index_t>(n));
      for (std::size_t i = 0; i < n; ++i) s.info_[i].frees = s.info_[i].workspace;
      for (copy_info& c : std::span(s.copies_).first(s.copy_count_)) {
        c.release_us = 0;
        c.release_by = no_index;
      }
      for (std::size_t k = 0; k < stream_count; ++k) head[k] = drained[k] = static_cast<std::size_t>(s.first_[k]);
      in_use = s.initial_bytes_;
      r.peak_bytes = in_use;
      record(0);
      if (in_use > budget) {
        r.kind = failure_kind::out_of_memory;
        if (!opts.describe_failure) return false;
        r.failure = detail::concat("out of memory at time 0: the tensors without a producer need ",
                                   format_bytes(in_use), ", budget ", format_bytes(budget));
        return false;
      }
      for (const copy_info& c : std::span(s.copies_).first(s.copy_count_)) {
        if (c.pending == 0 && c.bytes > 0) {
          in_use -= c.bytes;
          record(0);
        }
      }
      return true;
    }
    /// Applies the frees of the actions that ended by `until`, earliest first.
    void apply_frees(double until) {
      for (;;) {
        std::size_t k_min = stream_count;
        double t_min = until;
        for (std::size_t k = 0; k < stream_count; ++k) {
          if (drained[k] < n && s.end_[drained[k]] <= t_min) {
            k_min = k;
            t_min = s.end_[drained[k]];
          }
        }
        if (k_min == stream_count) return;
        const action_info& info = s.info_[drained[k_min]];
        drained[k_min] = static_cast<std::size_t>(info.next);
        if (info.frees == 0) continue;
        in_use -= info.frees;
        record(t_min);
      }
    }
    /// The action to start now: of the idle streams' heads, the lowest
    /// issue index whose waits have ended and whose allocation fits; first
    /// come, first served, none after one that memory holds back (`blocked`).
    /// \returns n if none.
    std::size_t choose() {
      std::size_t heads[stream_count];
      std::size_t idle = 0;
      for (std::size_t k = 0; k < stream_count; ++k) {
        if (busy_until[k] <= now && head[k] < n) {
          std::size_t at = idle++;  // insertion into the sorted prefix: at most four entries
          for (; at > 0 && heads[at - 1] > head[k]; --at) heads[at] = heads[at - 1];
          heads[at] = head[k];
        }
      }
      blocked = no_index;
      for (std::size_t k = 0; k < idle; ++k) {
        const std::size_t h = heads[k];
        bool ready = true;
        for (const index_t w : pl.waits_of(h)) ready = ready && s.end_[static_cast<std::size_t>(w)] <= now;
        if (s.link_shared_) {
          for (const index_t w : s.link_after_[h]) ready = ready && (w == no_index || s.end_[static_cast<std::size_t>(w)] <= now);
        }
        if (!ready) continue;
        const bytes_t alloc = s.info_[h].alloc;
        if (alloc > 0) {
          if (blocked != no_index) continue;
          apply_frees(now);  // only allocations need the current level
          if (in_use + alloc > budget) {
            blocked = static_cast<index_t>(h);
            continue;
          }
        }
        return h;
      }
      return n;
    }
    /// Starts action a now. \returns false, the plan invalid, if a copy it
    /// needs is not made yet or an in-place split's other holders run on.
    bool start(std::size_t a) {
      const action_info& info = s.info_[a];
      if (info.source != no_index && s.end_[static_cast<std::size_t>(info.source)] > now) {
        s.fail_late(p, pl, a, info.source, pl.actions[a].tensor, now, r);
        return false;
      }
      if (info.splits != no_index && !split_in_place(a, info.splits)) return false;
      const double end = now + info.duration_us;
      for (const touch_info& t : s.touches_of(a)) {
        copy_info& c = s.copies_[static_cast<std::size_t>(t.copy)];
        // A copy it reads must have been made (plan.hpp): a wait is missing otherwise.
        if (t.after != no_index && s.end_[static_cast<std::size_t>(t.after)] > now) {
          s.fail_late(p, pl, a, t.after, c.tensor, now, r);
          return false;
        }
        // On a tie the starting action takes the free: an earlier holder
        // ending now may have had its frees applied already.
        if (end >= c.release_us) {
          c.release_us = end;
          c.release_by = static_cast<index_t>(a);
        }
        if (--c.pending == 0) s.info_[static_cast<std::size_t>(c.release_by)].frees += c.bytes;
      }
      s.start_[a] = now;
      s.end_[a] = end;
      s.order_[a] = static_cast<index_t>(started);
      busy_until[static_cast<std::size_t>(info.stream)] = end;
      head[static_cast<std::size_t>(info.stream)] = static_cast<std::size_t>(info.next);
      ++started;
      if (info.stream == stream_kind::compute) compute_busy += info.duration_us;
      if (info.alloc > 0) {
        in_use += info.alloc;
        r.peak_bytes = std::max(r.peak_bytes, in_use);
        record(now);
      }
      return true;
    }
    /// An in-place split may start once every other holder of the whole copy has ended.
    bool split_in_place(std::size_t a, index_t whole) {
      const copy_info& w = s.copies_[static_cast<std::size_t>(whole)];
      if (w.pending == 1 && w.release_us <= now) return true;
      s.fail(plan_walk::describe(p, pl, static_cast<index_t>(a)) +
                 detail::concat(" splits tensor '", p.tensor_name[static_cast<std::size_t>(w.tensor)], "' in place at ",
                                now, " us while an earlier action holding it has not ended: a wait is missing"),
             r);
      return false;
    }
    /// Every pending free comes at the end of an action in flight, so the
    /// next end is the next event. \returns false if nothing is in flight.
    bool wait_for_next_end() {
      double wake = never;
      for (const double b : busy_until) {
        if (b > now) wake = std::min(wake, b);
      }
      if (wake == never) return false;
      now = wake;
      return true;
    }
    void finish() {
      r.time_us = *std::ranges::max_element(busy_until);
      r.stall_us = r.time_us - compute_busy;
    }
    /// Nothing in flight and nothing left to free. Waits name only earlier
    /// actions, so the earliest unstarted action is a head that is ready but
    /// for memory: `blocked` is set, and its allocation can never fit.
    void out_of_memory() {
      const bytes_t need = s.info_[static_cast<std::size_t>(blocked)].alloc;
      r.kind = failure_kind::out_of_memory;
      if (!opts.describe_failure) return;
      r.failure = detail::concat("out of memory at ", plan_walk::describe(p, pl, blocked), ", at ", now,
                                 " us: needs ", format_bytes(need), " (", format_bytes(in_use + need - budget),
                                 " more than is free), ", format_bytes(in_use), " in use, budget ",
                                 format_bytes(budget));
    }
  };

  [[nodiscard]] std::span<const touch_info> touches_of(std::size_t i) const {
    const auto b = static_cast<std::size_t>(info_[i].touch_begin);
    return {touches_.data() + b, static_cast<std::size_t>(info_[i + 1].touch_begin) - b};
  }

  /// An action may start only once the copies it reads have been made, and a
  /// swap-in only once its swap-out has ended (plan.hpp); the plan must order
  /// them with waits, so starting `a` before `before` ends makes it invalid.
  void fail_late(const problem& p, const plan& pl, std::size_t a, index_t before, index_t t, double now, report& r) {
    const double e = end_[static_cast<std::size_t>(before)];
    fail(detail::concat(plan_walk::describe(p, pl, static_cast<index_t>(a)), " starts at ", now, " us, but ",
                        plan_walk::describe(p, pl, before), ", which it needs for tensor '",
                        p.tensor_name[static_cast<std::size_t>(t)], "', ",
                        e == never ? std::string("has not started") : detail::concat("ends at ", e, " us"),
                        ": a wait is missing"),
         r);
  }

  std::vector<action_info> info_;  ///< per action, plus one for the end of the touches
  std::vector<touch_info> touches_;  ///< per action, the copies it holds
  std::size_t touch_count_ = 0;    ///< used part of `touches_`
  std::size_t touch_room_ = 0;     ///< touches_.size()
  bool unbounded_ = false;         ///< the issue-order times are valid if memory never binds
  double unbounded_time_us_ = 0;   ///< and then the iteration time
  double compute_busy_us_ = 0;     ///< the compute stream's total busy time
  std::vector<double> start_;      ///< per action
  std::vector<double> end_;        ///< per action; `never` until it starts
  std::vector<index_t> order_;     ///< per action: the how-manieth it started (`record_start_order`)
  bool timed_ = false;             ///< the last run's times come from the timed pass
  index_t first_[stream_count] = {};  ///< per stream, its first action
  std::vector<copy_info> copies_;
  std::size_t copy_count_ = 0;  ///< used part of `copies_`
  std::size_t copy_room_ = 0;   ///< copies_.size()
  /// Pass 1's happens-before: per action, the latest action of each stream
  /// guaranteed to have ended once it ends (itself on its own stream)
  /// (`clock_before`, filled as needed); per copy, its latest holder on each
  /// stream so far, kept only for a plan that splits copies in place.
  std::vector<clock> clocks_;
  std::vector<index_t> stream_before_;  ///< per action: the one before it on its stream, or no_index
  std::size_t clocks_done_ = 0;         ///< clocks_ is filled for the actions before this
  std::vector<std::array<index_t, stream_count>> holders_;
  bool splits_in_place_ = false;
  /// Where collectives share the host link (`share_link`): per action, the
  /// actions of the other kind issued last before it, which end first.
  std::vector<std::array<index_t, 2>> link_after_;
  bool link_shared_ = false;
  plan_walk walk_;  ///< pass 1
  bytes_t initial_bytes_ = 0;
  std::vector<bytes_t> baseline_;  ///< problem::baseline_peak's buffer
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
