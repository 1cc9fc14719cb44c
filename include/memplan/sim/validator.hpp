#pragma once
/// \file
/// The validator: an independent re-check of a plan (DESIGN.md §5, the
/// validator's paragraph). N-version programming: it shares no code with simulator.hpp
/// and is written to be obviously right rather than fast — device buffers
/// are a plain list with their holders, and time is an event loop over the
/// streams' heads with memory in use as a running sum (O(actions log
/// actions), fast enough to check every plan a planner returns).
///
/// It enforces the contract of plan.hpp more strictly than the simulator:
/// a read of a copy, and a swap-in of a host copy, must be *guaranteed* to
/// come after the action that made it (or an update that wrote it in
/// place) — by the order of one stream or a chain of waits — not merely
/// happen to in the simulated timing; only recomputable non-update ops may
/// be recomputed, only ops with the batch among their split dimensions
/// split, into at most `max_split_parts` (plan.hpp: the batch's samples
/// where the problem knows it);
/// parameters and optimizer state are never lost and end the iteration on
/// the device unless offloaded. The simulator checks the same rules (one
/// verdict); on plans it accepts, its peak and time equal the simulator's.
///
/// It reads a plan in three phases: the action list's shape (`shape_check`),
/// then a walk in issue order that derives every device buffer (what each
/// action reads, allocates and releases), then the timing that checks memory
/// against the budget (`checker`). Each rule is one small function.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <queue>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "memplan/cost/device.hpp"
#include "memplan/cost/split.hpp"
#include "memplan/error.hpp"
#include "memplan/failure.hpp"
#include "memplan/graph/vocabulary.hpp"
#include "memplan/plan.hpp"
#include "memplan/problem.hpp"

namespace memplan {

/// The validator's verdict.
struct validation {
  bool ok = true;                   ///< no violation found
  /// `none` when ok; out_of_memory when the only violation is the budget;
  /// else invalid_plan.
  failure_kind kind = failure_kind::none;
  std::vector<std::string> errors;  ///< one message per violation, naming the action, op and tensor
  bytes_t peak_bytes = 0;           ///< highest device memory in use
  double time_us = 0;               ///< when the last action ends
};

namespace detail::validator {

/// A device allocation: a copy of a tensor, or an action's workspace.
struct buffer {
  index_t tensor = no_index;  ///< no_index for workspace
  bytes_t bytes = 0;
  index_t maker = no_index;      ///< the action that allocates it; no_index: there at time 0
  std::vector<index_t> holders;  ///< actions that must end before it can go
  bool goes = false;             ///< released at all (explicitly, or dead and not persistent)
  index_t writer = no_index;     ///< a later micro-op that wrote this whole output after its maker
  /// A micro-tensor split in place: the whole tensor's buffer whose block
  /// it lies in, from byte `start`; no_index: an allocation of its own.
  index_t inside = no_index;
  bytes_t start = 0;
  bytes_t block = 0;  ///< an allocation: the bytes its block holds (a whole tensor split in place keeps them)
};

/// vec[i] for an index_t i.
template <class Vector>
decltype(auto) at(Vector& vec, index_t i) {
  return vec[static_cast<std::size_t>(i)];
}

[[nodiscard]] constexpr bool runs_op(action_kind k) noexcept {
  return k == action_kind::compute || k == action_kind::recompute;
}

/// `count` copies of `value`.
template <class T>
std::vector<T> filled(index_t count, T value) {
  return std::vector<T>(static_cast<std::size_t>(count), value);
}

/// "action 5 (compute 'relu1')" or "action 7 (free 'a1')".
inline std::string name_of(const problem& p, const plan& pl, index_t a) {
  const action& act = at(pl.actions, a);
  return concat("action ", a, " (", to_string(act.kind), " '",
                runs_op(act.kind) ? at(p.op_name, act.step) : at(p.tensor_name, act.tensor), "')");
}

/// What both readings of a plan share: the plan, its sizes, the verdict.
struct reading {
  const problem& p;
  const plan& pl;
  index_t n = static_cast<index_t>(pl.actions.size());
  index_t steps = static_cast<index_t>(p.num_steps());
  index_t tensors = static_cast<index_t>(p.num_tensors());
  validation v;

  reading(const problem& problem_in, const plan& plan_in) : p(problem_in), pl(plan_in) {}

  void error(std::string message) {
    v.ok = false;
    v.kind = failure_kind::invalid_plan;
    v.errors.push_back(std::move(message));
  }
  /// An error that is out of memory when it is the plan's only violation.
  void over_budget(std::string message) {
    const bool only = v.ok;
    error(std::move(message));
    if (only) v.kind = failure_kind::out_of_memory;
  }
  [[nodiscard]] std::string name(index_t a) const { return name_of(p, pl, a); }
  /// "action 5 (free 'a1'): tensor 'a1'" followed by `what`.
  void tensor_error(index_t a, index_t t, std::string_view what) {
    error(concat(name(a), ": tensor '", at(p.tensor_name, t), "'", what));
  }
};

/// Phase 1: the action list is well-formed, so the walk can index by it.
struct shape_check : reading {
  using reading::reading;

  [[nodiscard]] bool run() {
    if (!wait_offsets_ok()) {
      error("wait_begin is not a list of actions + 1 non-decreasing offsets into waits");
      return false;
    }
    for (index_t a = 0; a < n; ++a) {
      check_action_fields(a);
      check_waits_point_back(a);
    }
    check_offloaded_list();
    // plan.hpp: the allocator's driver time is a time.
    if (!(pl.allocator_us >= 0 && pl.allocator_us < std::numeric_limits<double>::infinity())) {
      error(concat("allocator_us must be a finite number >= 0, got ", pl.allocator_us));
    }
    return v.ok;
  }

