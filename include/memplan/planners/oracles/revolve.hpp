#pragma once
/// \file
/// `revolve`: binomial checkpointing for a chain of l steps (A. Griewank,
/// "Achieving logarithmic growth of temporal and spatial complexity in
/// reverse automatic differentiation", 1992, Prop. 1; Griewank and Walther,
/// "Algorithm 799: revolve", ACM TOMS 2000, Eq. 2).
///
/// Revolve's model: states x_0 -> x_1 -> ... -> x_l, step i maps x_{i-1} to
/// x_i; the adjoint of step i needs x_{i-1}, and the step is re-run right
/// before its adjoint (the "taping" run, not counted). s checkpoint slots
/// hold states (x_0 is in one of them); one more working state is advanced
/// in place. The least number of forward steps to reverse the chain is
///   t(l, s) = r*l - C(s+r, s+1),  r the smallest integer with C(s+r, s) >= l
/// (Griewank 1992, Prop. 1; Griewank-Walther 2000 Eq. 2), and it obeys the
/// recursion t(l, s) = min_{0<m<l} m + t(l-m, s-1) + t(m, s), t(1, s) = 0,
/// t(l, 1) = l(l-1)/2: advance m steps, store x_m in a free slot, reverse
/// the last l-m steps with one slot fewer, then the first m with all s.
///
/// In memplan a chain is: forward ops f_1..f_l, f_j reading a_{j-1} (the
/// only output of f_{j-1}; f_1 reads only tensors no op makes, x_0 among
/// them), and backward ops each reading at most one state a_j, in
/// non-increasing j. A backward op reading a_j belongs to the adjoint of
/// step j+1 (of step l when j = l: the loss reads a_l). The t(l, s) forward
/// steps include the first sweep x_0 -> x_{l-1}, which is the ordinary
/// forward pass, and memplan's backward op b_i reads a_{i-1} itself, so the
/// plan recomputes t(l, s) - (l - 1) ops.
///
/// Slots and budget: a memplan op allocates its output while its input is
/// still on the device, so advancing takes two buffers where revolve's
/// in-place step takes one. On a chain whose states all take A bytes and
/// whose gradients take G <= A bytes, the revolve plan with s < l slots
/// peaks at the loss, holding x_0, the s-1 stored states, a_{l-1}, a_l and
/// the loss gradient: (s + 2) A + G (plus any parameters), and s = 1 needs
/// the least memory any recompute plan can have there. The planner
/// simulates the plan for s = l, l-1, ..., 1 and returns the first that
/// fits the budget (the most slots, the fewest recomputations); option
/// `slots` fixes s instead.

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "memplan/plan_builder.hpp"
#include "memplan/error.hpp"
#include "memplan/planners/planner.hpp"
#include "memplan/sim/simulator.hpp"

namespace memplan {

namespace detail::revolve {

/// C(n, k), saturated at `cap` (the closed form only compares it with l).
[[nodiscard]] constexpr std::int64_t binomial(std::int64_t n, std::int64_t k, std::int64_t cap) noexcept {
  if (k < 0 || k > n) return 0;
  k = std::min(k, n - k);
  std::int64_t c = 1;
  for (std::int64_t i = 1; i <= k; ++i) {
    // c * (n - k + i) / i stays exact: c = C(n-k+i-1, i-1).
    const std::int64_t num = n - k + i;
    if (c > cap / num + 1) return cap;
    c = c * num / i;
    if (c >= cap) return cap;
  }
  return c;
}

}  // namespace detail::revolve

/// The least number of forward steps that reverse a chain of `steps` steps
/// with `slots` checkpoint slots (x_0 in one of them): r*l - C(s+r, s+1),
/// r the smallest integer with C(s+r, s) >= l (Griewank 1992, Prop. 1).
/// \throws invalid_argument unless steps >= 1 and slots >= 1.
[[nodiscard]] inline std::int64_t revolve_forward_steps(std::int64_t steps, std::int64_t slots) {
  MEMPLAN_EXPECTS(steps >= 1 && slots >= 1, invalid_argument, "revolve: needs at least one step and one slot, got ",
                  steps, " steps and ", slots, " slots");
  constexpr std::int64_t cap = std::numeric_limits<std::int64_t>::max() / 4;
  std::int64_t r = 0;
  while (detail::revolve::binomial(slots + r, slots, cap) < steps) ++r;
  return r * steps - detail::revolve::binomial(slots + r, slots + 1, cap);
}

/// The `revolve` planner: Revolve's optimal schedule for a chain (see the file comment).
struct revolve_planner {
  /// `--slots`.
  static constexpr std::array<planner_option, 1> cli_options{
      {{"slots", "N", "checkpoint slots (default: the most that fit the budget)"}}};

