#pragma once
/// \file
/// `plan_builder`: how planners write a plan. They emit actions in issue
/// order; the builder reads each through the plan walk (plan_walk.hpp) and
/// adds the waits plan.hpp's rules need: a compute waits for the actions of
/// other streams that made the copies it reads (swap-ins, and computes on
/// the compute or the communication stream), a swap-out for the action that made (or
/// last wrote) the copy it saves, a swap-in for the swap-out it undoes, and
/// a release that splits a whole tensor in place for the actions holding it.

#include <algorithm>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "memplan/plan.hpp"
#include "memplan/plan_walk.hpp"
#include "memplan/problem.hpp"

namespace memplan {

/// Builds an action list and adds the waits it needs. Planners emit actions
/// in issue order and let the builder derive the events. Where the actions
/// break plan.hpp's rules, the builder stops adding waits from there on and
/// the simulator rejects the plan, naming that action.
class plan_builder {
 public:
  /// An empty plan for `p` by `planner` (its registry name) within `budget`
  /// bytes, every tensor decided `keep`. `p` must outlive the builder.
  plan_builder(const problem& p, std::string planner, bytes_t budget) : p_(&p), deriver_{*this, 0, no_index, {}} {
    plan_.planner = std::move(planner);
    plan_.budget = budget;
    plan_.decisions.assign(p.num_tensors(), decision::keep);
    walking_ = walk_.start(p, plan_, deriver_);
  }
  /// The walk reads `plan_` and reports to `deriver_`: a move points them at the new home.
  plan_builder(plan_builder&& o) noexcept
      : p_(o.p_), plan_(std::move(o.plan_)), walk_(std::move(o.walk_)), deriver_{*this, o.deriver_.a,
        o.deriver_.split_creator, std::move(o.deriver_.extra)}, walking_(o.walking_), creator_(std::move(o.creator_)), copies_(o.copies_),
        last_compute_(o.last_compute_) {
    walk_.rebind(plan_);
  }
  plan_builder(const plan_builder&) = delete;
  plan_builder& operator=(const plan_builder&) = delete;
  plan_builder& operator=(plan_builder&&) = delete;
  ~plan_builder() = default;

  /// Appends a compute of step `step` and returns its action index.
  /// `part` >= 0: micro-op `part` of `parts` (plan.hpp's comment).
  /// `after`: more actions to wait for (an online allocator's reuse of
  /// bytes that actions on other streams still hold).
  index_t compute(index_t step, index_t parts = 1, index_t part = no_index, std::span<const index_t> after = {}) {
    return add(action_kind::compute, step, no_index, parts, part, after);
  }
  /// Appends a recompute of step `step`, as `compute`, and returns its action index.
  index_t recompute(index_t step, index_t parts = 1, index_t part = no_index, std::span<const index_t> after = {}) {
    return add(action_kind::recompute, step, no_index, parts, part, after);
  }
  /// Appends a swap-out of tensor `t` and returns its action index.
  /// `after`: more actions to wait for. Copy streams run ahead of the
  /// compute stream, so a swap starts as soon as its events fire; a prefetch
  /// needs an in-trigger (Capuchin §4.3) or it would bring the tensor back
  /// as soon as it left.
  index_t swap_out(index_t t, std::span<const index_t> after = {}) {
    return add(action_kind::swap_out, no_index, t, 1, no_index, after);
  }
  /// Appends a swap-in of tensor `t` (after its swap-out, or of offloaded
  /// state) and returns its action index; `after` as for `swap_out`.
  index_t swap_in(index_t t, std::span<const index_t> after = {}) {
    return add(action_kind::swap_in, no_index, t, 1, no_index, after);
  }
  /// Appends a free of tensor `t` and returns its action index.
  index_t free(index_t t) { return add(action_kind::free, no_index, t, 1, no_index); }
  /// Micro-tensor `part` of `parts` of t. Releasing one of a whole tensor
  /// splits it in place, so the release also waits for the latest
  /// compute-stream action and the copies that hold the whole tensor.
  index_t swap_out(index_t t, index_t parts, index_t part, std::span<const index_t> after = {}) {
    return add(action_kind::swap_out, no_index, t, parts, part, after);
  }
  /// Swaps micro-tensor `part` of `parts` of t back in, from a host copy of
  /// it or of the whole tensor.
  index_t swap_in(index_t t, index_t parts, index_t part, std::span<const index_t> after = {}) {
    return add(action_kind::swap_in, no_index, t, parts, part, after);
  }
  /// Frees micro-tensor `part` of `parts` of t (splitting a whole t in place).
  index_t free(index_t t, index_t parts, index_t part) { return add(action_kind::free, no_index, t, parts, part); }

  /// Persistent tensor t lives in host memory between iterations (see
  /// plan::offloaded_state); call before any action that touches it, in
  /// increasing order of t. Its last swap_out waits on its update.
  void offload(index_t t) {
    plan_.offloaded_state.push_back(t);
    if (walking_) walk_.offload(t, deriver_);
  }
  /// Records decision `d` for tensor `t` (plan::decisions: reports only).
  void decide(index_t t, decision d) { plan_.decisions[static_cast<std::size_t>(t)] = d; }
  /// Marks the plan infeasible: why (`kind`, and `reason` for people) and the
  /// smallest peak the planner reached.
  void infeasible(failure_kind kind, std::string reason, bytes_t best_peak) {
    plan_.feasible = false;
    plan_.kind = kind;
    plan_.reason = std::move(reason);
    plan_.best_peak = best_peak;
  }
  /// Records the smallest peak the planner reached (plan::best_peak), bytes.
  void set_best_peak(bytes_t peak) { plan_.best_peak = peak; }
  /// The plan so far, waits included.
  [[nodiscard]] const plan& current() const noexcept { return plan_; }
  /// The plan; the builder is spent.
  [[nodiscard]] plan finish() && { return std::move(plan_); }

