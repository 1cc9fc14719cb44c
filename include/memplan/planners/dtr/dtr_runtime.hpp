#pragma once
/// \file
/// DTR's simulator (Kirisame et al., "Dynamic Tensor Rematerialization",
/// ICLR 2021, §4 and Appendix C): `detail::dtr::dtr_runtime` runs a schedule
/// the way the prototype's simulator does (its eager-eviction runtime with
/// h_DTR^eq) and records what it did as an ordinary action list, which the
/// simulator and the validator then judge like any plan.
///
/// The rules (tools/dtr_simulator.py restates them, independently, as the
/// check on the DTR logs):
/// - Memory is the bytes of the tensors on the device, counted until the
///   framework drops a tensor (problem::held_until: a DTR log's last handle),
///   not only until its last reader: DTR runs inside the framework.
/// - An op runs: its inputs' last access is now; those on the device are
///   locked, the others rematerialised (their producers run again, their own
///   missing inputs first) in input order and locked; then, while the bytes in
///   use plus all the op's outputs and workspace exceed the budget, one
///   tensor is evicted; the op runs (the clock advances by its time), outputs
///   already on the device are kept and the new ones join the candidates;
///   the inputs are unlocked. A computed (not recomputed) op's outputs were
///   last accessed now.
/// - A tensor the framework drops is evicted at once (it may still be
///   rematerialised as an input of a recompute); constants (tensors without
///   a producer, or made from nothing by an op that may not run again) stay.
/// - Candidates: tensors on the device, unlocked, made by an op that may run
///   again, in the order they became candidates. The choice is the last one
///   with the smallest h_DTR^eq = c / (m · s) (the first with 0 ends the
///   scan): c its producer's time plus the cost of each distinct evicted
///   class next to it (its producer's inputs and the outputs of the ops that
///   read it so far), m its bytes, s the clock since its last access (a
///   score of 0 / 0 or c / 0 is infinite).
/// - An evicted tensor is a class of its own cost, merged with the classes
///   of its evicted neighbours (union-find); one rematerialised takes its
///   cost out of its class without splitting it (DTR's approximation).
/// - At the end, persistent tensors that were evicted (a DTR log's outputs,
///   made by ops that may run again) are rematerialised and locked.
/// Times are integral nanoseconds and scores exact quotients of integers,
/// so that ties fall as in the prototype.
///
/// In an arena (a run given an arena alignment; not the prototype's rules,
/// which count bytes alone): every allocation also takes an offset in an
/// arena of the budget, best fit; where none holds one of an op's
/// allocations after the evictions above, the cheapest contiguous window
/// of holes and candidates is evicted (arena_window.hpp), and the plan
/// comes with those offsets as its layout.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "memplan/error.hpp"
#include "memplan/plan.hpp"
#include "memplan/plan_builder.hpp"
#include "memplan/planners/dtr/arena_window.hpp"
#include "memplan/planners/dtr/lineage.hpp"
#include "memplan/problem.hpp"
#include "memplan/runtime/arena.hpp"
#include "memplan/runtime/layout.hpp"

namespace memplan::detail::dtr {

/// What a dtr_runtime run did besides the action list.
struct dtr_counts {
  index_t evictions = 0;       ///< heuristic evictions (deaths not counted)
  index_t recomputations = 0;  ///< recompute actions
  bytes_t peak = 0;            ///< the most bytes in use, as DTR counts them
};

class dtr_runtime {
 public:
  /// With `arena_alignment` > 0, DTR in an arena of the budget: every
  /// allocation also takes an offset there, its bytes rounded up to that
  /// alignment (`place_allocations`), and the plan comes with that layout.
  dtr_runtime(const problem& p, bytes_t budget, double time_limit_s, bytes_t arena_alignment = 0)
      : p_(&p),
        budget_(budget),
        time_limit_s_(time_limit_s),
        b_(p, "dtr", budget),
        n_(p.num_tensors()),
        material_(n_, 0),
        locks_(n_, 0),
        last_access_(n_, 0),
        node_(n_, no_index),
        cost_ns_(n_, -1),
        next_(n_, no_index),
        prev_(n_, no_index),
        in_pool_(n_, 0),
        dies_after_(p.num_steps()),
        align_(arena_alignment),
        offset_(arena_alignment > 0 ? n_ : 0, -1) {
    if (align_ > 0) arena_.emplace(budget / align_ * align_);
    const std::vector<index_t> death = death_steps(p, true);
    for (std::size_t t = 0; t < n_; ++t) {
      const auto ti = static_cast<index_t>(t);
      const index_t made = p.producer[t];
      if (made != no_index && p.recomputable[static_cast<std::size_t>(made)] != 0) cost_ns_[t] = ns(made);
      if (made == no_index) make_present(ti);
      // Constants stay (the prototype pins them), and so does what the
      // outputs are remade from at the end (keep_outputs).
      const bool constant = made == no_index || (cost_ns_[t] < 0 && p.inputs(made).empty());
      const index_t dies = std::max(death[t], p.held_until(ti));
      const bool last = dies + 1 == static_cast<index_t>(p.num_steps());
      if (!p.persistent(ti) && !constant && !(last && cost_ns_[t] < 0)) {
        dies_after_[static_cast<std::size_t>(dies)].push_back(ti);
      }
    }
  }