  /// Plans `p` with the fewest forward steps for its checkpoint slots; gives
  /// up (planner_gave_up) where `p` is not a chain.
  plan operator()(const problem& p, const device_spec& dev, bytes_t budget, const planner_options& o) const {
    plan_builder refused(p, "revolve", budget);
    const chain c = find_chain(p);
    if (!c.why_not.empty()) {
      refused.infeasible(failure_kind::planner_gave_up, "revolve: " + c.why_not, p.baseline_peak());
      return std::move(refused).finish();
    }
    const auto l = static_cast<std::int64_t>(c.forward.size());
    const auto fixed = static_cast<std::int64_t>(option_number(o, "slots", 0, 1, 1e9));
    simulator sim;
    for (std::int64_t s = fixed > 0 ? fixed : l;; --s) {
      plan pl = emit(p, c, s, budget);
      const report r = sim.run(p, pl, dev, budget);
      if (r.feasible) {
        pl.best_peak = r.peak_bytes;
        return pl;
      }
      if (fixed == 0 && s > 1) continue;
      // The fewest slots did not fit either: that plan, marked infeasible.
      pl.best_peak = sim.run(p, pl, dev, simulator::unlimited).peak_bytes;
      pl.feasible = false;
      pl.kind = failure_kind::out_of_memory;
      pl.reason = detail::concat("revolve: the plan with ", s, s == 1 ? " slot" : " slots", " needs ", pl.best_peak,
                                 " bytes (", format_bytes(pl.best_peak), ") at its peak; the budget is ", budget,
                                 " bytes (", format_bytes(budget), ")");
      return pl;
    }
  }

 private:
  /// The chain's steps: forward[j-1] is f_j; state_of[s] is the state a
  /// backward step s reads (no_index: none).
  struct chain {
    std::vector<index_t> forward;
    std::vector<index_t> state_of;
    std::string why_not;  ///< empty when p is a chain
  };

  /// One event of the revolve schedule: advance from state `from` to `to`
  /// (storing `to` in a slot or not), or the adjoint of step `to`.
  struct event {
    bool adjoint;
    std::int64_t from;
    std::int64_t to;
    bool store;
  };

  static chain find_chain(const problem& p) {
    chain c;
    const std::size_t n = p.num_steps();
    std::vector<index_t> state(p.num_tensors(), no_index);  // tensor -> j when it is a_j (j >= 1)
    std::size_t s = 0;
    for (; s < n && p.op_phase[s] == phase::forward; ++s) {
      const auto si = static_cast<index_t>(s);
      const auto j = static_cast<index_t>(s + 1);
      if (p.outputs(si).size() != 1 || !p.recomputable[s]) {
        c.why_not = detail::concat("not a chain: forward op '", p.op_name[s], "' must make exactly one tensor and "
                                   "be recomputable");
        return c;
      }
      for (const index_t t : p.inputs(si)) {
        const index_t made = p.producer[static_cast<std::size_t>(t)];
        if (made != no_index && state[static_cast<std::size_t>(t)] != j - 1) {
          c.why_not = detail::concat("not a chain: forward op '", p.op_name[s], "' reads '",
                                     p.tensor_name[static_cast<std::size_t>(t)], "', which is not the output of the ",
                                     "forward op just before it");
          return c;
        }
      }
      state[static_cast<std::size_t>(p.outputs(si)[0])] = j;
      c.forward.push_back(si);
    }
    if (c.forward.empty()) {
      c.why_not = "not a chain: the schedule does not start with a forward op";
      return c;
    }
    c.state_of.assign(n, no_index);
    index_t lowest = static_cast<index_t>(c.forward.size());
    for (; s < n; ++s) {
      if (p.op_phase[s] == phase::forward) {
        c.why_not = detail::concat("not a chain: forward op '", p.op_name[s], "' comes after a backward op");
        return c;
      }
      for (const index_t t : p.inputs(static_cast<index_t>(s))) {
        const index_t j = state[static_cast<std::size_t>(t)];
        if (j == no_index) continue;
        if (c.state_of[s] != no_index || j > lowest) {
          c.why_not = detail::concat("not a chain: backward op '", p.op_name[s], "' reads state '",
                                     p.tensor_name[static_cast<std::size_t>(t)],
                                     "' out of reverse order or beside another state");
          return c;
        }
        c.state_of[s] = j;
        lowest = j;
      }
    }
    if (std::ranges::all_of(c.state_of, [](index_t j) { return j == no_index; })) {
      c.why_not = "not a chain: no backward op reads a state of the forward ops";
    }
    return c;
  }

