#pragma once
/// \file
/// `plan_walk`: the one reading of plan.hpp's action-list rules. It walks a
/// plan's actions in issue order and derives, for each, which device copy of
/// a tensor it reads, writes, allocates or releases — whole tensors,
/// micro-tensors of split ops (TSPLIT §V-A, Fig. 10: made by micro-ops,
/// split in place, merged on a whole read) and host copies (offloaded state
/// included) — and rejects, naming the action, what the rules forbid.
///
/// The simulator (sim/simulator.hpp), the executor's layout
/// (runtime/layout.hpp) and `plan_builder` (plan_builder.hpp) are its
/// visitors: each keeps its own record of the copies (the simulator their
/// holders and times, the layout their buffers, the builder their makers)
/// under ids it hands the walk. The validator (sim/validator.hpp) reads the
/// rules independently and shares nothing with it.
///
/// A visitor `V` provides, for the action `a` being read:
/// - `void begin(index_t a)` once its waits are checked, `void end(index_t a)` after it;
/// - `index_t initial_copy(index_t t)`: t's device copy at time 0 (no producer);
/// - `index_t initial_host(index_t t)`: offloaded state t's host copy at time 0;
/// - `void begin_access(index_t t, bytes_t offset, bytes_t bytes, bool output)`:
///   op `a` reads (or writes) bytes [offset, offset + bytes) of tensor t,
///   held in the copies of the `read`, `write` or `make` calls that follow;
/// - `void read(index_t c, bytes_t offset, bytes_t bytes)`: it reads those of copy c;
/// - `void write(index_t c, bytes_t offset, bytes_t bytes)`: a later micro-op
///   writes its share of a whole output (a parameter gradient) in place;
/// - `index_t make(index_t t, bytes_t bytes, index_t parts, index_t part)`:
///   a new device copy, an op's output (part: no_index for a whole tensor);
/// - `void update(index_t c)`: an update-phase op writes copy c, the
///   persistent state it read, in place (a later swap_out saves that);
/// - `void workspace(bytes_t bytes)`: the scratch the op needs while it runs;
/// - `index_t swap_in(index_t t, bytes_t bytes, index_t host, bytes_t host_start)`:
///   a new device copy read from host copy `host`, from byte `host_start`;
/// - `void split(index_t whole)`: a whole copy is split in place, then
///   `index_t split_part(index_t whole, index_t t, bytes_t start, bytes_t bytes,
///   index_t parts, index_t part)` gives each micro-tensor's copy;
/// - `void release(index_t c, bool saves)`: a free or swap_out gives c back
///   (`saves`: a swap_out, which reads it first);
/// - `index_t save(index_t t, bytes_t bytes, index_t parts, index_t part)`:
///   the host copy a swap_out writes.

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "memplan/error.hpp"
#include "memplan/plan.hpp"
#include "memplan/problem.hpp"

namespace memplan {

/// Walks plans in issue order (see the file comment); keeps its buffers
/// between walks. Not thread-safe: one per thread.
class plan_walk {
 public:
  /// Walks `pl` for `v`. \returns false, with `why()` naming the action and
  /// the rule, at the first action the rules reject, or at the end (a step
  /// never computed, offloaded state left on the device or not saved, other
  /// persistent state left off it).
  template <class V>
  bool run(const problem& p, const plan& pl, V& v) {
    if (!start(p, pl, v)) return false;
    for (std::size_t a = 0; a < pl.actions.size(); ++a) {
      if (!step(static_cast<index_t>(a), v)) return false;
    }
    return finish();
  }

  /// Why the last walk failed.
  [[nodiscard]] const std::string& why() const noexcept { return why_; }
  /// After a walk: t's whole device copy, or no_index.
  [[nodiscard]] index_t device_copy(index_t t) const { return current_[static_cast<std::size_t>(t)]; }
  /// After a walk: t's latest whole host copy, or no_index.
  [[nodiscard]] index_t host_copy(index_t t) const { return saved_[static_cast<std::size_t>(t)]; }
  /// "action 17 (compute 'conv3')"; for actions whose step or tensor is in range.
  [[nodiscard]] static std::string describe(const problem& p, const plan& pl, index_t a) {
    const action& act = pl.actions[static_cast<std::size_t>(a)];
    const bool runs_op = act.kind == action_kind::compute || act.kind == action_kind::recompute;
    const std::string& name = runs_op ? p.op_name[static_cast<std::size_t>(act.step)]
                                      : p.tensor_name[static_cast<std::size_t>(act.tensor)];
    return detail::concat("action ", a, " (", to_string(act.kind), " '", name, "')");
  }