  struct result {
    plan pl;
    dtr_counts counts;
  };

  result run() && {
    const auto n = static_cast<index_t>(p_->num_steps());
    bool ok = (used_ <= budget_ && !unplaced_) ||
              fail(failure_kind::out_of_memory, concat("the tensors without a producer need ", used_, " bytes"));
    for (index_t s = 0; ok && s < n; ++s) ok = step(s);
    if (ok) ok = keep_outputs();
    counts_.peak = peak_;
    if (ok) b_.set_best_peak(peak_);
    plan pl = std::move(b_).finish();
    if (ok) leave_out_last_frees(*p_, pl);
    if (ok && arena_) lay_out(pl);
    return {std::move(pl), counts_};
  }

  /// A free after which no action reads or makes its tensor is left out:
  /// the tensor then goes after its last reader (plan.hpp's automatic
  /// release), no later than DTR lets it go. Persistent tensors keep
  /// theirs: they never go by themselves.
  static void leave_out_last_frees(const problem& p, plan& pl) {
    const std::size_t n = pl.actions.size();
    std::vector<std::uint8_t> seen(p.num_tensors(), 0);
    std::vector<std::uint8_t> keep(n, 1);
    for (std::size_t a = n; a-- > 0;) {
      const action& x = pl.actions[a];
      if (x.kind == action_kind::free) {
        if (seen[at(x.tensor)] == 0 && !p.persistent(x.tensor)) keep[a] = 0;
        seen[at(x.tensor)] = 1;
        continue;
      }
      for (const index_t t : p.inputs(x.step)) seen[at(t)] = 1;
      for (const index_t t : p.outputs(x.step)) seen[at(t)] = 1;
    }
    plan kept = pl;
    kept.actions.clear();
    kept.waits.clear();
    kept.wait_begin.assign(1, 0);
    std::vector<index_t> renumbered(n, no_index);
    std::vector<index_t> on;
    for (std::size_t a = 0; a < n; ++a) {
      if (keep[a] == 0) continue;
      on.clear();
      for (const index_t w : pl.waits_of(a)) {
        if (renumbered[at(w)] != no_index) on.push_back(renumbered[at(w)]);
      }
      renumbered[a] = kept.push(pl.actions[a], on);
    }
    pl = std::move(kept);
  }

 private:
  [[nodiscard]] static std::size_t at(index_t t) { return static_cast<std::size_t>(t); }
  /// Step s's time in integral nanoseconds (a DTR log's own unit).
  [[nodiscard]] std::int64_t ns(index_t s) const {
    return std::llround(p_->time_us[static_cast<std::size_t>(s)] * 1e3);
  }

  bool step(index_t s) {
    step_ = s;
    step_recomputes_ = 0;
    if (out_of_time()) {
      return fail(failure_kind::time_limit,
                  concat("the time limit of ", time_limit_s_, " s ran out before the last step"));
    }
    if (!materialise(s, action_kind::compute, no_index)) return false;
    for (const index_t t : p_->outputs(s)) last_access_[at(t)] = clock_;
    for (const index_t t : dies_after_[static_cast<std::size_t>(s)]) {
      if (material_[at(t)] != 0) evict(t);
    }
    return true;
  }

