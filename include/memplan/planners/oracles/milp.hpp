#pragma once
/// \file
/// `milp`: Checkmate (Jain et al., "Checkmate: Breaking the Memory Wall with
/// Optimal Tensor Rematerialization", MLSys 2020) §4, Eq. 1-3: the
/// minimum-time recompute-only plan under a budget as an integer program,
/// solved with CBC. Built only with MEMPLAN_ENABLE_MILP (it links COIN-OR
/// CBC).
///
/// Stages t = 0..n-1 follow the schedule: stage t runs op t for the first
/// time, after recomputing in schedule order whatever earlier ops it picks
/// (Checkmate's frontier-advancing stages, §4.2). Variables:
///   R[t,k] in {0,1}  op k runs in stage t (R[t,t] = 1; R[t,k] = 0 for k > t
///                    and for ops that may not be recomputed)
///   S[t,v] in {0,1}  tensor v is on the device when stage t starts
///                    (Checkmate's checkpoint matrix)
///   U[t,k] >= 0      bytes on the device while op k runs in stage t
///   FREE[t,v,k] in [0,1]  v is released after op k in stage t
/// Objective (Checkmate Eq. 1): min sum_t sum_k time_k R[t,k]. A
/// recompute-only plan runs on the compute stream alone with no waits, so
/// this is exactly the simulator's iteration time.
/// Constraints:
///   (1a) R[t,k] <= R[t,p] + S[t,v]  for each input v of k made by op p
///        (R[t,k] <= S[t,v] for a v no op makes: inputs are never remade)
///   (1b) S[t+1,v] <= S[t,v] + R[t,p]  (keep only what was there or was made)
///        S[0,v] = 1 for the tensors no op makes, 0 for the others
///   (m)  R[t,k] + S[t,o] <= 1 for k < t, o an output of k: memplan's
///        recompute makes only outputs that are not on the device, so a
///        recomputed op brings back all its outputs (Checkmate: one output)
///   (2)  U[t,k0] = sum_v bytes_v S[t,v] + alloc(t,k0), k0 the first op
///        stage t may run; U[t,k] = U[t,k'] - sum_v bytes_v FREE[t,v,k'] +
///        alloc(t,k), k' the op before k (Checkmate Eq. 2-3), where
///        alloc(t,k) = sum_{o in outputs(k)} bytes_o R[t,k]
///   (3)  U[t,k] + workspace_k R[t,k] <= budget
///   (4)  FREE[t,v,k] <= R[t,k], <= 1 - S[t+1,v], <= 1 - R[t,j] for every
///        later op j <= t that makes or reads v: a tensor goes after its
///        last use in the stage unless it is kept for the next. Checkmate
///        writes FREE as that product and linearises it with one big-M row;
///        one row per factor is tighter, and since FREE only lowers U the
///        optimum takes FREE at its upper bound, so it may be continuous.
/// memplan's memory rules (plan.hpp) match (2)-(4): an op allocates its
/// outputs and workspace when it starts and frees after it ends; memplan
/// frees a dead tensor after its last reader by itself. The plan emits a
/// `free` only where (4) releases a tensor that a later stage recomputes.
/// Parameters and optimizer state are constant bytes; tensors no op reads
/// after stage t are fixed out of S (Checkmate prunes the same way).
///
/// Outside Checkmate's model (so not searched): swaps, splits, running an
/// op twice in one stage. The solver stops at `planner_options::time_limit_s`
/// (0: no limit) and then returns its best plan with the gap in `reason`.
/// Graphs of more than `max-ops` ops (default 120) are refused: the program
/// has O(n^2) variables. `seed-with a,b` runs those planners and gives CBC
/// their plans as starting incumbents (MIP starts) where they fit the
/// stages (recompute only, each op at most once per stage, in schedule
/// order): CBC's LP bound is weak past about 40 ops, so without a start it
/// may find no plan in its time.

#include <CbcModel.hpp>
#include <CoinPackedMatrix.hpp>
#include <OsiClpSolverInterface.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "memplan/plan_builder.hpp"
#include "memplan/error.hpp"
#include "memplan/planners/planner.hpp"
#include "memplan/sim/simulator.hpp"