  // plan.hpp: wait_begin holds actions + 1 CSR offsets into waits.
  [[nodiscard]] bool wait_offsets_ok() const {
    bool ok = static_cast<index_t>(pl.wait_begin.size()) == n + 1 && pl.wait_begin[0] == 0 &&
              static_cast<std::size_t>(pl.wait_begin.back()) == pl.waits.size();
    for (index_t a = 0; ok && a < n; ++a) ok = at(pl.wait_begin, a) <= at(pl.wait_begin, a + 1);
    return ok;
  }

  // plan.hpp: a known kind, a step or tensor that exists, parts >= 1, a part among them, micro-tensors of samples.
  void check_action_fields(index_t a) {
    const action& act = at(pl.actions, a);
    const bool op = runs_op(act.kind);
    const bool tensor = act.kind == action_kind::swap_out || act.kind == action_kind::swap_in ||
                        act.kind == action_kind::free;
    if (!op && !tensor) error(concat("action ", a, ": unknown kind ", static_cast<int>(act.kind)));
    if (op && (act.step < 0 || act.step >= steps)) {
      error(concat("action ", a, " (", to_string(act.kind), "): step ", act.step, " is out of range [0, ", steps, ")"));
    }
    if (act.parts < 1) error(concat("action ", a, " (", to_string(act.kind), "): parts ", act.parts, " < 1"));
    if (act.part != no_index && (act.part < 0 || act.part >= act.parts)) {
      error(concat("action ", a, " (", to_string(act.kind), "): part ", act.part, " is not in [0, ", act.parts, ")"));
    }
    if (tensor && act.part != no_index && act.tensor >= 0 && act.tensor < tensors &&
        !splits_with_batch(at(p.kind, act.tensor))) {
      error(concat("action ", a, " (", to_string(act.kind), "): tensor '", at(p.tensor_name, act.tensor),
                   "' is not of kind input, activation or gradient, so it has no micro-tensors"));
    }
    if (tensor && (act.tensor < 0 || act.tensor >= tensors)) {
      error(concat("action ", a, " (", to_string(act.kind), "): tensor ", act.tensor, " is out of range [0, ",
                   tensors, ")"));
    }
  }

  // plan.hpp: an action waits only on earlier actions.
  void check_waits_point_back(index_t a) {
    for (const index_t w : pl.waits_of(static_cast<std::size_t>(a))) {
      if (w < 0 || w >= a) error(concat("action ", a, " waits on action ", w, ", which does not come before it"));
    }
  }

  // plan.hpp: offloaded_state names parameters and optimizer state without a producer, each once, ascending.
  void check_offloaded_list() {
    std::vector<std::uint8_t> named = filled<std::uint8_t>(tensors, 0);
    for (const index_t t : pl.offloaded_state) {
      if (t < 0 || t >= tensors) {
        error(concat("offloaded_state: tensor ", t, " is out of range [0, ", tensors, ")"));
      } else if (!is_persistent(at(p.kind, t)) || at(p.producer, t) != no_index) {
        error(concat("offloaded_state: tensor '", at(p.tensor_name, t), "' is of kind ", to_string(at(p.kind, t)),
                     at(p.producer, t) != no_index ? " and made by an op" : "",
                     ", not a parameter or optimizer state there at the start"));
      } else if (at(named, t)) {
        error(concat("offloaded_state: tensor '", at(p.tensor_name, t), "' is named twice"));
      } else {
        at(named, t) = 1;
      }
    }
    if (!std::ranges::is_sorted(pl.offloaded_state)) error("offloaded_state is not in increasing order");
  }
};

/// Phases 2 and 3 on a well-formed plan: the walk's state, a function per
/// phase and one per rule of plan.hpp it checks.
struct checker : reading {
  const device_spec& dev;
  bytes_t budget;

  // Happens-before: each action's stream, the previous action of that
  // stream, and seen[a][s], the latest action of stream s guaranteed to
  // have ended before a starts (a vector clock).
  using clock = std::array<index_t, stream_count>;
  std::vector<int> stream = filled(n, 0);
  std::vector<index_t> previous = filled(n, no_index);
  std::vector<clock> seen = filled(n, clock{});
  // Where collectives share the host link (device_spec), the actions of
  // the other kind (swap or communication) that must end before each starts.
  std::vector<std::vector<index_t>> link_before = filled(n, std::vector<index_t>{});

  // Device contents in issue order. Offloaded state has a host copy from
  // the start (host_copy stays no_index until a swap_out replaces it).
  std::vector<buffer> buffers;
  std::vector<std::uint8_t> offloaded = offloaded_flags();
  std::vector<index_t> on_device = filled<index_t>(tensors, -1);  // buffer, or -1
  std::vector<index_t> on_device_before_split = filled<index_t>(tensors, -1);  // the whole buffer last split in place
  std::vector<index_t> host_copy = filled(tensors, no_index);
  std::vector<index_t> last_update = filled(tensors, no_index);  // update-phase compute reading it
  std::vector<index_t> released = filled(tensors, no_index);
  std::vector<int> computes = filled(steps, 0);
  std::vector<index_t> step_parts = filled<index_t>(steps, 1);  // micro-ops: their parts
  std::vector<double> duration = filled(n, 0.0);
  // Micro-tensors: parts per tensor (0: none), (tensor, k) -> buffer, and
  // (tensor, parts, k) -> the swap_out holding its host copy.
  std::vector<index_t> micro_parts = filled<index_t>(tensors, 0);
  std::map<std::pair<index_t, index_t>, index_t> micro_on;
  std::map<std::tuple<index_t, index_t, index_t>, index_t> micro_host;