  /// Runs step u (compute), or again for its output `wanted` (recompute):
  /// inputs present and locked, room made, then the op.
  bool materialise(index_t u, action_kind kind, index_t wanted) {
    const auto inputs = p_->inputs(u);
    for (const index_t in : inputs) last_access_[at(in)] = clock_;
    std::vector<index_t> missing;
    for (const index_t in : inputs) {
      if (material_[at(in)] != 0) {
        lock(in);
      } else {
        missing.push_back(in);
      }
    }
    for (const index_t in : missing) {
      if (material_[at(in)] == 0 && !rematerialise(in)) return false;
      lock(in);
    }
    bytes_t need = p_->workspace[static_cast<std::size_t>(u)];
    for (const index_t t : p_->outputs(u)) need += p_->bytes[at(t)];
    if (!make_room(need, u) || (arena_ && !place_allocations(u, wanted))) return false;
    run_op(u, kind, wanted, need);
    for (const index_t in : inputs) unlock(in);
    return true;
  }

  /// The op runs: every output is allocated (those already present are
  /// given back after), the new ones become candidates, their classes lose
  /// their cost.
  void run_op(index_t u, action_kind kind, index_t wanted, bytes_t need) {
    clock_ += ns(u);
    used_ += need;
    peak_ = std::max(peak_, used_);
    used_ -= p_->workspace[static_cast<std::size_t>(u)];
    if (arena_) arena_->deallocate_extent(workspace_offset_, extent(p_->workspace[static_cast<std::size_t>(u)]));
    ++ops_;
    kind == action_kind::compute ? b_.compute(u) : b_.recompute(u);
    const auto outputs = p_->outputs(u);
    made_.clear();
    for (const index_t t : outputs) {
      if (t == wanted) continue;
      if (material_[at(t)] != 0) {
        used_ -= p_->bytes[at(t)];
      } else {
        made_.push_back(t);
      }
    }
    if (wanted != no_index) made_.push_back(wanted);
    for (const index_t t : made_) {
      if (node_[at(t)] != no_index) {
        value_[at(find(node_[at(t)]))] -= cost_ns_[at(t)];
        node_[at(t)] = no_index;
      }
      make_present(t);
    }
  }

  /// Recomputes t's producer (t was evicted and is read again).
  bool rematerialise(index_t t) {
    const index_t u = p_->producer[at(t)];
    // More recomputes for one step than there are steps: what is left is
    // evicting and remaking the same tensors (thrashing).
    if (++step_recomputes_ > static_cast<index_t>(p_->num_steps())) {
      return fail(failure_kind::out_of_memory,
                  concat("rematerialisation thrashes (", step_recomputes_, " recomputes for one step)"));
    }
    ++counts_.recomputations;
    b_.decide(t, decision::recompute);
    return materialise(u, action_kind::recompute, t);
  }

  /// Evicts until `need` more bytes fit the budget.
  bool make_room(bytes_t need, index_t u) {
    while (used_ + need > budget_) {
      const index_t t = choose();
      if (t == no_index) {
        return fail(failure_kind::out_of_memory, concat("op '", p_->op_name[static_cast<std::size_t>(u)], "' needs ",
                                                        need, " bytes with ", used_, " in use; nothing left to evict"));
      }
      evict(t);
      ++counts_.evictions;
    }
    return true;
  }

  // ---- the arena ----

  /// Gives op u's new outputs (those not on the device; for a recompute,
  /// `wanted` and the missing others) and its workspace offsets, largest
  /// first, best fit; where one finds no hole, the cheapest window that
  /// holds it is evicted (`evict_window`). The outputs already on the
  /// device are locked meanwhile: they stay.
  bool place_allocations(index_t u, index_t wanted) {
    std::vector<index_t> fresh;  // the outputs to place; no_index: the workspace
    std::vector<index_t> kept;
    for (const index_t t : p_->outputs(u)) {
      (t == wanted || material_[at(t)] == 0 ? fresh : kept).push_back(t);
    }
    fresh.push_back(no_index);
    const auto bytes_of = [&](index_t t) { return t == no_index ? p_->workspace[at(u)] : p_->bytes[at(t)]; };
    std::ranges::stable_sort(fresh, [&](index_t a, index_t b) { return bytes_of(a) > bytes_of(b); });
    for (const index_t t : kept) lock(t);
    bool ok = true;
    placed_.clear();
    for (const index_t t : fresh) {
      const bytes_t bytes = bytes_of(t);
      std::optional<bytes_t> o;
      while (ok && !(o = arena_->allocate_best_fit(extent(bytes)))) ok = evict_window(extent(bytes));
      if (!ok) {
        fail(failure_kind::out_of_memory, concat("op '", p_->op_name[at(u)], "' needs ", bytes,
                                                 " contiguous bytes; no window of the arena holds them"));
        break;
      }
      (t == no_index ? workspace_offset_ : offset_[at(t)]) = *o;
      placed_.emplace_back(*o, *o + extent(bytes));
      made_at_.push_back({ops_, t, *o});
    }
    for (const index_t t : kept) unlock(t);
    if (!ok) return false;
    for (const index_t t : fresh) {
      if (t != no_index && p_->bytes[at(t)] > 0) resident_.emplace(offset_[at(t)], t);
    }
    return true;
  }