namespace memplan {

namespace detail::milp {

/// A column of the program, or a fixed value where the variable is pruned.
struct var {
  int col = -1;       ///< -1: fixed to `value`
  double value = 0;
};

/// The program in row form, handed to CBC at the end.
class program {
 public:
  var add(double lo, double hi, double cost, bool integer) {
    lo_.push_back(lo);
    hi_.push_back(hi);
    cost_.push_back(cost);
    integer_.push_back(integer ? 1 : 0);
    return {static_cast<int>(lo_.size()) - 1, 0};
  }
  /// Starts the row lo <= sum <= hi; `term` adds to it.
  void row(double lo, double hi) {
    row_lo_.push_back(lo);
    row_hi_.push_back(hi);
  }
  /// Adds coef * v to the last row (a fixed v moves to its bounds).
  void term(double coef, var v) {
    if (v.col < 0) {
      row_lo_.back() -= coef * v.value;
      row_hi_.back() -= coef * v.value;
      return;
    }
    rows_.push_back(static_cast<int>(row_lo_.size()) - 1);
    cols_.push_back(v.col);
    elements_.push_back(coef);
  }

  struct result {
    bool solved = false;    ///< a plan was found
    bool optimal = false;   ///< proven optimal
    bool infeasible = false;  ///< proven infeasible
    double objective = 0;
    double bound = 0;
    std::vector<double> x;
  };
  /// Integer values of a known plan (column, value), tried as an incumbent.
  void add_start(std::vector<std::pair<int, double>> start) { starts_.push_back(std::move(start)); }

  [[nodiscard]] result solve(double time_limit_s, std::uint64_t seed) const {
    const CoinPackedMatrix matrix(false, rows_.data(), cols_.data(), elements_.data(),
                                  static_cast<CoinBigIndex>(elements_.size()));
    OsiClpSolverInterface lp;
    // CoinPackedMatrix sizes itself from the largest index: pad empty rows and columns.
    CoinPackedMatrix sized(matrix);
    sized.setDimensions(static_cast<int>(row_lo_.size()), static_cast<int>(lo_.size()));
    lp.loadProblem(sized, lo_.data(), hi_.data(), cost_.data(), row_lo_.data(), row_hi_.data());
    for (std::size_t c = 0; c < integer_.size(); ++c) {
      if (integer_[c]) lp.setInteger(static_cast<int>(c));
    }
    lp.messageHandler()->setLogLevel(0);
    if (!starts_.empty()) {
      for (std::size_t c = 0; c < lo_.size(); ++c) lp.setColName(static_cast<int>(c), column_name(c));
    }
    CbcModel model(lp);
    CbcMain0(model);
    // CBC keeps one MIP start: the last given that is cheapest by objective.
    double cheapest = std::numeric_limits<double>::infinity();
    for (const auto& start : starts_) {
      double cost = 0;
      for (const auto& [c, v] : start) cost += cost_[static_cast<std::size_t>(c)] * v;
      if (cost >= cheapest) continue;
      cheapest = cost;
      std::vector<std::pair<std::string, double>> named;
      for (const auto& [c, v] : start) named.emplace_back(column_name(static_cast<std::size_t>(c)), v);
      model.setMIPStart(named);
    }
    model.setLogLevel(0);
    const std::string seconds = std::to_string(time_limit_s > 0 ? time_limit_s : 1e9);
    const std::string seed_text = std::to_string(seed % 1000000 + 1);
    // CBC 2.10's preprocessing crashes (CglPreProcess::postProcess) on
    // some programs given a MIP start: off when there is one.
    const char* preprocess = starts_.empty() ? "on" : "off";
    const char* argv[] = {"memplan-milp", "-log", "0", "-timeMode", "elapsed", "-randomCbcSeed", seed_text.c_str(),
                          "-sec", seconds.c_str(), "-ratio", "0", "-allowableGap", "1e-6", "-preprocess", preprocess,
                          "-solve", "-quit"};
    CbcMain1(static_cast<int>(std::size(argv)), argv, model);
    result r;
    r.infeasible = model.isProvenInfeasible();
    const double* best = model.bestSolution();
    if (best == nullptr) return r;
    r.solved = true;
    r.optimal = model.isProvenOptimal();
    r.objective = model.getObjValue();
    r.bound = model.getBestPossibleObjValue();
    r.x.assign(best, best + lo_.size());
    return r;
  }