  /// Checks the waits (each on an earlier action) and offloaded state, and
  /// places the tensors without a producer.
  template <class V>
  bool start(const problem& p, const plan& pl, V& v) {
    p_ = &p;
    pl_ = &pl;
    const std::size_t n = pl.actions.size();
    const auto& wb = pl.wait_begin;
    if (wb.size() != n + 1 || wb.front() != 0 || static_cast<std::size_t>(wb.back()) != pl.waits.size() ||
        !std::ranges::is_sorted(wb)) {
      return fail(detail::concat("wait_begin must hold ", n + 1, " non-decreasing offsets from 0 to ",
                                 pl.waits.size(), " (one per action, plus one)"));
    }
    for (std::size_t a = 0; a < n; ++a) {
      for (const index_t w : pl.waits_of(a)) {
        if (w < 0 || static_cast<std::size_t>(w) >= a) {
          return fail(detail::concat("action ", a, " waits on action ", w, ", which is not an earlier action"));
        }
      }
    }
    reset();
    if (!check_offloaded()) return false;
    for (const index_t t : pl.offloaded_state) saved_[static_cast<std::size_t>(t)] = v.initial_host(t);
    for (std::size_t t = 0; t < p.num_tensors(); ++t) {
      if (p.producer[t] != no_index || saved_[t] != no_index) continue;
      current_[t] = v.initial_copy(static_cast<index_t>(t));
    }
    return true;
  }

  /// Reads action `a` (the next in issue order).
  template <class V>
  [[gnu::always_inline]] bool step(index_t a, V& v) {
    const action& act = pl_->actions[static_cast<std::size_t>(a)];
    v.begin(a);
    if (act.part != no_index && (act.part < 0 || act.part >= act.parts)) {
      return fail(detail::concat("action ", a, " (", to_string(act.kind), "): part ", act.part,
                                 " is outside [0, parts = ", act.parts, ")"));
    }
    bool ok = false;
    switch (act.kind) {
      case action_kind::compute:
      case action_kind::recompute: ok = run_op(a, act, v); break;
      case action_kind::swap_out:
      case action_kind::swap_in:
      case action_kind::free: ok = move_tensor(a, act, v); break;
      default: return fail(detail::concat("action ", a, " has unknown kind ", static_cast<int>(act.kind)));
    }
    if (ok) v.end(a);
    return ok;
  }

  /// The plan being walked moved (to `pl`, equal to it).
  void rebind(const plan& pl) noexcept { pl_ = &pl; }

  /// Offloaded state t, which no action has touched yet, starts in host
  /// memory (a plan built action by action names it late).
  template <class V>
  void offload(index_t t, V& v) {
    current_[static_cast<std::size_t>(t)] = no_index;
    saved_[static_cast<std::size_t>(t)] = v.initial_host(t);
  }

  /// After the last action: every step computed whole or by all its
  /// micro-ops; offloaded state back in host memory with its update saved;
  /// the other parameters and optimizer state on the device.
  bool finish() {
    const problem& p = *p_;
    for (std::size_t s = 0; s < p.num_steps(); ++s) {
      if (computed_[s] == 0) return fail(detail::concat("step ", s, " (op '", p.op_name[s], "') is never computed"));
      if (computed_[s] != step_parts_[s]) {
        return fail(detail::concat("step ", s, " (op '", p.op_name[s], "'): only ", computed_[s], " of its ",
                                   step_parts_[s], " micro-ops are computed"));
      }
    }
    for (const index_t t : pl_->offloaded_state) {
      if (!offloaded_saved(t)) return false;
    }
    return state_on_device();
  }