  // Time: when each action ends (never: not started), what it allocates.
  static constexpr double never = std::numeric_limits<double>::infinity();
  std::vector<double> end = filled(n, never);
  std::vector<bytes_t> needs = filled<bytes_t>(n, 0);
  std::vector<index_t> start_order = filled<index_t>(n, 0);  // the how-manieth each action started
  std::vector<double> start_time = filled(n, 0.0);

  checker(const problem& problem_in, const plan& plan_in, const device_spec& dev_in, bytes_t budget_in)
      : reading(problem_in, plan_in), dev(dev_in), budget(budget_in) {}

  [[nodiscard]] std::vector<std::uint8_t> offloaded_flags() const {
    std::vector<std::uint8_t> flags = filled<std::uint8_t>(tensors, 0);
    for (const index_t t : pl.offloaded_state) at(flags, t) = 1;
    return flags;
  }

  validation run() && {
    derive();
    time_actions();
    if (v.ok && !pl.offsets.empty()) check_layout();
    return std::move(v);
  }

  // ---- Phase 2: derive what each action reads, allocates and releases ----

  void derive() {
    order_streams();
    place_tensors_at_start();
    for (index_t a = 0; a < n; ++a) walk(a);
    check_every_step_computed();
    check_offloaded_at_end();
    check_state_on_device_at_end();
    mark_dead_at_end();
  }

  /// Streams and happens-before: the vector clock of each action.
  void order_streams() {
    std::array<index_t, stream_count> last = no_stream_actions;
    for (index_t a = 0; a < n; ++a) {
      at(stream, a) = static_cast<int>(stream_of(p, at(pl.actions, a)));
      if (dev.collectives_share_host_link) share_link(a, last);
      at(previous, a) = last[static_cast<std::size_t>(at(stream, a))];
      last[static_cast<std::size_t>(at(stream, a))] = a;
      auto& clock = at(seen, a);
      clock = no_stream_actions;
      std::vector<index_t> before(pl.waits_of(static_cast<std::size_t>(a)).begin(),
                                  pl.waits_of(static_cast<std::size_t>(a)).end());
      if (at(previous, a) != no_index) before.push_back(at(previous, a));
      for (const index_t b : before) {
        for (std::size_t s = 0; s < stream_count; ++s) clock[s] = std::max(clock[s], at(seen, b)[s]);
        clock[static_cast<std::size_t>(at(stream, b))] = std::max(clock[static_cast<std::size_t>(at(stream, b))], b);
      }
    }
  }
  /// The host link serves swaps and communication in issue order: a swap
  /// starts after the last communication issued before it, a communication
  /// after the last swap of each direction. It orders time, not data.
  void share_link(index_t a, const std::array<index_t, stream_count>& last) {
    const auto on = [&](stream_kind k) { return last[static_cast<std::size_t>(k)]; };
    const auto s = static_cast<stream_kind>(at(stream, a));
    std::vector<index_t>& before = at(link_before, a);
    if (s == stream_kind::comm) before = {on(stream_kind::d2h), on(stream_kind::h2d)};
    if (s == stream_kind::d2h || s == stream_kind::h2d) before = {on(stream_kind::comm)};
    std::erase(before, no_index);
  }
  /// `first` is guaranteed to have ended before `then` starts.
  [[nodiscard]] bool ordered(index_t first, index_t then) const {
    return at(seen, then)[static_cast<std::size_t>(at(stream, first))] >= first;
  }

  /// Tensors without a producer, but for offloaded state, are there at time 0.
  void place_tensors_at_start() {
    for (index_t t = 0; t < tensors; ++t) {
      if (at(p.producer, t) == no_index && !at(offloaded, t)) place_whole(t, no_index);
    }
  }
  /// A whole device copy of t, allocated by `maker` (no_index: at time 0).
  void place_whole(index_t t, index_t maker) {
    at(on_device, t) = static_cast<index_t>(buffers.size());
    buffers.push_back({t, at(p.bytes, t), maker, maker == no_index ? std::vector<index_t>{} : std::vector{maker},
                       false});
    buffers.back().block = at(p.bytes, t);
  }
  /// Micro-tensor k of t, allocated by `maker` and first held by `holder`.
  void place_micro(index_t t, index_t k, bytes_t bytes, index_t maker, index_t holder) {
    micro_on[{t, k}] = static_cast<index_t>(buffers.size());
    buffers.push_back({t, bytes, maker, {holder}, true});
    buffers.back().block = bytes;
  }
  /// How many of t's micro-tensors are on the device.
  [[nodiscard]] int micro_count(index_t t) const {
    int c = 0;
    for (index_t k = 0; k < at(micro_parts, t); ++k) c += micro_on.count({t, k}) != 0 ? 1 : 0;
    return c;
  }
  /// t is (to be) held as micro-tensors of `parts`; none of the old count stays.
  void recount_micro(index_t t, index_t parts) {
    for (index_t k = 0; k < at(micro_parts, t); ++k) micro_on.erase({t, k});
    at(micro_parts, t) = parts;
  }

  void walk(index_t a) {
    const action& act = at(pl.actions, a);
    const index_t t = act.tensor;
    if (runs_op(act.kind)) {
      walk_op(a);
    } else if (act.part != no_index) {
      if (act.kind == action_kind::swap_in) walk_micro_swap_in(a);
      else walk_micro_release(a);
    } else if (at(on_device, t) < 0 && micro_count(t) > 0) {
      tensor_error(a, t, " is held as micro-tensors; a whole swap or release needs the whole tensor");
    } else if (act.kind == action_kind::swap_in) {
      walk_swap_in(a);
    } else {
      walk_release(a);
    }
  }

  // ---- Phase 2a: compute and recompute ----