 private:
  static std::string column_name(std::size_t c) {
    std::string name(1, 'c');  // (not "c" + ...: GCC 12 warns falsely, -Wrestrict)
    name += std::to_string(c);
    return name;
  }

  std::vector<double> lo_, hi_, cost_;
  std::vector<std::uint8_t> integer_;
  std::vector<double> row_lo_, row_hi_;
  std::vector<int> rows_, cols_;
  std::vector<double> elements_;
  std::vector<std::vector<std::pair<int, double>>> starts_;
};

/// The last stage in which each tensor (and each op's outputs) may still
/// be read: a reader j runs in stage j, and a recomputable reader in any
/// stage that needs j's outputs. Variables past it are fixed out.
struct horizon {
  std::vector<index_t> tensor;  ///< per tensor
  std::vector<index_t> op;      ///< per op: the last stage it may usefully run in
};

inline horizon last_needed(const problem& p) {
  const std::size_t n = p.num_steps();
  horizon h{std::vector<index_t>(p.num_tensors(), 0), std::vector<index_t>(n, 0)};
  for (std::size_t k = n; k-- > 0;) {
    index_t last = static_cast<index_t>(k);
    if (p.recomputable[k]) {
      for (const index_t out : p.outputs(static_cast<index_t>(k))) {
        last = std::max(last, h.tensor[static_cast<std::size_t>(out)]);
      }
    }
    h.op[k] = last;
    for (const index_t v : p.inputs(static_cast<index_t>(k))) {
      h.tensor[static_cast<std::size_t>(v)] = std::max(h.tensor[static_cast<std::size_t>(v)], last);
    }
  }
  for (std::size_t v = 0; v < p.num_tensors(); ++v) {
    if (p.producer[v] != no_index) h.tensor[v] = std::max(h.tensor[v], p.producer[v]);
  }
  return h;
}

/// The program's R and S (Checkmate's matrices), fixed where pruned.
struct variables {
  std::vector<std::vector<var>> R;  ///< R[t][k], k <= t
  std::vector<std::vector<var>> S;  ///< S[t][v], t = 0..n (S[n] is all zero: nothing is kept past the end)
  bytes_t constant = 0;             ///< parameters and optimizer state no op makes
  /// Memory rows count in units of the largest tensor or workspace, to
  /// keep CBC's tolerances meaningful.
  double unit = 1;
};

/// R[t][k] for every stage: free where op k may run again in stage t,
/// 1 for k = t, 0 otherwise.
inline std::vector<std::vector<var>> add_runs(program& prog, const problem& p, const horizon& h) {
  const std::size_t n = p.num_steps();
  std::vector<std::vector<var>> R(n);
  for (std::size_t t = 0; t < n; ++t) {
    R[t].resize(t + 1);
    for (std::size_t k = 0; k < t; ++k) {
      bool makes_persistent = false;
      for (const index_t out : p.outputs(static_cast<index_t>(k))) makes_persistent |= p.persistent(out);
      if (p.recomputable[k] && !makes_persistent && static_cast<std::size_t>(h.op[k]) >= t) {
        R[t][k] = prog.add(0, 1, p.time_us[k], true);
      }
    }
    R[t][t] = {-1, 1};
  }
  return R;
}

/// S, R and the constants of `p`'s program.
inline variables add_variables(program& prog, const problem& p) {
  const std::size_t n = p.num_steps();
  const std::size_t tensors = p.num_tensors();
  const horizon h = last_needed(p);
  variables x;
  for (std::size_t v = 0; v < tensors; ++v) x.unit = std::max(x.unit, static_cast<double>(p.bytes[v]));
  for (const bytes_t w : p.workspace) x.unit = std::max(x.unit, static_cast<double>(w));
  x.R = add_runs(prog, p, h);
  x.S.assign(n + 1, std::vector<var>(tensors));
  for (std::size_t v = 0; v < tensors; ++v) {
    const index_t made = p.producer[v];
    if (p.persistent(static_cast<index_t>(v))) {
      if (made == no_index) {
        x.constant += p.bytes[v];
      } else {
        for (std::size_t t = static_cast<std::size_t>(made) + 1; t < n; ++t) x.S[t][v] = {-1, 1};
      }
      continue;
    }
    if (made == no_index) x.S[0][v] = {-1, 1};
    const std::size_t first = made == no_index ? 1 : static_cast<std::size_t>(made) + 1;
    for (std::size_t t = first; t <= static_cast<std::size_t>(h.tensor[v]) && t < n; ++t) {
      x.S[t][v] = prog.add(0, 1, 0, true);
    }
  }
  return x;
}

/// row[k], or 0 past its end (R[t][k] for k > t).
inline var entry(const std::vector<var>& row, std::size_t k) { return k < row.size() ? row[k] : var{-1, 0}; }

/// Calls f(v) for every tensor op k reads or makes, once each.
template <class F>
void for_each_touched(const problem& p, std::size_t k, F&& f) {
  const auto s = static_cast<index_t>(k);
  for (const index_t v : p.outputs(s)) f(static_cast<std::size_t>(v));
  const auto in = p.inputs(s);
  for (std::size_t i = 0; i < in.size(); ++i) {
    const auto before = in.begin() + static_cast<std::ptrdiff_t>(i);
    if (std::find(in.begin(), before, in[i]) == before) f(static_cast<std::size_t>(in[i]));
  }
}

/// (1b) for stage t: S[t+1,v] <= S[t,v] + R[t,p].
inline void keep_rows(program& prog, const problem& p, const variables& x, std::size_t t) {
  if (t + 1 >= p.num_steps()) return;
  for (std::size_t v = 0; v < p.num_tensors(); ++v) {
    const var next = x.S[t + 1][v];
    if (next.col < 0) continue;
    prog.row(-std::numeric_limits<double>::infinity(), 0);
    prog.term(1, next);
    prog.term(-1, x.S[t][v]);
    const index_t made = p.producer[v];
    if (made != no_index) prog.term(-1, entry(x.R[t], static_cast<std::size_t>(made)));
  }
}

/// (1a) and (m) for op k in stage t.
inline void run_rows(program& prog, const problem& p, const variables& x, std::size_t t, std::size_t k) {
  for (const index_t v : p.inputs(static_cast<index_t>(k))) {
    const auto vi = static_cast<std::size_t>(v);
    if (p.persistent(v)) continue;
    prog.row(-std::numeric_limits<double>::infinity(), 0);
    prog.term(1, x.R[t][k]);
    prog.term(-1, x.S[t][vi]);
    if (p.producer[vi] != no_index) prog.term(-1, entry(x.R[t], static_cast<std::size_t>(p.producer[vi])));
  }
  if (k == t) return;
  for (const index_t out : p.outputs(static_cast<index_t>(k))) {
    prog.row(-std::numeric_limits<double>::infinity(), 1);
    prog.term(1, x.R[t][k]);
    prog.term(1, x.S[t][static_cast<std::size_t>(out)]);
  }
}

/// Constraint (4) for FREE[t,v,k] = f.
inline void free_bounds(program& prog, var f, const problem& p, std::size_t v, const std::vector<var>& stage,
                        var kept_next, std::size_t k, std::size_t t) {
  const double inf = std::numeric_limits<double>::infinity();
  prog.row(-inf, 0);
  prog.term(1, f);
  prog.term(-1, stage[k]);
  prog.row(-inf, 1);
  prog.term(1, f);
  prog.term(1, kept_next);
  const auto later = [&](index_t j) {
    if (j <= static_cast<index_t>(k) || j > static_cast<index_t>(t)) return;
    const var r = stage[static_cast<std::size_t>(j)];
    if (r.col < 0 && r.value == 0) return;
    prog.row(-inf, 1);
    prog.term(1, f);
    prog.term(1, r);
  };
  if (p.producer[v] != no_index) later(p.producer[v]);
  for (const index_t j : p.uses(static_cast<index_t>(v))) later(j);
}

/// (2)-(4) for stage t, whose ops may be `runs`, in units of x.unit.
inline void memory_rows(program& prog, const problem& p, const variables& x, bytes_t budget, std::size_t t,
                        const std::vector<std::size_t>& runs) {
  std::vector<std::pair<std::size_t, var>> frees;  // FREE[t,v,k'] of the op before the current one
  var before{-1, 0};
  std::size_t previous = 0;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const std::size_t k = runs[i];
    frees.clear();
    if (i > 0) {
      for_each_touched(p, previous, [&](std::size_t v) {
        if (!p.persistent(static_cast<index_t>(v))) frees.emplace_back(v, prog.add(0, 1, 0, false));
      });
    }
    const var u = prog.add(0, std::numeric_limits<double>::infinity(), 0, false);
    prog.row(0, 0);
    prog.term(1, u);
    if (i == 0) {
      // Stage start: what is kept, and the constant bytes.
      prog.term(-1, var{-1, static_cast<double>(x.constant) / x.unit});
      for (std::size_t v = 0; v < p.num_tensors(); ++v) prog.term(-static_cast<double>(p.bytes[v]) / x.unit, x.S[t][v]);
    } else {
      prog.term(-1, before);
      for (const auto& [v, f] : frees) prog.term(static_cast<double>(p.bytes[v]) / x.unit, f);
    }
    for (const index_t out : p.outputs(static_cast<index_t>(k))) {
      prog.term(-static_cast<double>(p.bytes[static_cast<std::size_t>(out)]) / x.unit, x.R[t][k]);
    }
    // (3)
    prog.row(-std::numeric_limits<double>::infinity(), static_cast<double>(budget) / x.unit);
    prog.term(1, u);
    prog.term(static_cast<double>(p.workspace[k]) / x.unit, x.R[t][k]);
    // (4)
    for (const auto& [v, f] : frees) free_bounds(prog, f, p, v, x.R[t], x.S[t + 1][v], previous, t);
    before = u;
    previous = k;
  }
}

/// The constraints of stage t: (1b), then (1a) and (m) per op it may run,
/// then (2)-(4).
inline void add_stage(program& prog, const problem& p, const variables& x, bytes_t budget, std::size_t t) {
  keep_rows(prog, p, x, t);
  std::vector<std::size_t> runs;
  for (std::size_t k = 0; k <= t; ++k) {
    if (x.R[t][k].col >= 0 || x.R[t][k].value > 0) runs.push_back(k);
  }
  for (const std::size_t k : runs) run_rows(prog, p, x, t, k);
  memory_rows(prog, p, x, budget, t, runs);
}

/// R and S of a feasible recompute-only plan whose recomputations fit the
/// stages (each op at most once per stage, in schedule order), as a MIP
/// start; empty when it does not fit. S[t,v] = 1 where the plan reads
/// v's copy from before stage t in stage t or later.
inline std::vector<std::pair<int, double>> start_of(const problem& p, const plan& pl, const variables& x) {
  if (!pl.feasible) return {};
  const std::size_t n = p.num_steps();
  std::vector<std::pair<int, double>> start;
  std::vector<index_t> stage_of(pl.actions.size(), 0);
  index_t stage = 0;
  index_t last_in_stage = -1;
  for (std::size_t a = 0; a < pl.actions.size(); ++a) {
    const action& act = pl.actions[a];
    if (act.parts != 1 || act.kind == action_kind::swap_out || act.kind == action_kind::swap_in) return {};
    stage_of[a] = stage;
    if (act.kind == action_kind::compute) {
      if (act.step != stage) return {};
      ++stage;
      last_in_stage = -1;
    } else if (act.kind == action_kind::recompute) {
      if (static_cast<std::size_t>(stage) >= n || act.step <= last_in_stage) return {};
      const var r = x.R[static_cast<std::size_t>(stage)][static_cast<std::size_t>(act.step)];
      if (r.col < 0) return {};
      start.emplace_back(r.col, 1);
      last_in_stage = act.step;
    }
  }
  // Backwards: whether each tensor's current copy is read again.
  std::vector<std::uint8_t> read_later(p.num_tensors(), 0);
  std::size_t a = pl.actions.size();
  for (std::size_t t = n; t-- > 0;) {
    for (; a > 0 && stage_of[a - 1] >= static_cast<index_t>(t); --a) {
      const action& act = pl.actions[a - 1];
      if (act.kind == action_kind::free) {
        read_later[static_cast<std::size_t>(act.tensor)] = 0;
        continue;
      }
      for (const index_t out : p.outputs(act.step)) read_later[static_cast<std::size_t>(out)] = 0;
      for (const index_t in : p.inputs(act.step)) read_later[static_cast<std::size_t>(in)] = 1;
    }
    for (std::size_t v = 0; v < p.num_tensors(); ++v) {
      const var sv = x.S[t][v];
      if (sv.col >= 0) start.emplace_back(sv.col, read_later[v]);
    }
  }
  return start;
}

/// The value of a 0-1 variable in the solution `solution`.
inline bool chosen(var v, const std::vector<double>& solution) {
  return v.col < 0 ? v.value > 0.5 : solution[static_cast<std::size_t>(v.col)] > 0.5;
}

/// Stage t of the solution's plan: its ops in order, each tensor released
/// after its last use in the stage unless the next stage keeps it; a
/// `free` only where a later stage remakes it (memplan frees the others
/// by itself at the same point). `on_device`: per tensor, carried from
/// stage to stage.
inline void emit_stage(plan_builder& b, const problem& p, const variables& x, const std::vector<double>& solution,
                       const std::vector<index_t>& remade_last, std::vector<std::uint8_t>& on_device, std::size_t t) {
  const std::size_t tensors = p.num_tensors();
  std::vector<index_t> last_touch(tensors, no_index);
  for (std::size_t k = 0; k <= t; ++k) {
    if (!chosen(x.R[t][k], solution)) continue;
    for_each_touched(p, k, [&](std::size_t v) { last_touch[v] = static_cast<index_t>(k); });
  }
  const auto release = [&](std::size_t v) {
    if (p.persistent(static_cast<index_t>(v)) || !on_device[v] || chosen(x.S[t + 1][v], solution)) return;
    if (remade_last[v] > static_cast<index_t>(t)) b.free(static_cast<index_t>(v));
    on_device[v] = 0;
  };
  for (std::size_t k = 0; k <= t; ++k) {
    if (!chosen(x.R[t][k], solution)) continue;
    if (k < t) {
      b.recompute(static_cast<index_t>(k));
      for (const index_t out : p.outputs(static_cast<index_t>(k))) b.decide(out, decision::recompute);
    } else {
      b.compute(static_cast<index_t>(k));
    }
    for (const index_t out : p.outputs(static_cast<index_t>(k))) on_device[static_cast<std::size_t>(out)] = 1;
    for_each_touched(p, k, [&](std::size_t v) {
      if (last_touch[v] == static_cast<index_t>(k)) release(v);
    });
  }
  for (std::size_t v = 0; v < tensors; ++v) release(v);
}

/// The plan of the solution, stage by stage.
inline plan plan_of(const problem& p, const variables& x, const std::vector<double>& solution, bytes_t budget) {
  const std::size_t n = p.num_steps();
  std::vector<index_t> remade_last(p.num_tensors(), no_index);  // latest stage that recomputes v's producer
  for (std::size_t t = 0; t < n; ++t) {
    for (std::size_t k = 0; k < t; ++k) {
      if (!chosen(x.R[t][k], solution)) continue;
      for (const index_t out : p.outputs(static_cast<index_t>(k))) {
        remade_last[static_cast<std::size_t>(out)] = static_cast<index_t>(t);
      }
    }
  }
  plan_builder b(p, "milp", budget);
  std::vector<std::uint8_t> on_device(p.num_tensors(), 0);
  for (std::size_t v = 0; v < p.num_tensors(); ++v) on_device[v] = p.producer[v] == no_index ? 1 : 0;
  for (std::size_t t = 0; t < n; ++t) emit_stage(b, p, x, solution, remade_last, on_device, t);
  return std::move(b).finish();
}

/// An infeasible plan saying `why`.
inline plan refused(const problem& p, bytes_t budget, failure_kind kind, std::string why) {
  plan_builder b(p, "milp", budget);
  b.infeasible(kind, std::move(why), p.baseline_peak());
  return std::move(b).finish();
}

/// Simulates the solver's plan: its peak, and, where the solver stopped
/// at the time limit, its time and the gap in `reason`.
inline void judge(const problem& p, const device_spec& dev, bytes_t budget, double time_limit_s,
                  const program::result& solved, plan& result) {
  simulator sim;
  const report r = sim.run(p, result, dev, budget);
  result.best_peak = r.peak_bytes;
  if (!r.feasible) {
    result.feasible = false;
    result.kind = r.kind;
    result.reason = "milp: internal error, the solver's plan fails in the simulator: " + r.failure;
  } else if (!solved.optimal) {
    const double base = p.baseline_time_us();
    const double gap = (solved.objective - solved.bound) / (base + solved.objective);
    result.reason = concat("milp: stopped at the time limit of ", time_limit_s, " s; ", base + solved.objective,
                           " us, lower bound ", base + solved.bound, " us (gap ", std::round(gap * 10000) / 100,
                           " %)");
  }
}

}  // namespace detail::milp