 private:
  void reset() {
    const std::size_t tensors = p_->num_tensors();
    const std::size_t steps = p_->num_steps();
    current_.assign(tensors, no_index);
    saved_.assign(tensors, no_index);
    last_swap_out_.assign(tensors, no_index);
    last_update_.assign(tensors, no_index);
    computed_.assign(steps, 0);
    step_parts_.assign(steps, 1);
    // Most plans split nothing: the micro-tensor tables are refilled only
    // after a walk that used them (or for another problem's size).
    if (micro_used_ || micro_parts_.size() != tensors) micro_parts_.assign(tensors, 0);
    if (host_used_ || host_parts_.size() != tensors) host_parts_.assign(tensors, 0);
    micro_used_ = host_used_ = false;
    micro_at_.resize(tensors);
    micro_copy_.clear();
    host_at_.resize(tensors);
    host_micro_.clear();
    why_.clear();
  }

  // The failure paths are cold: kept out of the walk's loop, which a search runs per plan.
  [[gnu::cold]] [[gnu::noinline]] bool fail(std::string why) {
    why_ = std::move(why);
    return false;
  }
  [[gnu::cold]] [[gnu::noinline]] bool fail_at(index_t a, std::string_view what) {
    return fail(describe(*p_, *pl_, a) + std::string(what));
  }

  /// offloaded_state: ascending parameters or optimizer state that no op makes.
  bool check_offloaded() {
    const problem& p = *p_;
    const auto& off = pl_->offloaded_state;
    for (std::size_t k = 0; k < off.size(); ++k) {
      const index_t t = off[k];
      if (t < 0 || static_cast<std::size_t>(t) >= p.num_tensors()) {
        return fail(detail::concat("offloaded_state names tensor ", t, ", but the problem has ", p.num_tensors(),
                                   " tensors"));
      }
      const auto ti = static_cast<std::size_t>(t);
      if (!p.persistent(t) || p.producer[ti] != no_index) {
        return fail(detail::concat("offloaded_state names tensor ", t, " ('", p.tensor_name[ti], "') of kind ",
                                   to_string(p.kind[ti]), p.producer[ti] != no_index ? ", made by an op" : "",
                                   "; only parameters and optimizer state that no op makes live in host memory "
                                   "between iterations"));
      }
      if (k > 0 && off[k - 1] >= t) {
        return fail(detail::concat("offloaded_state must list tensors in increasing order, without repeats; ", t,
                                   " follows ", off[k - 1]));
      }
    }
    return true;
  }

  /// Offloaded state t ends the iteration in host memory, its last swap_out
  /// waiting on its last update (an update writes in place).
  bool offloaded_saved(index_t t) {
    const auto ti = static_cast<std::size_t>(t);
    const std::string& name = p_->tensor_name[ti];
    if (current_[ti] != no_index) {
      return fail(detail::concat("offloaded_state '", name,
                                 "' is on the device at the end of the iteration; it must end in host memory "
                                 "(swap it out after its last use)"));
    }
    const index_t update = last_update_[ti];
    if (update == no_index) return true;  // no op writes it: its host copy is current
    const index_t saved = last_swap_out_[ti];
    const auto waits = saved > update ? pl_->waits_of(static_cast<std::size_t>(saved)) : std::span<const index_t>();
    if (std::ranges::find(waits, update) != waits.end()) return true;
    return fail(detail::concat("offloaded_state '", name, "': its update, ", describe(*p_, *pl_, update),
                               ", is not saved; the last swap_out of it must wait on that action"));
  }

  /// DESIGN.md §5: persistent state not in offloaded_state ends the
  /// iteration on the device, where the next one reads it.
  bool state_on_device() {
    const problem& p = *p_;
    for (std::size_t t = 0; t < p.num_tensors(); ++t) {
      const auto ti = static_cast<index_t>(t);
      if (current_[t] != no_index || !p.persistent(ti) || std::ranges::binary_search(pl_->offloaded_state, ti)) continue;
      const index_t by = last_release(static_cast<index_t>(pl_->actions.size()), ti);
      return fail(detail::concat(to_string(p.kind[t]), " '", p.tensor_name[t], "' is not on the device at the end of ",
                                 "the iteration, and offloaded_state does not list it: ",
                                 by == no_index ? std::string("nothing made it") : describe(p, *pl_, by) + " released it",
                                 " and nothing brought it back; the next iteration needs it (swap it back in, or "
                                 "offload it)"));
    }
    return true;
  }

