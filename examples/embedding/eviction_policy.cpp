// Writing your own eviction policy. DTR and DELTA run inside the framework:
// no plan ahead, only a policy asked which tensor to release whenever an
// allocation would not fit. A policy is a type with `offloads` (may it
// release tensors that cannot be recomputed, by copying them to the host?)
// and `choose(state)`, which picks one of `state.candidates()`; optional
// hooks (`fetch`, `early_start`, `prefetch`, `on_release`) are detected.
// `run_online` runs the schedule with it, on a model of PyTorch's caching
// allocator in an arena of the budget, and returns what it did as a plan
// the simulator and the validator judge like any other.
//
// This one is DTR's h_size ablation (Kirisame et al., ICLR 2021, §4): evict
// the largest candidate, ignoring its recompute cost and staleness. It is
// run beside DTR's own h_DTR = c / (m · s) on the same step.
//   eviction_policy [MODEL [BATCH [BUDGET_PERCENT]]]   (default resnet50 32 60)
#include <cstdio>
#include <cstdlib>

#include <memplan/memplan.hpp>
#include <memplan/model/zoo.hpp>
#include <memplan/planners/dtr.hpp>

namespace {

struct largest_first {
  static constexpr bool offloads = false;  // recompute only, as DTR
  memplan::bytes_t released = 0;           // kept by the on_release hook

  /// The candidate with the smallest score goes: here the largest.
  [[nodiscard]] memplan::online::release choose(const memplan::online::online_state& s) const {
    const auto score = [](float /*cost_us*/, float bytes, float /*staleness_us*/) { return -bytes; };
    return {s.best_candidate(score), memplan::online::release_kind::evict};
  }
  void on_release(const memplan::online::online_state& s, const memplan::online::release& r) {
    released += s.prob().bytes[std::size_t(r.tensor)];
  }
};
static_assert(memplan::online::eviction_policy<largest_first>);

/// Runs `policy` and prints what it did; false if its plan is not valid.
template <class Policy>
bool run(const char* name, Policy& policy, const memplan::problem& p, const memplan::device_spec& dev,
         memplan::bytes_t budget) {
  const memplan::online::online_result r = memplan::online::run_online(p, dev, budget, policy, name);
  if (!r.result.feasible) {
    std::printf("%-13s does not fit: %s\n", name, r.result.reason.c_str());
    return true;
  }
  const memplan::report rep = memplan::simulate(p, r.result, dev, budget);
  const bool valid = memplan::validate(p, r.result, dev, budget).ok;
  std::printf("%-13s %4d evictions, %4d recomputes, overhead %5.1f %%, valid: %s\n", name, int(r.counts.evictions),
              int(r.counts.recomputations), 100 * rep.overhead, valid ? "yes" : "no");
  return valid;
}

}  // namespace

int main(int argc, char** argv) {
  const memplan::device_spec& dev = memplan::find_device("titan-rtx");
  memplan::model::options mo;
  mo.batch = argc > 2 ? std::atoi(argv[2]) : 32;
  const memplan::problem p = memplan::compile(memplan::model::build(argc > 1 ? argv[1] : "resnet50", mo, dev));
  const auto budget = memplan::bytes_t(double(p.baseline_peak()) * (argc > 3 ? std::atof(argv[3]) : 60) / 100);
  std::printf("%s at %s of %s:\n", p.name.c_str(), memplan::format_bytes(budget).c_str(),
              memplan::format_bytes(p.baseline_peak()).c_str());
  memplan::dtr_policy dtr;
  largest_first mine;
  const bool dtr_valid = run("dtr (h_DTR)", dtr, p, dev, budget);
  const bool valid = run("largest-first", mine, p, dev, budget) && dtr_valid;
  std::printf("largest-first released %s in all\n", memplan::format_bytes(mine.released).c_str());
  return valid ? 0 : 1;
}
