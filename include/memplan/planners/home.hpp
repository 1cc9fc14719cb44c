#pragma once
/// \file
/// `home`: HOME (He et al., "HOME: A Holistic GPU Memory Management
/// Framework for Deep Learning"), §3.3-3.5: a particle swarm over {retain,
/// swap, recompute} for every feature map (Algo 1), each particle judged by
/// the Policy Evaluator — here the simulator (home/evaluator.hpp) — and
/// updated by Algo 3. Same seed, same plan, on any number of threads.
///
/// Options (`planner_options::extra`, `--NAME VALUE` on the CLI):
/// `iterations` and `particles` (§3.3: 500 and 500), `seed-with` (planners
/// whose plans join the swarm as particles, e.g. `capuchin,tsplit-nosplit`).
/// A placement cannot express every plan (Capuchin's in-triggers and
/// per-access recomputation, TSPLIT's gaps), so the seeds' own plans are
/// candidates too: a seed plan the swarm did not beat is returned as it
/// is, saying so in `reason`, and `home` is at least as good as its seeds.

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "memplan/error.hpp"
#include "memplan/format_bytes.hpp"
#include "memplan/planners/home/evaluator.hpp"
#include "memplan/planners/parallel.hpp"
#include "memplan/planners/planner.hpp"
#include "memplan/sim/simulator.hpp"

namespace memplan {
namespace detail::home {

/// The swarm's size.
struct swarm_settings {
  int iterations = 500;  ///< HOME §3.3
  int particles = 500;   ///< HOME §3.3
};

/// What a search found.
struct search_result {
  std::vector<placement> best;         ///< the best-ever particle (Algo 1 line 9)
  fitness best_fitness;
  std::vector<search_point> history;   ///< the best-ever fitness after each iteration
  std::int64_t evaluations = 0;        ///< candidates Algo 3 needed the exact fitness of: simulated or remembered
  std::int64_t simulations = 0;        ///< of those, the ones simulated (not remembered)
  std::int64_t bound_hits = 0;         ///< of those, the ones the residency bound proved not to fit
  std::int64_t floor_decisions = 0;    ///< candidates a floor proved to lose, not evaluated
  int iterations_done = 0;
  int fixed_point = 0;                 ///< the iteration that ended where it started (0: none); the search stopped there
};

/// What an iteration of Algo 1 starts from, apart from the best-ever
/// particle (which the iteration's lines 6-12 derive from it): positions,
/// historical bests and their fitnesses. An iteration that ends in the
/// state it started from is a fixed point of the search (issue 29: the
/// swarm reaches one by iteration 7-14 on HOME's models), so the search
/// stops there, exactly as if it ran on. Compared in full, not by hash.
struct swarm_state {
  std::vector<placement> x, pbest;
  std::vector<fitness> fx, pbest_fx;