  void walk_op(index_t a) {
    const action& act = at(pl.actions, a);
    const index_t s = act.step;
    check_computed_once_in_order(a);
    check_recompute_allowed(a);
    check_split_allowed(a);
    for (const index_t t : p.inputs(s)) read_input(a, t);
    for (const index_t t : p.outputs(s)) make_output(a, t);
    const bytes_t w = at(p.workspace, s);
    // One part's scratch at a time: ceil(workspace / parts), as the simulator.
    buffers.push_back({no_index, w / act.parts + (w % act.parts != 0 ? 1 : 0), a, {a}, true});
    buffers.back().block = buffers.back().bytes;
    at(duration, a) = split_time_us(dev, at(p.time_us, s), act.parts) / (act.part != no_index ? act.parts : 1);
  }

  // plan.hpp: a step is computed whole once, or by micro-ops 0 .. parts-1 in order; recompute only after that.
  void check_computed_once_in_order(index_t a) {
    const action& act = at(pl.actions, a);
    const index_t s = act.step;
    const bool micro = act.part != no_index;
    if (act.kind == action_kind::compute) {
      const int expected = micro ? act.part : 0;
      if (at(computes, s) != expected || (micro && act.part > 0 && at(step_parts, s) != act.parts)) {
        error(concat(name(a), ": step ", s, " is computed more than once, or its micro-op ", act.part, " of ",
                     act.parts, " is out of order (", at(computes, s), " computed before)"));
      }
      at(computes, s) = micro ? act.part + 1 : 1;
      at(step_parts, s) = micro ? act.parts : 1;
    }
    if (act.kind == action_kind::recompute && (at(computes, s) == 0 || at(computes, s) != at(step_parts, s))) {
      error(concat(name(a), ": recomputes step ", s, " before it is computed"));
    }
  }

  // DESIGN.md §5: only recomputable ops are recomputed, and never an update (it writes its state in place).
  void check_recompute_allowed(index_t a) {
    const action& act = at(pl.actions, a);
    if (act.kind != action_kind::recompute) return;
    if (at(p.op_phase, act.step) == phase::update) {
      error(concat(name(a), ": op '", at(p.op_name, act.step), "' is an update, which writes its state in place; "
                   "it is never recomputed"));
    } else if (!at(p.recomputable, act.step)) {
      error(concat(name(a), ": op '", at(p.op_name, act.step), "' is not recomputable"));
    }
  }

  // DESIGN.md §5: only ops with a split dimension are split; micro-ops cut the batch, dimension 0, into at
  // most max_split_parts micro-batches (plan.hpp).
  void check_split_allowed(index_t a) {
    const action& act = at(pl.actions, a);
    if (auto why = split_violation(p, act.step, act.parts); !why.empty()) error(concat(name(a), ": ", why));
  }

  // plan.hpp: an op's inputs are on the device when it starts: whole, its micro-tensor, or all micro-tensors.
  void read_input(index_t a, index_t t) {
    const action& act = at(pl.actions, a);
    const bool update = at(p.op_phase, act.step) == phase::update;
    if (update) at(last_update, t) = a;
    if (at(on_device, t) >= 0) {
      hold(a, t, at(on_device, t));
      // An update writes the state it reads in place: a later use (a swap_out saving it) must come after it.
      if (update && is_persistent(at(p.kind, t))) at(buffers, at(on_device, t)).writer = a;
      return;
    }
    std::vector<index_t> parts_read;
    if (act.part != no_index && splits_with_batch(at(p.kind, t)) && at(micro_parts, t) == act.parts) {
      parts_read.push_back(act.part);
    } else {  // whole, or of another parts count: every micro-tensor
      for (index_t k = 0; k < at(micro_parts, t); ++k) parts_read.push_back(k);
    }
    bool all = !parts_read.empty();
    for (const index_t k : parts_read) all = all && micro_on.count({t, k}) != 0;
    if (!all) {
      report_missing(a, t, " reads ");
      return;
    }
    for (const index_t k : parts_read) hold(a, t, micro_on[{t, k}]);
  }
  /// Action a reads or writes tensor t's buffer b, which must be made before a starts.
  void hold(index_t a, index_t t, index_t b) {
    check_made_before(a, t, at(buffers, b));
    at(buffers, b).holders.push_back(a);
  }

  // plan.hpp: a copy is used after its maker (or last writer) ends, guaranteed by stream order or waits.
  void check_made_before(index_t a, index_t t, const buffer& b) {
    const index_t made = b.writer != no_index ? b.writer : b.maker;
    if (made != no_index && !ordered(made, a)) {
      error(concat(name(a), " uses tensor '", at(p.tensor_name, t), "' made by ", name(made),
                   ", but no wait or stream order makes it start after that ends"));
    }
  }

  // plan.hpp: no read after a release before something brings it back; nothing released twice.
  void report_missing(index_t a, index_t t, const char* what) {
    const std::string who = name(a) + what + "tensor '" + at(p.tensor_name, t) + "'";
    if (at(released, t) != no_index) {
      error(concat(who, " after ", name(at(released, t)), " released it and nothing brought it back"));
    } else if (at(offloaded, t)) {
      error(concat(who, ", which is offloaded state, in host memory until a swap_in brings it"));
    } else {
      error(concat(who, ", which no earlier action has made"));
    }
  }