 private:
  /// Host copies are named by their swap_out; offloaded state's is there from the start.
  static constexpr index_t from_start = -3;

  /// The walk's visitor: the action that made or last wrote each device
  /// copy, and the waits of the action being read.
  struct deriver {
    plan_builder& b;
    index_t a = 0;
    index_t split_creator = no_index;
    std::vector<index_t> extra;  ///< an in-place split's waits, until its release takes them

    [[nodiscard]] const action& act() const { return b.plan_.actions[static_cast<std::size_t>(a)]; }
    [[gnu::always_inline]] index_t copy(index_t creator) {
      std::vector<index_t>& c = b.creator_;
      if (b.copies_ == c.size()) c.resize(std::max<std::size_t>(64, 2 * c.size()));  // writes through indices
      c[b.copies_] = creator;
      return static_cast<index_t>(b.copies_++);
    }
    [[gnu::always_inline]] void wait(index_t on) {
      if (on == no_index) return;
      b.plan_.waits.push_back(on);
      b.plan_.wait_begin.back() = static_cast<index_t>(b.plan_.waits.size());
    }
    index_t initial_copy(index_t) { return copy(no_index); }
    index_t initial_host(index_t) { return from_start; }
    void begin(index_t action_index) { a = action_index; }
    void begin_access(index_t, bytes_t, bytes_t, bool) {}
    /// An input: wait for its maker on another stream (a swap-in that
    /// brought it, a compute across the compute and communication streams).
    [[gnu::always_inline]] void read(index_t c, bytes_t, bytes_t) {
      const index_t maker = b.creator_[static_cast<std::size_t>(c)];
      if (maker == no_index) return;
      const action& made = b.plan_.actions[static_cast<std::size_t>(maker)];
      const bool across = !b.p_->comm.empty() && stream_of(*b.p_, made) != stream_of(*b.p_, act());
      if (made.kind == action_kind::swap_in || across) wait(maker);
    }
    void write(index_t c, bytes_t, bytes_t) { b.creator_[static_cast<std::size_t>(c)] = a; }
    [[gnu::always_inline]] index_t make(index_t, bytes_t, index_t, index_t) { return copy(a); }
    void workspace(bytes_t) {}
    index_t swap_in(index_t, bytes_t, index_t host, bytes_t) {
      wait(host == from_start ? no_index : host);
      return copy(a);
    }
    void split(index_t whole) {
      split_creator = b.creator_[static_cast<std::size_t>(whole)];
      index_t saved = b.walk_.host_copy(act().tensor);
      if (saved == from_start) saved = no_index;
      for (const index_t h : {b.last_compute_, saved > split_creator ? saved : no_index}) {
        if (h != no_index) extra.push_back(h);
      }
    }
    index_t split_part(index_t, index_t, bytes_t, bytes_t, index_t, index_t) { return copy(split_creator); }
    /// A swap-out waits for the copy's maker, then a split's waits; a free
    /// of a micro-tensor for the split's waits, then the maker.
    void release(index_t c, bool saves) {
      const index_t maker = b.creator_[static_cast<std::size_t>(c)];
      if (act().part == no_index) {
        if (saves) wait(maker);
        return;
      }
      if (saves) wait(maker);
      for (const index_t h : extra) wait(h);
      if (!saves) wait(maker);
      extra.clear();
    }
    index_t save(index_t, bytes_t, index_t, index_t) { return a; }
    void update(index_t c) {  // a later swap-out saves what the update wrote
      if (c != no_index) b.creator_[static_cast<std::size_t>(c)] = a;
    }
    void end(index_t) {}
  };

  /// Appends an action. Its fields come as values, not as an `action` the
  /// caller built in memory: copying that whole would wait for the caller's
  /// stores to it (store forwarding), a fifth of a HOME evaluation's emission.
  index_t add(action_kind kind, index_t step, index_t tensor, index_t parts, index_t part,
              std::span<const index_t> after = {}) {
    const action x{kind, step, tensor, parts, part};
    const index_t a = plan_.push(x, after);
    if (walking_) walking_ = walk_.step(a, deriver_);
    if (stream_of(*p_, x) == stream_kind::compute) last_compute_ = a;  // an in-place split waits for it
    return a;
  }

  const problem* p_;
  plan plan_;
  plan_walk walk_;
  deriver deriver_;
  bool walking_ = false;           ///< the actions so far keep plan.hpp's rules
  std::vector<index_t> creator_;   ///< per device copy: the action that made or last wrote it
  std::size_t copies_ = 0;         ///< used part of creator_
  index_t last_compute_ = no_index;  ///< the latest compute-stream action
};

/// The `none` plan: every op once, in schedule order; nothing released early.
[[nodiscard]] inline plan keep_all_plan(const problem& p, bytes_t budget) {
  plan_builder b(p, "none", budget);
  for (std::size_t s = 0; s < p.num_steps(); ++s) b.compute(static_cast<index_t>(s));
  b.set_best_peak(p.baseline_peak());
  return std::move(b).finish();
}

}  // namespace memplan