  /// Reverses steps a+1..a+l from stored x_a with s slots (Griewank's
  /// recursion); m is the split the closed form makes cheapest.
  static void schedule(std::int64_t a, std::int64_t l, std::int64_t s, std::vector<event>& out) {
    if (l == 1) {
      out.push_back({true, a, a + 1, false});
      return;
    }
    if (s == 1) {
      for (std::int64_t i = l; i >= 1; --i) {
        if (i > 1) out.push_back({false, a, a + i - 1, false});
        out.push_back({true, a, a + i, false});
      }
      return;
    }
    std::int64_t best = 1;
    std::int64_t best_steps = std::numeric_limits<std::int64_t>::max();
    for (std::int64_t m = 1; m < l; ++m) {
      const std::int64_t steps = m + revolve_forward_steps(l - m, s - 1) + revolve_forward_steps(m, s);
      if (steps < best_steps) {
        best_steps = steps;
        best = m;
      }
    }
    out.push_back({false, a, a + best, true});
    schedule(a + best, l - best, s - 1, out);
    schedule(a, best, s, out);
  }

  /// The memplan plan of revolve with s slots.
  static plan emit(const problem& p, const chain& c, std::int64_t s, bytes_t budget) {
    const auto l = static_cast<std::int64_t>(c.forward.size());
    std::vector<event> events;
    schedule(0, l, std::min(s, l), events);
    plan_builder b(p, "revolve", budget);
    std::vector<std::uint8_t> computed(static_cast<std::size_t>(l) + 1, 0);
    auto run = [&](std::int64_t j) {  // f_j
      const index_t step = c.forward[static_cast<std::size_t>(j - 1)];
      if (computed[static_cast<std::size_t>(j)]) {
        b.recompute(step);
        b.decide(p.outputs(step)[0], decision::recompute);
      } else {
        b.compute(step);
      }
      computed[static_cast<std::size_t>(j)] = 1;
    };
    std::size_t next = 0;
    std::int64_t reached = l + 1;  // the latest adjoint step the events have reached
    // Runs events through the adjoint of step `target`.
    auto reach = [&](std::int64_t target) {
      while (target < reached && next < events.size()) {
        const event& e = events[next++];
        if (e.adjoint) {
          if (e.to == l) run(l);
          reached = e.to;
          continue;
        }
        for (std::int64_t j = e.from + 1; j <= e.to; ++j) {
          run(j);
          // Intermediate states are released as soon as the next step has read them.
          if (j - 1 > e.from) b.free(p.outputs(c.forward[static_cast<std::size_t>(j - 2)])[0]);
        }
      }
    };
    for (std::size_t st = c.forward.size(); st < p.num_steps(); ++st) {
      const index_t j = c.state_of[st];
      if (j != no_index) reach(std::min<std::int64_t>(j + 1, l));
      b.compute(static_cast<index_t>(st));
    }
    return std::move(b).finish();
  }
};
static_assert(planner<revolve_planner>);

}  // namespace memplan