  /// An op's output t: made, written by a later micro-op, or left as it is on the device.
  void make_output(index_t a, index_t t) {
    const action& act = at(pl.actions, a);
    const bool micro = act.part != no_index;
    if (micro && splits_with_batch(at(p.kind, t)) && at(on_device, t) < 0) {
      make_micro_output(a, t);
    } else if (at(on_device, t) >= 0) {
      if (micro && act.kind == action_kind::compute) {  // micro-op 0 made this whole output; this one writes it
        at(buffers, at(on_device, t)).holders.push_back(a);
        at(buffers, at(on_device, t)).writer = a;
      }
    } else if (at(micro_parts, t) > 0 && micro_count(t) == at(micro_parts, t)) {
      // On the device as micro-tensors.
      if (micro && act.kind == action_kind::compute) {
        tensor_error(a, t, " is held as micro-tensors but this micro-op makes it whole");
      }
    } else {
      check_not_partly_micro(a, t);
      at(micro_parts, t) = 0;
      place_whole(t, a);
    }
  }
  // plan.hpp: a whole recompute is invalid where only some of an output's micro-tensors are on the device.
  void check_not_partly_micro(index_t a, index_t t) {
    if (micro_count(t) > 0) tensor_error(a, t, " is partly on the device as micro-tensors");
  }
  /// Micro-op a's micro-tensor of sample output t.
  void make_micro_output(index_t a, index_t t) {
    const action& act = at(pl.actions, a);
    if (at(micro_parts, t) != act.parts) {
      check_one_parts_count(a, t);
      recount_micro(t, act.parts);
    }
    if (micro_on.count({t, act.part}) != 0) return;
    place_micro(t, act.part, micro_bytes(at(p.bytes, t), act.parts, act.part), a, a);
  }
  // plan.hpp: a tensor is on the device whole or as micro-tensors of one parts count.
  bool check_one_parts_count(index_t a, index_t t) {
    if (micro_count(t) > 0) tensor_error(a, t, " is held as micro-tensors of another parts count");
    return micro_count(t) == 0;
  }

  // ---- Phase 2b: swaps and frees ----

  void walk_micro_swap_in(index_t a) {
    const action& act = at(pl.actions, a);
    const index_t t = act.tensor;
    const index_t k = act.part;
    if (at(on_device, t) >= 0 || (at(micro_parts, t) == act.parts && micro_on.count({t, k}) != 0)) {
      error(concat(name(a), ": micro-tensor ", k, " of tensor '", at(p.tensor_name, t), "' is already on the device"));
      return;
    }
    if (at(micro_parts, t) != act.parts) {
      if (!check_one_parts_count(a, t)) return;
      recount_micro(t, act.parts);
    }
    const auto host = micro_host.find({t, act.parts, k});
    const index_t source = host != micro_host.end() ? host->second : at(host_copy, t);
    if (!check_swapped_out(a, t, source)) return;
    check_saved_before(a, t, source);
    const bytes_t mb = micro_bytes(at(p.bytes, t), act.parts, k);
    place_micro(t, k, mb, a, a);
    at(duration, a) = dev.h2d.transfer_us(mb);
  }

  void walk_swap_in(index_t a) {
    const index_t t = at(pl.actions, a).tensor;
    if (at(on_device, t) >= 0) {
      tensor_error(a, t, " is already on the device");
      return;
    }
    if (!at(offloaded, t) && !check_swapped_out(a, t, at(host_copy, t))) return;
    if (at(host_copy, t) != no_index) check_saved_before(a, t, at(host_copy, t));
    place_whole(t, a);
    at(duration, a) = dev.h2d.transfer_us(at(p.bytes, t));
  }

  // plan.hpp: swap_in brings back a host copy, so a swap_out (or offloaded state) must have made one.
  bool check_swapped_out(index_t a, index_t t, index_t source) {
    if (source == no_index) tensor_error(a, t, " was never swapped out");
    return source != no_index;
  }
  // plan.hpp: a swap_in starts only after the swap_out it undoes has ended, by stream order or waits.
  void check_saved_before(index_t a, index_t t, index_t source) {
    if (!ordered(source, a)) {
      error(concat(name(a), ": not ordered after the end of ", name(source),
                   " (add a wait); it could copy back tensor '", at(p.tensor_name, t), "' before it is saved"));
    }
  }

  void walk_micro_release(index_t a) {
    const action& act = at(pl.actions, a);
    const index_t t = act.tensor;
    const index_t k = act.part;
    if (at(on_device, t) >= 0) split_in_place(a, t);
    if (at(micro_parts, t) != act.parts || micro_on.count({t, k}) == 0) {
      report_missing(a, t, " releases a micro-tensor of ");
      return;
    }
    buffer& b = at(buffers, micro_on[{t, k}]);
    if (act.kind == action_kind::swap_out) {
      check_made_before(a, t, b);
      micro_host[{t, act.parts, k}] = a;
      at(duration, a) = dev.d2h.transfer_us(micro_bytes(at(p.bytes, t), act.parts, k));
    }
    b.holders.push_back(a);
    micro_on.erase({t, k});
    at(released, t) = a;
  }

  /// Releasing a micro-tensor of whole tensor t cuts it into micro-tensors in place.
  void split_in_place(index_t a, index_t t) {
    const index_t parts = at(pl.actions, a).parts;
    check_holders_done(a, t);
    at(on_device_before_split, t) = at(on_device, t);
    buffer& whole = at(buffers, at(on_device, t));
    const bytes_t total = whole.bytes;
    const index_t maker = whole.maker;
    whole.holders.push_back(a);
    whole.goes = true;
    whole.bytes = 0;
    at(on_device, t) = -1;
    recount_micro(t, parts);
    const index_t whole_at = at(on_device_before_split, t);
    for (index_t j = 0; j < parts; ++j) {
      place_micro(t, j, micro_bytes(total, parts, j), maker, a);
      buffers.back().inside = whole_at;
      buffers.back().start = total * j / parts;
      buffers.back().block = 0;
    }
  }
  // plan.hpp: a split in place starts after every earlier action holding the whole tensor has ended.
  void check_holders_done(index_t a, index_t t) {
    for (const index_t h : at(buffers, at(on_device, t)).holders) {
      if (!ordered(h, a)) {
        error(concat(name(a), " splits tensor '", at(p.tensor_name, t), "' in place, but ", name(h),
                     " that holds it is not ordered before it (add a wait)"));
      }
    }
  }