  [[nodiscard]] std::span<index_t> micro(index_t t) {
    const auto ti = static_cast<std::size_t>(t);
    return {micro_copy_.data() + micro_at_[ti], static_cast<std::size_t>(micro_parts_[ti])};
  }
  [[nodiscard]] bool any_micro(index_t t) {
    return std::ranges::any_of(micro(t), [](index_t c) { return c != no_index; });
  }
  [[nodiscard]] bool all_micro(index_t t) {
    return std::ranges::none_of(micro(t), [](index_t c) { return c == no_index; });
  }
  /// t is to hold micro-tensors of `parts`: false if it holds some of another count.
  bool enter_parts(index_t t, index_t parts) {
    const auto ti = static_cast<std::size_t>(t);
    if (micro_parts_[ti] == parts) return true;
    if (micro_parts_[ti] != 0 && any_micro(t)) return false;
    micro_parts_[ti] = parts;
    micro_used_ = true;
    micro_at_[ti] = micro_copy_.size();
    micro_copy_.resize(micro_copy_.size() + static_cast<std::size_t>(parts), no_index);
    return true;
  }
  [[nodiscard]] [[gnu::cold]] [[gnu::noinline]] std::string other_parts(index_t t) const {
    return detail::concat(": tensor '", p_->tensor_name[static_cast<std::size_t>(t)],
                          "' is on the device as micro-tensors of another parts count");
  }
  [[nodiscard]] [[gnu::cold]] [[gnu::noinline]] std::string partly_on_device(index_t t) const {
    return detail::concat(": tensor '", p_->tensor_name[static_cast<std::size_t>(t)],
                          "' is on the device as micro-tensors; release or bring back each of them");
  }
  /// The latest release (swap_out or free) of t before action `a`, or no_index.
  [[nodiscard]] index_t last_release(index_t a, index_t t) const {
    for (index_t by = a - 1; by >= 0; --by) {
      const action& act = pl_->actions[static_cast<std::size_t>(by)];
      if (act.tensor == t && (act.kind == action_kind::swap_out || act.kind == action_kind::free)) return by;
    }
    return no_index;
  }
  /// ": tensor 'x' is not on the device; action 9 (free 'x') released it ..."
  /// for action `a`, which found t missing.
  [[nodiscard]] [[gnu::cold]] [[gnu::noinline]] std::string not_on_device(index_t a, index_t t) const {
    const std::string& name = p_->tensor_name[static_cast<std::size_t>(t)];
    const index_t by = last_release(a, t);
    if (by != no_index) {
      return detail::concat(": tensor '", name, "' is not on the device; ", describe(*p_, *pl_, by),
                            " released it and nothing brought it back");
    }
    if (std::ranges::binary_search(pl_->offloaded_state, t)) {
      return detail::concat(": tensor '", name,
                            "' is not on the device; it is offloaded state, in host memory until a swap_in brings it");
    }
    return detail::concat(": tensor '", name, "' is not on the device; nothing has made it yet");
  }

  /// compute / recompute: the step's order rules, its inputs, outputs and workspace.
  template <class V>
  [[gnu::always_inline]] bool run_op(index_t a, const action& act, V& v) {
    const problem& p = *p_;
    const index_t s = act.step;
    if (s < 0 || static_cast<std::size_t>(s) >= p.num_steps()) {
      return fail(detail::concat("action ", a, " (", to_string(act.kind), ") names step ", s,
                                 ", but the problem has ", p.num_steps(), " steps"));
    }
    if (act.parts < 1) return fail_at(a, detail::concat(": parts must be at least 1, got ", act.parts));
    if (!count_computed(a, act)) return false;
    if ((act.kind == action_kind::recompute || act.parts != 1) && !op_allowed(a, act)) return false;
    for (const index_t t : p.inputs(s)) {
      if (!read_input(a, act, t, v)) return false;
    }
    if (p.op_phase[static_cast<std::size_t>(s)] == phase::update) {  // it writes the state it reads, in place
      for (const index_t t : p.inputs(s)) {
        if (!p.persistent(t)) continue;
        last_update_[static_cast<std::size_t>(t)] = a;
        v.update(current_[static_cast<std::size_t>(t)]);
      }
    }
    for (const index_t t : p.outputs(s)) {
      if (!make_output(a, act, t, v)) return false;
    }
    const bytes_t w = p.workspace[static_cast<std::size_t>(s)];
    v.workspace(act.parts == 1 ? w : (w + act.parts - 1) / act.parts);  // one part's scratch at a time
    return true;
  }