  /// Evicts the candidates in the cheapest window of `size` contiguous
  /// bytes made only of holes and candidates (arena_window.hpp): a
  /// candidate costs h_DTR^eq times its bytes (the recompute time per unit
  /// of staleness it gives up). \returns false if no window exists.
  bool evict_window(bytes_t size) {
    std::vector<arena_block> taken;
    for (const auto& [o, t] : resident_) {
      // A score of c / 0 (just read) counts as very dear, not infinite: the window sums stay finite.
      const long double cost =
          in_pool_[at(t)] != 0 ? std::min(score(t) * static_cast<long double>(p_->bytes[at(t)]), 1e30L) : -1;
      taken.push_back({o, o + extent(p_->bytes[at(t)]), t, cost});
    }
    for (const auto& [lo, hi] : placed_) taken.push_back({lo, hi, no_index, -1});
    std::ranges::sort(taken, {}, &arena_block::lo);
    std::vector<arena_block> line;  // holes and blocks in offset order
    bytes_t top = 0;
    for (const arena_block& x : taken) {
      if (x.lo > top) line.push_back({top, x.lo, no_index, 0});
      line.push_back(x);
      top = x.hi;
    }
    if (arena_->capacity() > top) line.push_back({top, arena_->capacity(), no_index, 0});
    const auto [first, last] = cheapest_window(line, size);
    bool evicted = false;
    for (std::size_t k = first; k < last; ++k) {
      if (line[k].tensor == no_index) continue;
      evict(line[k].tensor);
      ++counts_.evictions;
      evicted = true;
    }
    return evicted;
  }

  /// The arena bytes a block of `bytes` takes.
  [[nodiscard]] bytes_t extent(bytes_t bytes) const { return (bytes + align_ - 1) / align_ * align_; }

  /// Sets `pl`'s layout (plan_layout.hpp) to the offsets the arena gave:
  /// its device allocations are, in order, the tensors there at the start
  /// and, per op action, what it makes, as `made_at_` recorded (DTR's plans
  /// neither swap nor split).
  void lay_out(plan& pl) const {
    const runtime::layout l = runtime::layout_of(*p_, pl);
    std::vector<index_t> rank(pl.actions.size(), no_index);
    index_t ops = 0;
    for (std::size_t a = 0; a < pl.actions.size(); ++a) {
      if (pl.actions[a].kind != action_kind::free) rank[a] = ops++;
    }
    std::vector<std::size_t> first(static_cast<std::size_t>(ops) + 1, 0);  // made_at_ is in op order
    for (const made_at& m : made_at_) ++first[static_cast<std::size_t>(m.op) + 1];
    for (std::size_t k = 1; k < first.size(); ++k) first[k] += first[k - 1];
    pl.offsets.clear();
    pl.arena_bytes = 0;
    for (const runtime::buffer& b : l.device) {
      bytes_t o = -1;
      if (b.maker == l.load) {
        o = offset_[at(b.tensor)];
      } else {
        const auto r = static_cast<std::size_t>(rank[at(b.maker)]);
        for (std::size_t k = first[r]; k < first[r + 1]; ++k) {
          if (made_at_[k].tensor == b.tensor) o = made_at_[k].offset;
        }
      }
      if (b.bytes == 0) o = std::max<bytes_t>(o, 0);  // an empty buffer may sit anywhere
      MEMPLAN_EXPECTS(o >= 0, error, "dtr: the arena gave ",
                      b.tensor == no_index ? std::string("a workspace")
                                           : concat("tensor '", p_->tensor_name[at(b.tensor)], "'"),
                      " no offset where action ", b.maker, " makes it (a bug: please report it)");
      pl.offsets.push_back(o);
      if (b.bytes > 0) pl.arena_bytes = std::max(pl.arena_bytes, o + extent(b.bytes));
    }
  }