  void assign(std::span<const placement> x_now, std::span<const fitness> fx_now, std::span<const placement> pbest_now,
              std::span<const fitness> pbest_fx_now) {
    x.assign(x_now.begin(), x_now.end());
    fx.assign(fx_now.begin(), fx_now.end());
    pbest.assign(pbest_now.begin(), pbest_now.end());
    pbest_fx.assign(pbest_fx_now.begin(), pbest_fx_now.end());
  }
  [[nodiscard]] bool equals(std::span<const placement> x_now, std::span<const fitness> fx_now,
                            std::span<const placement> pbest_now, std::span<const fitness> pbest_fx_now) const {
    return std::ranges::equal(x, x_now) && std::ranges::equal(fx, fx_now) && std::ranges::equal(pbest, pbest_now) &&
           std::ranges::equal(pbest_fx, pbest_fx_now);
  }
};

/// splitmix64 (Steele et al. 2014): a particle's own random stream, so that
/// its initial position does not depend on which thread draws it.
[[nodiscard]] inline std::uint64_t splitmix64(std::uint64_t& state) noexcept {
  return mix64(state += 0x9E3779B97F4A7C15ULL);
}

/// The second candidate of an Algo 3 comparison: its exact fitness, or
/// none where its floor `f` already `loses`.
template <class Loses, class Exact, class Evaluate>
[[nodiscard]] std::optional<fitness> other(const estimate& f, const Loses& loses, const Exact& exact,
                                           Evaluate& evaluate) {
  if (f.exact) return f.value;
  if (!loses(f.value)) return exact();
  evaluate.decided_by_floor();
  return std::nullopt;
}

/// Algo 3 for one particle: `x` (fitness `fx`) moves, tensor by tensor, to
/// the action of the last iteration's best `p1` or of its own historical
/// best `p2`, whichever evaluates cheaper with the tensors before it already
/// moved. Evaluations whose answer is known, or not needed, are skipped —
/// the candidate equal to the current position (its fitness is known),
/// both candidates when p1 and p2 agree (line 12 takes p2's, whatever O1
/// and O2 are), and a candidate whose fitness floor (`evaluate.floor`)
/// already loses to the other's fitness — so the result is Algo 3's
/// exactly, with fewer simulations.
/// Once `out_of_time()` answers true the particle stops where it is (the
/// time limit; a whole update of a large model takes seconds).
/// \returns the new position's fitness.
template <class Evaluate, class Stop>
[[nodiscard]] fitness update_particle(std::span<placement> x, fitness fx, std::span<const placement> p1,
                                      std::span<const placement> p2, Evaluate& evaluate, const Stop& out_of_time) {
  bool known = true;  // fx is x's fitness
  for (std::size_t j = 0; j < x.size() && !out_of_time(); ++j) {
    const placement now = x[j];
    if (p1[j] == p2[j]) {  // O1 == O2, line 12: policy[j] = P2[j]
      if (now != p2[j]) {
        x[j] = p2[j];
        known = false;
      }
      continue;
    }
    // Lines 5-7 for action a: policy[i][j] = a; evaluate(particle_i), with
    // the floor `f` found for it.
    const auto exact = [&](placement a, const estimate& f) {
      x[j] = a;
      return evaluate(std::span<const placement>(x), &f);
    };
    const auto floor = [&](placement a) {
      x[j] = a;
      return known ? evaluate.floor(std::span<const placement>(x), j, now, fx)
                   : evaluate.floor(std::span<const placement>(x));
    };
    std::optional<fitness> o1;
    std::optional<fitness> o2;
    std::optional<estimate> f1;  // the floors found so far
    std::optional<estimate> f2;
    if (known && now == p1[j]) o1 = fx;
    if (known && now == p2[j]) o2 = fx;
    if (!o1 && !o2) {  // the one that may be cheaper first
      f1 = floor(p1[j]);
      f2 = floor(p2[j]);
      if (f1->exact) o1 = f1->value;
      if (f2->exact) o2 = f2->value;
      if (!o1 && !o2) {
        if (f2->value < f1->value) {
          o2 = exact(p2[j], *f2);
        } else {
          o1 = exact(p1[j], *f1);
        }
      }
    }
    // Lines 8-12: keep the cheaper, P2's on a tie. A floor that loses
    // decides it: O1 >= floor(O1) >= O2, or O2 >= floor(O2) > O1.
    if (!o1) {
      const estimate f = f1 ? *f1 : floor(p1[j]);
      o1 = other(f, [&](fitness v) { return *o2 <= v; }, [&] { return exact(p1[j], f); }, evaluate);
    }
    if (!o2) {
      const estimate f = f2 ? *f2 : floor(p2[j]);
      o2 = other(f, [&](fitness v) { return *o1 < v; }, [&] { return exact(p2[j], f); }, evaluate);
    }
    const bool first = o1 && (!o2 || *o1 < *o2);  // an empty one lost by its floor
    x[j] = first ? p1[j] : p2[j];
    fx = first ? *o1 : *o2;
    known = true;
  }
  return known ? fx : evaluate(std::span<const placement>(x));
}

/// Algo 1: `settings.particles` particles, randomly initialised (lines
/// 1-3) except the first `seeds.size()`, which start at the seed
/// placements; each iteration evaluates every particle and records the
/// best-ever (lines 5-12), then updates them by Algo 3 (line 13).
[[nodiscard]] inline search_result search(const problem& p, const device_spec& dev, bytes_t budget,
                                          const feature_maps& fm, const swarm_settings& settings,
                                          const planner_options& o,
                                          std::span<const std::vector<placement>> seeds) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto out_of_time = [&] {
    return o.time_limit_s > 0 && std::chrono::duration<double>(clock::now() - start).count() >= o.time_limit_s;
  };
  const std::size_t n = fm.size();
  const auto m = static_cast<std::size_t>(settings.particles);
  const std::size_t threads = thread_count(o.threads);
  placement_memo memo(n);
  std::vector<evaluator> evaluators;
  for (std::size_t w = 0; w < std::min(threads, m); ++w) evaluators.emplace_back(p, dev, fm, budget, &memo);