  /// A step is computed whole once, or by micro-ops 0, 1, ..., parts-1 in
  /// order; only a computed step is recomputed (plan.hpp).
  [[gnu::always_inline]] bool count_computed(index_t a, const action& act) {
    const auto si = static_cast<std::size_t>(act.step);
    const bool micro_op = act.part != no_index;
    index_t& done = computed_[si];
    if (act.kind == action_kind::recompute) {
      if (done == 0 || done != step_parts_[si]) return fail_at(a, ": recomputes a step that has not been computed yet");
      return true;
    }
    if (done != 0 && (!micro_op || act.part == 0)) return fail_at(a, ": the step is computed twice (use recompute)");
    if (micro_op && act.part > 0 && (step_parts_[si] != act.parts || done != act.part)) {
      return fail_at(a, detail::concat(": micro-op ", act.part, " of ", act.parts,
                                       " comes out of order; micro-ops computed so far: ", done, " of ",
                                       step_parts_[si]));
    }
    step_parts_[si] = micro_op ? act.parts : 1;
    done = micro_op ? act.part + 1 : 1;
    return true;
  }

  /// DESIGN.md §5: only recomputable ops that are not updates (an update
  /// writes its state in place: twice would apply it twice) are
  /// recomputed; only ops with the batch (dimension 0) among their split
  /// dimensions are split, into at most `max_split_parts` (plan.hpp).
  bool op_allowed(index_t a, const action& act) {
    const problem& p = *p_;
    const auto si = static_cast<std::size_t>(act.step);
    const std::string& op = p.op_name[si];
    if (act.kind == action_kind::recompute && p.op_phase[si] == phase::update) {
      return fail_at(a, detail::concat(": op '", op, "' is an update, which writes its state in place; it is never "
                                       "recomputed"));
    }
    if (act.kind == action_kind::recompute && p.recomputable[si] == 0) {
      return fail_at(a, detail::concat(": op '", op, "' is not recomputable"));
    }
    if (auto why = split_violation(p, act.step, act.parts); !why.empty()) return fail_at(a, ": " + why);
    return true;
  }

  /// Input t of the op: its whole copy (all of it, or micro-tensor k's
  /// range), micro-tensor k of the same parts count, or every micro-tensor
  /// (the in-place merge, also how a micro-tensor of another count is read).
  template <class V>
  [[gnu::always_inline]] bool read_input(index_t a, const action& act, index_t t, V& v) {
    const auto ti = static_cast<std::size_t>(t);
    const bool split = act.part != no_index && splits_with_batch(p_->kind[ti]);
    const bytes_t bytes = p_->bytes[ti];
    const bytes_t offset = split ? bytes * act.part / act.parts : 0;
    const bytes_t size = split ? micro_bytes(bytes, act.parts, act.part) : bytes;
    v.begin_access(t, offset, size, false);
    if (current_[ti] != no_index) {
      v.read(current_[ti], offset, size);
      return true;
    }
    const index_t q = micro_parts_[ti];
    const std::span<index_t> slots = micro(t);
    if (q == 0) return fail_at(a, not_on_device(a, t));
    if (split && q == act.parts) {
      const index_t c = slots[static_cast<std::size_t>(act.part)];
      if (c == no_index) return fail_at(a, not_on_device(a, t));
      v.read(c, 0, size);
      return true;
    }
    if (!all_micro(t)) return fail_at(a, not_on_device(a, t));
    for (index_t j = 0; j < q; ++j) {
      const bytes_t lo = bytes * j / q;
      const bytes_t from = std::max(offset, lo);
      const bytes_t to = std::min(offset + size, bytes * (j + 1) / q);
      v.read(slots[static_cast<std::size_t>(j)], from - lo, to > from ? to - from : 0);
    }
    return true;
  }