  /// A whole swap_out or free.
  void walk_release(index_t a) {
    const action& act = at(pl.actions, a);
    const index_t t = act.tensor;
    if (at(on_device, t) < 0) {
      report_missing(a, t, at(released, t) != no_index ? " releases (twice) " : " releases ");
      return;
    }
    buffer& b = at(buffers, at(on_device, t));
    if (act.kind == action_kind::swap_out) {
      check_made_before(a, t, b);
      at(host_copy, t) = a;
      at(duration, a) = dev.d2h.transfer_us(at(p.bytes, t));
    } else {
      check_update_saved(a, t);
      check_saved_or_used(a, t);
    }
    b.holders.push_back(a);
    b.goes = true;
    at(on_device, t) = -1;
    at(released, t) = a;
  }

  // plan.hpp: an update writes its state in place; freeing it with only an older host copy loses the update.
  void check_update_saved(index_t a, index_t t) {
    const tensor_kind kind = at(p.kind, t);
    if (is_persistent(kind) && at(last_update, t) != no_index && at(host_copy, t) != no_index &&
        at(host_copy, t) < at(last_update, t)) {
      error(concat(name(a), ": loses the update of ", to_string(kind), " '", at(p.tensor_name, t), "' by ",
                   name(at(last_update, t)), ", which no later swap_out saved"));
    }
  }
  // DESIGN.md §5: persistent state, and a parameter gradient before its uses, is never freed without a host copy;
  // persistent state this iteration makes with an op that may run again can be made again (it must end on the
  // device: check_state_on_device_at_end).
  void check_saved_or_used(index_t a, index_t t) {
    const tensor_kind kind = at(p.kind, t);
    if (at(host_copy, t) != no_index || at(offloaded, t)) return;
    if (is_persistent(kind) && !remakeable(t)) {
      error(concat(name(a), ": loses ", to_string(kind), " '", at(p.tensor_name, t), "', which has no host copy"));
      return;
    }
    if (kind != tensor_kind::parameter_gradient) return;
    for (const index_t u : p.uses(t)) {
      if (at(computes, u) == 0) {
        error(concat(name(a), ": loses parameter_gradient '", at(p.tensor_name, t), "' before its use by op '",
                     at(p.op_name, u), "', with no host copy"));
        return;
      }
    }
  }

  [[nodiscard]] bool remakeable(index_t t) const {
    const index_t made = at(p.producer, t);
    return made != no_index && at(p.recomputable, made) != 0 && at(p.op_phase, made) != phase::update;
  }

  // ---- Phase 2c: the end of the iteration ----

  // plan.hpp: every step is computed, whole or by all its micro-ops.
  void check_every_step_computed() {
    for (index_t s = 0; s < steps; ++s) {
      if (at(computes, s) == 0) {
        error(concat("step ", s, " (op '", at(p.op_name, s), "') is never computed"));
      } else if (at(computes, s) != at(step_parts, s)) {
        error(concat("step ", s, " (op '", at(p.op_name, s), "'): ", at(computes, s), " of its ", at(step_parts, s),
                     " micro-ops are computed"));
      }
    }
  }

  // plan.hpp: offloaded state ends the iteration in host memory, its last swap_out waiting on its last update.
  void check_offloaded_at_end() {
    for (const index_t t : pl.offloaded_state) {
      if (at(on_device, t) >= 0) {
        error(concat("offloaded state '", at(p.tensor_name, t),
                     "' is still on the device at the end of the iteration"));
      }
      const index_t u = at(last_update, t);
      if (u == no_index) continue;
      const index_t saved = at(host_copy, t);
      const auto waits = saved == no_index ? std::span<const index_t>() : pl.waits_of(static_cast<std::size_t>(saved));
      if (std::ranges::find(waits, u) == waits.end()) {
        error(concat("offloaded state '", at(p.tensor_name, t), "': its last host copy does not wait on its update, ",
                     name(u)));
      }
    }
  }

  // DESIGN.md §5: parameters and optimizer state not offloaded end the iteration on the device, for the next one.
  void check_state_on_device_at_end() {
    for (index_t t = 0; t < tensors; ++t) {
      if (!is_persistent(at(p.kind, t)) || at(offloaded, t) || at(on_device, t) >= 0) continue;
      error(concat(to_string(at(p.kind, t)), " '", at(p.tensor_name, t), "' is off the device at the end of the ",
                   "iteration", at(released, t) != no_index ? " (" + name(at(released, t)) + " released it)" : "",
                   ", but offloaded_state does not list it"));
    }
  }

  /// What is still on the device at the end dies after its last holder,
  /// unless it persists across iterations (DESIGN.md §4).
  void mark_dead_at_end() {
    for (index_t t = 0; t < tensors; ++t) {
      if (at(on_device, t) >= 0 && !is_persistent(at(p.kind, t))) at(buffers, at(on_device, t)).goes = true;
    }
  }

  // ---- Phase 3: time, and memory under the budget ----
  //
  // An event loop over the four streams: at each instant, start the
  // earliest-issued stream head that may start; when none may, move to the
  // next end or free. Memory in use is kept as a running sum: a buffer is
  // added when its maker starts and taken off when it goes — at the latest
  // end of its holders, known once every holder has started (a min-heap of
  // those times).

