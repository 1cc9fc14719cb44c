#pragma once
/// \file
/// Every planner by name, for the CLI and the `auto` portfolio. A paper's
/// planner joins by including its header here and adding a row to
/// `planner_entries`; user code adds its own with `register_planner`.

#include <array>
#include <deque>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "memplan/error.hpp"
#include "memplan/planners/baselines.hpp"
#include "memplan/planners/capuchin.hpp"
#include "memplan/planners/dtr.hpp"
#include "memplan/planners/home.hpp"
#include "memplan/planners/none.hpp"
#include "memplan/planners/oracles.hpp"
#include "memplan/planners/planner.hpp"
#include "memplan/planners/portfolio.hpp"
#include "memplan/planners/tsplit.hpp"
#include "memplan/planners/verdict.hpp"

namespace memplan {

/// A planner as a function pointer: problem, device, budget, options -> plan.
using planner_fn = plan (*)(const problem&, const device_spec&, bytes_t, const planner_options&);

/// A registered planner: its name, what it does, and how to run it.
struct planner_entry {
  std::string_view name;     ///< as the CLI and `find_planner` spell it ("tsplit", ...)
  std::string_view summary;  ///< one line for listings, with the paper
  /// Runs the planner, lays out its plan (unless it lays out its own) and
  /// checks it with the validator: a plan it calls feasible is valid.
  planner_fn run;
  /// The planner-specific settings it reads from `planner_options::extra`
  /// (the CLI accepts them as `--NAME VALUE`): a planner declares them as
  /// `static constexpr std::array<planner_option, N> cli_options`.
  std::span<const planner_option> options;
  /// A search of seconds to minutes (`home`, `milp`: a planner declares
  /// `static constexpr bool searches = true`): the CLI's `compare` and
  /// `maxbatch` run it only when `--planners` names it.
  bool searches = false;
};

namespace detail {
/// Every registered planner runs here (the CLI's `plan`, `compare`,
/// `maxbatch`, `auto`'s portfolio and `--seed-with`): a plan it calls
/// feasible has passed the validator (confirm_valid). A planner that lays
/// out its own plans (`static constexpr bool lays_out = true`: the online
/// policies' allocator, tsplit's layout per walk) keeps its layout and its
/// own verdict on it; the others get one from with_layout.
template <planner P>
plan run_planner(const problem& p, const device_spec& d, bytes_t budget, const planner_options& o) {
  plan pl;
  if constexpr (requires { P::lays_out; }) {
    pl = P{}(p, d, budget, o);
  } else {
    pl = with_layout([&](bytes_t target) { return P{}(p, d, target, o); }, p, d, budget);
  }
  confirm_valid(p, pl, d, budget);
  return pl;
}
template <planner P>
constexpr planner_entry entry(std::string_view name, std::string_view summary) {
  planner_entry e{name, summary, &run_planner<P>, {}};
  if constexpr (requires { P::cli_options; }) e.options = P::cli_options;
  if constexpr (requires { P::searches; }) e.searches = P::searches;
  return e;
}
/// Runs the registered planner `name` (HOME's `--seed-with`).
inline plan run_registered(std::string_view name, const problem& p, const device_spec& d, bytes_t budget,
                           const planner_options& o);
/// `home`, seeded from the registry.
struct registered_home : home_planner {
  constexpr registered_home() : home_planner{&run_registered} {}
};
/// `auto`, its portfolio from the registry.
struct registered_auto : portfolio_planner {
  constexpr registered_auto() : portfolio_planner{&run_registered} {}
};
#ifdef MEMPLAN_ENABLE_MILP
/// `milp`, seeded from the registry.
struct registered_milp : milp_planner {
  constexpr registered_milp() : milp_planner{&run_registered} {}
};
#endif
inline constexpr std::array planner_entries{
    entry<none_planner>("none", "keep every tensor (baseline)"),
    entry<vdnn_conv_planner>("vdnn-conv", "vDNN: offload conv inputs, layer-synchronous (Rhu et al. 2016)"),
    entry<vdnn_all_planner>("vdnn-all", "vDNN: offload every layer's inputs, layer-synchronous (Rhu et al. 2016)"),
    entry<checkpoint_planner>("checkpoint", "sqrt(n) gradient checkpointing (Chen et al. 2016)"),
    entry<superneurons_planner>("superneurons", "swap conv outputs, recompute cheap layers (Wang et al. 2018)"),
    entry<revolve_planner>("revolve", "binomial checkpointing for chains, optimal step count (Griewank 1992)"),
#ifdef MEMPLAN_ENABLE_MILP
    entry<registered_milp>("milp", "optimal recompute-only plan, Checkmate's integer program solved by CBC (Jain et al. 2020)"),
#endif
    entry<capuchin_planner>("capuchin",
                            "measured execution, FT-ranked swaps and MSPS recomputation, feedback (Peng et al. 2020)"),
    entry<dtr_planner>("dtr", "DTR's simulator: online eviction by h = c / (m s), recompute only (Kirisame et al. 2021)"),
    entry<delta_planner>("delta", "DELTA: online filter + evict/offload director + prefetcher (Tang et al.)"),
    entry<tsplit_nosplit_planner>("tsplit-nosplit", "TSPLIT w/o split: Algo 2 over swap (Eq. 3, PCIe occupancy) and recompute (Eq. 4)"),
    entry<tsplit_planner>("tsplit", "TSPLIT: Algo 2 over swap, recompute and tensor split (Eq. 2-6, Nie et al. 2022)"),
    entry<registered_home>("home", "particle swarm over retain/swap/recompute per feature map (HOME, He et al.)"),
    entry<registered_auto>("auto", "the fastest plan that fits among a portfolio of planners, judged by the simulator"),
};
}  // namespace detail

namespace detail {
/// The planners find_planner knows: the papers' (planner_entries), then
/// those user code registered (register_planner).
inline std::vector<planner_entry>& known_planners() {
  static std::vector<planner_entry> all(planner_entries.begin(), planner_entries.end());
  return all;
}
/// The names and summaries of registered planners (a deque: they never move).
inline std::deque<std::string>& registered_texts() {
  static std::deque<std::string> texts;
  return texts;
}
}  // namespace detail

/// The planners: the papers' in the order tables list them, then those
/// registered by `register_planner`.
[[nodiscard]] inline std::span<const planner_entry> planners() { return detail::known_planners(); }

/// Adds planner P (default-constructed for each run) under `name`, so that
/// `find_planner`, `auto`'s `--portfolio`, `--seed-with` and a program's
/// planner listing know it. Its plans go through the registry as the
/// papers' do: laid out (verdict.hpp's with_layout) unless P declares
/// `static constexpr bool lays_out = true`, then checked by the validator.
/// Not thread-safe: register before any thread plans.
/// \throws invalid_argument for an empty name, one with a space or a comma,
///         or one a planner already has.
template <planner P>
void register_planner(std::string_view name, std::string_view summary) {
  MEMPLAN_EXPECTS(!name.empty() && name.find_first_of(" ,") == std::string_view::npos, invalid_argument,
                  "register_planner: a planner's name is one word without commas, got '", name, "'");
  for (const planner_entry& e : planners()) {
    MEMPLAN_EXPECTS(e.name != name, invalid_argument, "register_planner: a planner is called '", name, "' already");
  }
  auto& texts = detail::registered_texts();
  const std::string_view stored_name = texts.emplace_back(name);
  const std::string_view stored_summary = texts.emplace_back(summary);
  detail::known_planners().push_back(detail::entry<P>(stored_name, stored_summary));
}

/// The planner called `name`.
/// \throws invalid_argument naming the planner and listing the known ones.
[[nodiscard]] inline const planner_entry& find_planner(std::string_view name) {
  for (const auto& e : planners()) {
    if (e.name == name) return e;
  }
  std::string known;
  for (const auto& e : planners()) known.append(known.empty() ? "" : ", ").append(e.name);
  throw invalid_argument(detail::concat("unknown planner '", name, "'; known planners: ", known));
}

namespace detail {
inline plan run_registered(std::string_view name, const problem& p, const device_spec& d, bytes_t budget,
                           const planner_options& o) {
  return find_planner(name).run(p, d, budget, o);
}
}  // namespace detail

}  // namespace memplan