  /// Output t of the op: compute makes it; recompute brings it back only if
  /// it is not on the device; micro-op k makes micro-tensor k of a sample
  /// tensor, and writes its share of a whole output micro-op 0 made.
  template <class V>
  [[gnu::always_inline]] bool make_output(index_t a, const action& act, index_t t, V& v) {
    const auto ti = static_cast<std::size_t>(t);
    const bool micro_op = act.part != no_index;
    const bool split = micro_op && splits_with_batch(p_->kind[ti]);
    const bytes_t bytes = p_->bytes[ti];
    const bytes_t offset = split ? bytes * act.part / act.parts : 0;
    const bytes_t size = split ? micro_bytes(bytes, act.parts, act.part) : bytes;
    v.begin_access(t, offset, size, true);
    index_t& whole = current_[ti];
    if (split && whole == no_index) {
      if (!enter_parts(t, act.parts)) return fail_at(a, other_parts(t));
      index_t& c = micro(t)[static_cast<std::size_t>(act.part)];
      if (c == no_index) c = v.make(t, size, act.parts, act.part);
      return true;
    }
    if (whole != no_index) {
      if (micro_op && act.kind == action_kind::compute) v.write(whole, offset, size);
      return true;
    }
    if (micro_parts_[ti] != 0) {
      if (all_micro(t)) return true;  // on the device as micro-tensors
      if (any_micro(t)) return fail_at(a, partly_on_device(t));
      micro_parts_[ti] = 0;
    }
    whole = v.make(t, bytes, 1, no_index);
    return true;
  }

  /// swap_out, swap_in, free: of the whole tensor or of micro-tensor `part`.
  template <class V>
  bool move_tensor(index_t a, const action& act, V& v) {
    const index_t t = act.tensor;
    const std::size_t tensors = p_->num_tensors();
    if (t < 0 || static_cast<std::size_t>(t) >= tensors) {
      return fail(detail::concat("action ", a, " (", to_string(act.kind), ") names tensor ", t,
                                 ", but the problem has ", tensors, " tensors"));
    }
    if (act.parts < 1) return fail_at(a, detail::concat(": parts must be at least 1, got ", act.parts));
    const auto ti = static_cast<std::size_t>(t);
    if (act.part != no_index) {
      if (!splits_with_batch(p_->kind[ti])) {
        return fail_at(a, ": only tensors of kind input, activation or gradient have micro-tensors");
      }
      return act.kind == action_kind::swap_in ? swap_in_micro(a, act, v) : release_micro(a, act, v);
    }
    index_t& c = current_[ti];
    if (c == no_index && micro_parts_[ti] != 0 && any_micro(t)) return fail_at(a, partly_on_device(t));
    micro_parts_[ti] = 0;
    const bytes_t bytes = p_->bytes[ti];
    if (act.kind == action_kind::swap_in) {
      if (c != no_index) return fail_at(a, ": the tensor is already on the device");
      if (saved_[ti] == no_index) return fail_at(a, ": the tensor was never swapped out, so no host copy exists");
      c = v.swap_in(t, bytes, saved_[ti], 0);
      return true;
    }
    if (c == no_index) {
      return fail_at(a, std::string(": releases a tensor that is not on the device") + not_on_device(a, t));
    }
    const bool saves = act.kind == action_kind::swap_out;
    if (!saves && p_->persistent(t) && !remakeable(t) && !host_copy_current(a, t)) return false;
    v.release(c, saves);
    c = no_index;
    if (saves) {
      saved_[ti] = v.save(t, bytes, 1, no_index);
      last_swap_out_[ti] = a;
    }
    return true;
  }

  /// Persistent t made this iteration by an op that may run again (not an
  /// update): a free loses nothing, the op can make it again (plan.hpp).
  [[nodiscard]] bool remakeable(index_t t) const {
    const index_t made = p_->producer[static_cast<std::size_t>(t)];
    return made != no_index && p_->recomputable[static_cast<std::size_t>(made)] != 0 &&
           p_->op_phase[static_cast<std::size_t>(made)] != phase::update;
  }

  /// DESIGN.md §5: persistent state (parameters, optimizer state) is never
  /// lost, so action `a` frees persistent t only where a host copy of it
  /// holds its latest update.
  bool host_copy_current(index_t a, index_t t) {
    const auto ti = static_cast<std::size_t>(t);
    const std::string_view kind = to_string(p_->kind[ti]);
    const std::string& name = p_->tensor_name[ti];
    if (saved_[ti] == no_index) {
      return fail_at(a, detail::concat(": loses ", kind, " '", name,
                                       "', which has no host copy (swap it out instead, or keep it)"));
    }
    const index_t update = last_update_[ti];
    if (update == no_index || last_swap_out_[ti] > update) return true;
    return fail_at(a, detail::concat(": loses the update of ", kind, " '", name, "' by ", describe(*p_, *pl_, update),
                                     ", which no later swap_out saved"));
  }