  std::array<index_t, stream_count> head = no_stream_actions;  // each stream's first unstarted action
  std::array<index_t, stream_count> tail = no_stream_actions;  // each stream's last action
  std::vector<index_t> following = filled(n, no_index);  // the next action of the same stream
  std::vector<std::vector<index_t>> made_by = filled(n, std::vector<index_t>{});  // buffers each action allocates
  std::vector<std::vector<index_t>> held_by = filled(n, std::vector<index_t>{});  // buffers each action holds, repeats kept
  std::vector<index_t> unstarted;   // per buffer: holders not started yet
  std::vector<double> last_end;     // per buffer: the latest end of its started holders
  std::vector<std::uint8_t> counted;  // per buffer: 0 not allocated yet, 1 in use, 2 gone
  using going = std::pair<double, index_t>;  // (when, buffer)
  std::priority_queue<going, std::vector<going>, std::greater<>> goes_at;
  bytes_t used = 0;

  void time_actions() {
    if (!check_start_fits()) return;
    index_rounds();
    double now = 0;
    index_t started = 0;
    while (started < n) {
      release_until(now);
      const choice c = next_to_start(now);
      if (c.chosen != no_index) {
        at(start_order, c.chosen) = started;
        start(c.chosen, now);
        ++started;
        continue;
      }
      const double next = next_event(now);
      if (next == never) {
        report_out_of_memory(c.waiting, now);
        return;
      }
      now = next;
    }
    v.time_us += pl.allocator_us;  // plan.hpp: the allocator's driver calls block the host
  }

  // plan.hpp: the tensors on the device at time 0 fit the budget.
  [[nodiscard]] bool check_start_fits() {
    for (const buffer& b : buffers) {
      if (b.maker == no_index) v.peak_bytes += b.bytes;
      else at(needs, b.maker) += b.bytes;
    }
    if (v.peak_bytes > budget) {
      over_budget(concat("over budget at time 0: the tensors without a producer take ", v.peak_bytes,
                         " bytes, budget ", budget));
    }
    return v.peak_bytes <= budget;
  }

  /// The loop's indexes: streams in issue order, who allocates and holds
  /// each buffer; the buffers there at time 0 in use, those nobody holds
  /// going at once.
  void index_rounds() {
    for (index_t a = 0; a < n; ++a) {
      const auto s = static_cast<std::size_t>(at(stream, a));
      (tail[s] == no_index ? head[s] : at(following, tail[s])) = a;
      tail[s] = a;
    }
    const auto count = static_cast<index_t>(buffers.size());
    unstarted = filled<index_t>(count, 0);
    last_end = filled(count, 0.0);
    counted = filled<std::uint8_t>(count, 0);
    for (index_t k = 0; k < count; ++k) {
      const buffer& b = at(buffers, k);
      if (b.maker == no_index) {
        at(counted, k) = 1;
        used += b.bytes;
      } else {
        at(made_by, b.maker).push_back(k);
      }
      for (const index_t h : b.holders) at(held_by, h).push_back(k);
      at(unstarted, k) = static_cast<index_t>(b.holders.size());
      if (b.holders.empty() && b.goes) goes_at.push({0.0, k});
    }
  }

  /// Takes off the buffers that have gone by `now`.
  void release_until(double now) {
    while (!goes_at.empty() && goes_at.top().first <= now) {
      const index_t k = goes_at.top().second;
      goes_at.pop();
      if (at(counted, k) == 1) used -= at(buffers, k).bytes;
      at(counted, k) = 2;
    }
  }

  /// Starts action a at `now`: it allocates what it makes (unless that has
  /// gone already), and a buffer whose last holder this is goes at the
  /// latest end of its holders.
  void start(index_t a, double now) {
    at(end, a) = now + at(duration, a);
    at(start_time, a) = now;
    v.peak_bytes = std::max(v.peak_bytes, used + at(needs, a));
    v.time_us = std::max(v.time_us, at(end, a));
    head[static_cast<std::size_t>(at(stream, a))] = at(following, a);
    for (const index_t k : at(made_by, a)) {
      if (at(counted, k) != 0) continue;
      at(counted, k) = 1;
      used += at(buffers, k).bytes;
    }
    for (const index_t k : at(held_by, a)) {
      at(last_end, k) = std::max(at(last_end, k), at(end, a));
      if (--at(unstarted, k) == 0 && at(buffers, k).goes) goes_at.push({at(last_end, k), k});
    }
  }

  /// What next_to_start finds at an instant.
  struct choice {
    index_t chosen = no_index;   ///< the action to start, or none
    index_t waiting = no_index;  ///< the earliest one memory holds back: later ones may not allocate
  };
  /// The earliest-issued action that may start at `now`: a stream head (an
  /// action starts after its stream's previous one) whose previous action
  /// and waits have ended and, first come first served, whose allocation fits.
  [[nodiscard]] choice next_to_start(double now) const {
    std::array<index_t, stream_count> order = head;
    std::ranges::sort(order, [](index_t x, index_t y) { return static_cast<std::uint64_t>(x) < static_cast<std::uint64_t>(y); });
    choice c;
    for (const index_t a : order) {
      if (a == no_index) continue;
      const index_t before = at(previous, a);
      if (before != no_index && !(at(end, before) <= now)) continue;
      bool ready = true;
      for (const index_t w : pl.waits_of(static_cast<std::size_t>(a))) ready = ready && at(end, w) <= now;
      for (const index_t w : at(link_before, a)) ready = ready && at(end, w) <= now;
      if (!ready) continue;
      if (at(needs, a) > 0 && (c.waiting != no_index || used + at(needs, a) > budget)) {
        if (c.waiting == no_index) c.waiting = a;
        continue;
      }
      c.chosen = a;
      return c;
    }
    return c;
  }
  /// The next instant after `now` at which an action ends (each stream's
  /// latest started one) or a buffer goes.
  [[nodiscard]] double next_event(double now) const {
    double next = goes_at.empty() ? never : goes_at.top().first;
    for (std::size_t s = 0; s < stream_count; ++s) {
      const index_t running = head[s] == no_index ? tail[s] : at(previous, head[s]);
      if (running != no_index && at(end, running) > now) next = std::min(next, at(end, running));
    }
    return next;
  }
  // ---- Phase 4: the memory layout (DESIGN.md §6) ----