  // ---- candidates (in the order they became candidates) and locks ----

  void make_present(index_t t) {
    if (arena_ && p_->producer[at(t)] == no_index) {
      const auto o = arena_->allocate_best_fit(extent(p_->bytes[at(t)]));
      offset_[at(t)] = o.value_or(0);
      if (o && p_->bytes[at(t)] > 0) resident_.emplace(*o, t);
      unplaced_ = unplaced_ || !o;  // fails the run (run())
    }
    material_[at(t)] = 1;
    used_ += p_->producer[at(t)] == no_index ? p_->bytes[at(t)] : 0;  // without a producer: there from the start
    peak_ = std::max(peak_, used_);
    join_pool(t);
  }
  void join_pool(index_t t) {
    if (in_pool_[at(t)] != 0 || locks_[at(t)] > 0 || cost_ns_[at(t)] < 0) return;
    in_pool_[at(t)] = 1;
    prev_[at(t)] = tail_;
    next_[at(t)] = no_index;
    (tail_ == no_index ? head_ : next_[at(tail_)]) = t;
    tail_ = t;
  }
  void leave_pool(index_t t) {
    if (in_pool_[at(t)] == 0) return;
    in_pool_[at(t)] = 0;
    (prev_[at(t)] == no_index ? head_ : next_[at(prev_[at(t)])]) = next_[at(t)];
    (next_[at(t)] == no_index ? tail_ : prev_[at(next_[at(t)])]) = prev_[at(t)];
  }
  void lock(index_t t) {
    if (locks_[at(t)]++ == 0) leave_pool(t);
  }
  void unlock(index_t t) {
    if (--locks_[at(t)] == 0) join_pool(t);
  }

  // ---- h_DTR^eq ----

  /// t's neighbours now (lineage.hpp).
  template <class F>
  void for_each_neighbour(index_t t, F f) const {
    detail::dtr::for_each_neighbour(*p_, t, step_, f);
  }

  [[nodiscard]] long double score(index_t t) const {
    std::int64_t cost = cost_ns_[at(t)];
    roots_.clear();
    for_each_neighbour(t, [&](index_t n) {
      if (n == t || node_[at(n)] == no_index) return;
      const index_t r = find(node_[at(n)]);
      if (std::ranges::find(roots_, r) != roots_.end()) return;
      roots_.push_back(r);
      cost += value_[at(r)];
    });
    const auto denominator =
        static_cast<long double>(p_->bytes[at(t)]) * static_cast<long double>(clock_ - last_access_[at(t)]);
    return denominator > 0 ? static_cast<long double>(cost) / denominator
                           : std::numeric_limits<long double>::infinity();
  }
  [[nodiscard]] index_t choose() const {
    index_t best = no_index;
    long double low = std::numeric_limits<long double>::infinity();
    for (index_t t = head_; t != no_index; t = next_[at(t)]) {
      const long double h = score(t);
      if (h <= low) low = h, best = t;
      if (h == 0) break;
    }
    return best;
  }
  /// t leaves the device without a copy and becomes an evicted class.
  void evict(index_t t) {
    if (arena_) {
      arena_->deallocate_extent(offset_[at(t)], extent(p_->bytes[at(t)]));
      if (p_->bytes[at(t)] > 0) resident_.erase(offset_[at(t)]);  // a zero-byte tensor takes no room
    }
    material_[at(t)] = 0;
    used_ -= p_->bytes[at(t)];
    leave_pool(t);
    b_.free(t);
    if (cost_ns_[at(t)] < 0) return;  // cannot come back: no class
    node_[at(t)] = static_cast<index_t>(uf_parent_.size());
    uf_parent_.push_back(node_[at(t)]);
    value_.push_back(cost_ns_[at(t)]);
    for_each_neighbour(t, [&](index_t n) {
      if (n == t || node_[at(n)] == no_index) return;
      const index_t a = find(node_[at(n)]);
      const index_t b = find(node_[at(t)]);
      if (a == b) return;
      uf_parent_[at(a)] = b;
      value_[at(b)] += value_[at(a)];
    });
  }
  [[nodiscard]] index_t find(index_t x) const {
    while (uf_parent_[at(x)] != x) {
      auto& up = uf_parent_[at(x)];
      up = uf_parent_[at(up)];  // path halving
      x = up;
    }
    return x;
  }