  std::vector<placement> x(m * n);
  std::vector<fitness> fx(m);
  const auto particle = [&](std::vector<placement>& v, std::size_t i) { return std::span(v).subspan(i * n, n); };

  // Lines 1-3, and the first evaluation (line 7 of the first iteration).
  parallel_for(threads, m, [&](std::size_t w, std::size_t i) {
    const auto xi = particle(x, i);
    if (i < seeds.size()) {
      std::ranges::copy(seeds[i], xi.begin());
    } else {
      std::uint64_t state = o.seed ^ (0xD1B54A32D192ED03ULL * (i + 1));
      for (std::size_t j = 0; j < n; ++j) {
        xi[j] = static_cast<placement>(splitmix64(state) % static_cast<std::uint64_t>(fm.choices(j)));
      }
    }
    fx[i] = evaluators[w](xi);
  });

  search_result r;
  std::vector<placement> pbest = x;  // per particle, its historical best
  std::vector<fitness> pbest_fx = fx;
  std::vector<placement> last_best(n);
  r.best_fitness = {std::numeric_limits<bytes_t>::max(), 0};
  swarm_state before;  // the state the iteration started from
  for (int it = 1; it <= settings.iterations; ++it) {
    before.assign(x, fx, pbest, pbest_fx);
    // Lines 6-12: every particle's fitness is known (from its update), so
    // this records the best-ever, the historical bests and the last
    // iteration's best, lowest particle index first on ties.
    std::size_t iteration_best = 0;
    for (std::size_t i = 0; i < m; ++i) {
      if (fx[i] < fx[iteration_best]) iteration_best = i;
      if (fx[i] < pbest_fx[i]) {
        pbest_fx[i] = fx[i];
        std::ranges::copy(particle(x, i), particle(pbest, i).begin());
      }
    }
    if (fx[iteration_best] < r.best_fitness) {
      r.best_fitness = fx[iteration_best];
      r.best.assign(particle(x, iteration_best).begin(), particle(x, iteration_best).end());
    }
    r.history.push_back({r.best_fitness.time_us, r.best_fitness.excess_bytes});
    r.iterations_done = it;
    if (o.progress) {
      o.progress(concat("home: iteration ", it, "/", settings.iterations, ", best ", r.best_fitness.time_us / 1e3,
                        " ms", r.best_fitness.excess_bytes > 0
                                   ? concat(", ", format_bytes(r.best_fitness.excess_bytes), " over the budget")
                                   : std::string()));
    }
    // The update after the last evaluation would never be evaluated. An
    // update the time limit cut short left its particles at placements of
    // known fitness, which the next pass through lines 6-12 records.
    if (it == settings.iterations || out_of_time()) break;
    std::ranges::copy(particle(x, iteration_best), last_best.begin());  // line 1 of Algo 3: P_1
    parallel_for(threads, m, [&](std::size_t w, std::size_t i) {
      fx[i] = update_particle(particle(x, i), fx[i], last_best, particle(pbest, i), evaluators[w], out_of_time);
    });
    // A fixed point (the update was whole: the time limit did not cut it
    // short): every later iteration would start from this state again,
    // evaluate the same placements and record the same best.
    if (!out_of_time() && before.equals(x, fx, pbest, pbest_fx)) {
      if (o.progress) {
        o.progress(concat("home: the swarm is back where iteration ", it, " started; iterations ", it + 1, "-",
                          settings.iterations, " would repeat it"));
      }
      r.history.resize(static_cast<std::size_t>(settings.iterations), r.history.back());
      r.iterations_done = settings.iterations;
      r.fixed_point = it;
      break;
    }
  }
  for (const evaluator& e : evaluators) {
    r.evaluations += e.evaluations();
    r.simulations += e.simulations();
    r.bound_hits += e.bound_hits();
    r.floor_decisions += e.floor_decisions();
  }
  return r;
}

}  // namespace detail::home