  /// swap_in(t, parts, k): from the host copy of micro-tensor k, or of the whole tensor.
  template <class V>
  bool swap_in_micro(index_t a, const action& act, V& v) {
    const index_t t = act.tensor;
    const auto ti = static_cast<std::size_t>(t);
    const auto k = static_cast<std::size_t>(act.part);
    if (current_[ti] != no_index) return fail_at(a, ": the tensor is already on the device");
    if (!enter_parts(t, act.parts)) return fail_at(a, other_parts(t));
    index_t& c = micro(t)[k];
    if (c != no_index) return fail_at(a, ": the micro-tensor is already on the device");
    const index_t own = host_parts_[ti] == act.parts ? host_micro_[host_at_[ti] + k] : no_index;
    const index_t host = own != no_index ? own : saved_[ti];
    if (host == no_index) return fail_at(a, ": neither the micro-tensor nor the tensor was swapped out");
    const bytes_t bytes = p_->bytes[ti];
    c = v.swap_in(t, micro_bytes(bytes, act.parts, act.part), host, own != no_index ? 0 : bytes * act.part / act.parts);
    return true;
  }

  /// free / swap_out(t, parts, k): releases micro-tensor k, splitting a
  /// whole t in place first (its bytes pass to `parts` micro-tensors).
  template <class V>
  bool release_micro(index_t a, const action& act, V& v) {
    const index_t t = act.tensor;
    const auto ti = static_cast<std::size_t>(t);
    const auto k = static_cast<std::size_t>(act.part);
    const bool saves = act.kind == action_kind::swap_out;
    const bytes_t bytes = p_->bytes[ti];
    if (const index_t whole = current_[ti]; whole != no_index) {
      v.split(whole);
      current_[ti] = no_index;
      micro_parts_[ti] = 0;
      enter_parts(t, act.parts);
      for (index_t j = 0; j < act.parts; ++j) {
        index_t& c = micro(t)[static_cast<std::size_t>(j)];
        c = v.split_part(whole, t, bytes * j / act.parts, micro_bytes(bytes, act.parts, j), act.parts, j);
        if (static_cast<std::size_t>(j) == k) v.release(c, saves);
      }
    } else if (micro_parts_[ti] != act.parts || micro(t)[k] == no_index) {
      return fail_at(a, std::string(": releases a micro-tensor that is not on the device") + not_on_device(a, t));
    } else {
      v.release(micro(t)[k], saves);
    }
    micro(t)[k] = no_index;
    if (!saves) return true;
    if (host_parts_[ti] != act.parts) {
      host_parts_[ti] = act.parts;
      host_used_ = true;
      host_at_[ti] = host_micro_.size();
      host_micro_.resize(host_micro_.size() + static_cast<std::size_t>(act.parts), no_index);
    }
    host_micro_[host_at_[ti] + k] = v.save(t, micro_bytes(bytes, act.parts, act.part), act.parts, act.part);
    return true;
  }

  const problem* p_ = nullptr;
  const plan* pl_ = nullptr;
  std::string why_;
  std::vector<index_t> current_;      ///< per tensor: its whole device copy, or no_index
  std::vector<index_t> saved_;        ///< per tensor: its latest whole host copy, or no_index
  std::vector<index_t> last_swap_out_;  ///< per tensor: its latest whole swap_out (offloaded state's check)
  std::vector<index_t> last_update_;  ///< per tensor: the latest update-phase compute reading it
  std::vector<index_t> computed_;     ///< per step: 1 when computed whole, else micro-ops computed
  std::vector<index_t> step_parts_;   ///< per step: 1, or the parts of its micro-ops
  std::vector<index_t> micro_parts_;  ///< per tensor: parts of its micro-tensors on the device, 0: none
  std::vector<std::size_t> micro_at_;  ///< per tensor: its slots in micro_copy_
  std::vector<index_t> micro_copy_;    ///< device copies of micro-tensors, or no_index
  std::vector<index_t> host_parts_;    ///< per tensor: parts of its micro-tensors' host copies, 0: none
  std::vector<std::size_t> host_at_;   ///< per tensor: its slots in host_micro_
  std::vector<index_t> host_micro_;    ///< host copies of micro-tensors, or no_index
  bool micro_used_ = false;            ///< micro_parts_ has an entry set
  bool host_used_ = false;             ///< host_parts_ has an entry set
};

}  // namespace memplan