  /// The framework's outputs (persistent tensors with a producer) end on
  /// the device: those evicted are rematerialised, then all are locked.
  bool keep_outputs() {
    step_ = static_cast<index_t>(p_->num_steps()) - 1;
    for (std::size_t t = 0; t < n_; ++t) {
      const auto ti = static_cast<index_t>(t);
      if (!p_->persistent(ti) || p_->producer[t] == no_index) continue;
      step_recomputes_ = 0;
      if (material_[t] == 0 && !rematerialise(ti)) return false;
      lock(ti);
    }
    return true;
  }

  [[nodiscard]] bool out_of_time() const {
    return time_limit_s_ > 0 &&
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count() >= time_limit_s_;
  }
  /// Stops the run, infeasible: `kind` and `why` at the current step.
  bool fail(failure_kind kind, const std::string& why) {
    const auto s = static_cast<std::size_t>(step_);
    b_.infeasible(
        kind, concat("dtr: at step ", s, " (op '", p_->op_name[s], "'), ", why, "; budget ", budget_, " bytes"), peak_);
    return false;
  }

  const problem* p_;
  bytes_t budget_;
  double time_limit_s_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  plan_builder b_;
  std::size_t n_;
  dtr_counts counts_;
  index_t step_ = 0;
  index_t step_recomputes_ = 0;
  std::int64_t clock_ = 1;  ///< ns; the prototype's clock starts at 1
  bytes_t used_ = 0;
  bytes_t peak_ = 0;
  // Per tensor.
  std::vector<std::uint8_t> material_;
  std::vector<std::int32_t> locks_;
  std::vector<std::int64_t> last_access_;
  std::vector<index_t> node_;          ///< its class node while evicted, or no_index
  std::vector<std::int64_t> cost_ns_;  ///< its producer's time; -1: cannot be recomputed
  std::vector<index_t> next_;          ///< the candidate list
  std::vector<index_t> prev_;
  std::vector<std::uint8_t> in_pool_;
  index_t head_ = no_index;
  index_t tail_ = no_index;
  std::vector<std::vector<index_t>> dies_after_;  ///< per step, the tensors dropped after it
  std::vector<index_t> made_;
  // Evicted classes.
  mutable std::vector<index_t> uf_parent_;
  std::vector<std::int64_t> value_;
  mutable std::vector<index_t> roots_;
  // The arena (with an arena alignment).
  bytes_t align_;  ///< the arena's alignment; 0: no arena
  std::optional<runtime::arena> arena_;
  std::vector<bytes_t> offset_;           ///< per tensor: its offset while on the device
  std::map<bytes_t, index_t> resident_;   ///< offset -> tensor on the device
  bytes_t workspace_offset_ = 0;
  std::vector<std::pair<bytes_t, bytes_t>> placed_;  ///< the blocks placed for the op so far: [lo, hi)
  /// Where each op action (by its rank among them, `ops_` so far) put what
  /// it made: a tensor, or (no_index) its workspace.
  struct made_at {
    index_t op = 0;
    index_t tensor = no_index;
    bytes_t offset = 0;
  };
  std::vector<made_at> made_at_;
  index_t ops_ = 0;
  bool unplaced_ = false;  ///< a tensor without a producer found no room
};

/// DTR's simulator on `p` under `budget` (see the file comment). An op that
/// cannot be made room for makes the plan infeasible (cut at that step),
/// as does running past `time_limit_s` (0: no limit).
[[nodiscard]] inline dtr_runtime::result run_dtr(const problem& p, bytes_t budget, double time_limit_s = 0,
                                                bytes_t arena_alignment = 0) {
  return dtr_runtime(p, budget, time_limit_s, arena_alignment).run();
}

}  // namespace memplan::detail::dtr