/// The `home` planner. Its `seed_planners` runs the planners `--seed-with`
/// names; the registry supplies it (it lists every planner, this one too).
struct home_planner {
  /// `--iterations`, `--particles`, `--seed-with`.
  static constexpr std::array<planner_option, 3> cli_options{
      {{"iterations", "N", "swarm iterations (default 500, §3.3)"},
       {"particles", "N", "particles (default 500, §3.3)"},
       {"seed-with", "a,b,...", "planners whose plans join the swarm as particles (e.g. capuchin,tsplit-nosplit)"}}};
  static constexpr bool searches = true;  ///< 500 x 500 particles by default

  /// Runs the planners `--seed-with` names; null: `--seed-with` throws.
  planner_lookup seed_planners = nullptr;

  /// Searches for the fastest plan of `p` on `dev` that fits `budget` (the file comment).
  /// \throws invalid_argument for a negative budget, a malformed option, or
  ///         more `--seed-with` planners than particles.
  plan operator()(const problem& p, const device_spec& dev, bytes_t budget, const planner_options& o) const {
    MEMPLAN_EXPECTS(budget >= 0, invalid_argument, "home: the budget must be non-negative, got ", budget);
    detail::home::swarm_settings settings;
    settings.iterations = static_cast<int>(option_number(o, "iterations", settings.iterations, 1, 100000));
    settings.particles = static_cast<int>(option_number(o, "particles", settings.particles, 1, 100000));
    const detail::home::feature_maps fm(p);
    const std::vector<plan> seed_plans = memplan::seed_plans(seed_planners, "home", p, dev, budget, o);
    MEMPLAN_EXPECTS(seed_plans.size() <= static_cast<std::size_t>(settings.particles), invalid_argument,
                    "home: --seed-with names ", seed_plans.size(), " planners, more than the ", settings.particles,
                    " particles");
    std::vector<std::vector<detail::home::placement>> seeds;
    for (const plan& s : seed_plans) seeds.push_back(fm.placement_of(s));
    const auto r = detail::home::search(p, dev, budget, fm, settings, o, seeds);
    plan result = detail::home::emit(p, fm, r.best, budget).finish(dev);
    // Stopped by the time limit before its last iteration: more time might find a plan that fits.
    if (!result.feasible && r.iterations_done < settings.iterations) result.kind = failure_kind::time_limit;
    result.history = r.history;
    return best_of(p, dev, budget, std::move(result), seed_plans);
  }

 private:

  /// The swarm's plan, or the first seed plan that fits and simulates
  /// faster (or fits where the swarm's does not).
  static plan best_of(const problem& p, const device_spec& dev, bytes_t budget, plan swarm,
                      std::span<const plan> seeds) {
    simulator sim;
    const report own = sim.run(p, swarm, dev, budget);
    const plan* best = nullptr;
    report best_report = own;
    for (const plan& s : seeds) {
      const report r = sim.run(p, s, dev, budget);
      if (r.feasible && (!best_report.feasible || r.time_us < best_report.time_us)) {
        best = &s;
        best_report = r;
      }
    }
    if (best == nullptr) return swarm;
    plan result = *best;
    result.reason = own.feasible ? detail::concat("the seed plan of '", best->planner, "' (", best_report.time_us / 1e3,
                                                  " ms) is faster than the swarm's best (", own.time_us / 1e3, " ms)")
                                 : detail::concat("the seed plan of '", best->planner,
                                                  "': no placement the swarm found fits");
    result.planner = "home";
    result.history = std::move(swarm.history);
    return result;
  }
};
static_assert(planner<home_planner>);

}  // namespace memplan