/// Checkmate's integer program (see the file comment), solved by CBC.
struct milp_planner {
  /// `--max-ops`, `--seed-with`.
  static constexpr std::array<planner_option, 2> cli_options{
      {{"max-ops", "N", "refuse graphs of more ops (default 120: the program grows with ops squared)"},
       {"seed-with", "a,b,...", "start CBC from these planners' plans (e.g. revolve,checkpoint)"}}};
  static constexpr bool searches = true;  ///< CBC may run for minutes

  /// Runs the planners `--seed-with` names; the registry supplies it.
  planner_lookup seed_planners = nullptr;

  /// The fastest recompute-only plan of `p` within `budget`, or the best CBC
  /// found by `o.time_limit_s` (its gap in the reason); gives up
  /// (planner_gave_up) on graphs of more than `--max-ops` ops.
  /// \throws invalid_argument for a malformed option.
  plan operator()(const problem& p, const device_spec& dev, bytes_t budget, const planner_options& o) const {
    namespace milp = detail::milp;
    const std::size_t n = p.num_steps();
    const auto max_ops = static_cast<std::size_t>(option_number(o, "max-ops", 120, 1, 100000));
    if (n > max_ops) {
      return milp::refused(p, budget, failure_kind::planner_gave_up,
                           detail::concat("milp: the graph has ", n, " ops, more than max-ops (", max_ops,
                                          "); the integer program grows with ops squared"));
    }
    milp::program prog;
    const milp::variables x = milp::add_variables(prog, p);
    for (std::size_t t = 0; t < n; ++t) milp::add_stage(prog, p, x, budget, t);
    for (const plan& seed : memplan::seed_plans(seed_planners, "milp", p, dev, budget, o)) {
      auto start = milp::start_of(p, seed, x);
      if (!start.empty()) prog.add_start(std::move(start));
    }
    const auto solved = prog.solve(o.time_limit_s, o.seed);
    if (!solved.solved) {
      return milp::refused(p, budget, solved.infeasible ? failure_kind::out_of_memory : failure_kind::time_limit,
                           solved.infeasible
                               ? detail::concat("milp: no recompute-only plan fits the budget of ", budget, " bytes (",
                                                format_bytes(budget), ")")
                               : detail::concat("milp: no plan found within the time limit of ", o.time_limit_s, " s"));
    }
    plan result = milp::plan_of(p, x, solved.x, budget);
    milp::judge(p, dev, budget, o.time_limit_s, solved, result);
    return result;
  }
};
static_assert(planner<milp_planner>);

}  // namespace memplan