  /// An instant: (time, how-manieth the action started, 0 start / 1 end);
  /// at one time, an action's end comes before the start of an action
  /// started after it. The load is (0, -1, 0).
  using instant = std::tuple<double, index_t, int>;
  /// Where a buffer's bytes lie in the arena, and when it is made and freed.
  struct placed {
    index_t buffer;
    bytes_t from, to;
    instant made, freed;
  };
  [[nodiscard]] instant made_at(const buffer& b) const {
    if (b.maker == no_index) return {0.0, -1, 0};
    return {at(start_time, b.maker), at(start_order, b.maker), 0};
  }
  [[nodiscard]] instant freed_instant(const buffer& b) const {
    if (!b.goes) return {never, 0, 1};
    instant when = made_at(b);
    std::get<2>(when) = 1;  // released at once if nothing holds it
    for (const index_t h : b.holders) when = std::max(when, instant{at(end, h), at(start_order, h), 1});
    return when;
  }

  /// Every allocation has an aligned offset; no two share bytes unless one
  /// is freed strictly before the other is made; the arena fits the budget
  /// and is the peak.
  void check_layout() {
    const bytes_t align = dev.alignment;
    std::vector<bytes_t> offset = filled<bytes_t>(static_cast<index_t>(buffers.size()), 0);
    std::size_t next = 0;
    for (std::size_t b = 0; b < buffers.size(); ++b) {
      const buffer& buf = buffers[b];
      if (buf.inside != no_index) {
        offset[b] = at(offset, buf.inside) + buf.start;
      } else if (buf.tensor != no_index || buf.block > 0) {
        offset[b] = next < pl.offsets.size() ? pl.offsets[next] : 0;
        if (next < pl.offsets.size() && (offset[b] < 0 || offset[b] % align != 0)) {
          error(concat("layout: ", buffer_name(b), " is at offset ", offset[b], ", not a non-negative multiple of ",
                       align));
        }
        ++next;
      }
    }
    if (next != pl.offsets.size()) {
      error(concat("layout: ", pl.offsets.size(), " offsets for ", next, " device allocations"));
      return;
    }
    check_overlaps(placements(offset, align));
  }

  /// The bytes each buffer holds and when: an allocation's block rounded to
  /// the alignment (a whole tensor split in place is held by its
  /// micro-tensors, the last taking the padding).
  [[nodiscard]] std::vector<placed> placements(const std::vector<bytes_t>& offset, bytes_t align) {
    const auto round = [&](bytes_t x) { return (x + align - 1) / align * align; };
    std::vector<placed> out;
    bytes_t arena = 0;
    for (std::size_t b = 0; b < buffers.size(); ++b) {
      const buffer& buf = buffers[b];
      bytes_t from = offset[b], to = from + buf.bytes;
      if (buf.inside == no_index && buf.block > 0 && buf.bytes > 0) to = from + round(buf.bytes);
      if (buf.inside != no_index) {
        const bytes_t whole_end = at(offset, buf.inside) + round(at(buffers, buf.inside).block);
        if (buf.start + buf.bytes == at(buffers, buf.inside).block) to = whole_end;  // the last micro-tensor
      }
      arena = std::max(arena, to);
      if (to > from && buf.bytes > 0) out.push_back({static_cast<index_t>(b), from, to, made_at(buf), freed_instant(buf)});
    }
    v.peak_bytes = arena;
    if (arena > budget) over_budget(concat("over budget: the layout's arena takes ", arena, " bytes, budget ", budget));
    return out;
  }

  /// Pairs sharing bytes, found by sorting on the offset.
  void check_overlaps(std::vector<placed> list) {
    std::ranges::sort(list, [](const placed& x, const placed& y) { return x.from < y.from; });
    for (std::size_t i = 0; i < list.size(); ++i) {
      for (std::size_t j = i + 1; j < list.size() && list[j].from < list[i].to; ++j) {
        const placed& x = list[i];
        const placed& y = list[j];
        if (x.freed < y.made || y.freed < x.made) continue;
        error(concat("layout: ", buffer_name(x.buffer), " and ", buffer_name(y.buffer), " share bytes [",
                     std::max(x.from, y.from), ", ", std::min(x.to, y.to), ") while both are live"));
        return;
      }
    }
  }
  [[nodiscard]] std::string buffer_name(index_t b) const {
    const buffer& buf = at(buffers, b);
    const std::string what = buf.tensor == no_index ? std::string("the workspace")
                                                    : concat("tensor '", at(p.tensor_name, buf.tensor), "'");
    return concat(what, buf.maker == no_index ? std::string(" at the start") : " of " + name(buf.maker));
  }

  // plan.hpp: an allocation that does not fit waits for frees; if none can come, the plan is out of memory.
  void report_out_of_memory(index_t waiting, double now) {
    over_budget(concat("over budget: ", name(waiting), " needs ", at(needs, waiting), " bytes at ", now,
                       " us with ", used, " in use and nothing left to free; budget ", budget));
  }
};

}  // namespace detail::validator

/// Checks `pl` against plan.hpp's rules and `budget`, re-deriving every
/// start and end time. Slow (quadratic); meant for tests and the CLI's
/// `validate`.
/// \returns every violation found; `ok` when there are none.
[[nodiscard]] inline validation validate(const problem& p, const plan& pl, const device_spec& dev, bytes_t budget) {
  detail::validator::shape_check shape(p, pl);
  if (!shape.run()) return std::move(shape.v);
  return detail::validator::checker(p, pl, dev, budget).run();
}

}  // namespace memplan
