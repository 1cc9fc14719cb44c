// memplan_train: trains the float network of float_net.hpp for a few SGD
// iterations on host::device, once with no planning and once under a
// planner's plan at a budget, and checks after every iteration that the
// planned run produced bit-identical parameters.
//
//   memplan_train [--planner NAME] [--budget PERCENT] [--layers N] [--batch B] [--residual]
//                [--iterations K]
//
// Exit status: 0 when every iteration matched, 1 when one did not, 2 for
// an infeasible budget, 1 for bad arguments.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include <memplan/memplan.hpp>

#include "float_net.hpp"

namespace {

using namespace memplan;

struct options {
  std::string planner = "capuchin";
  int budget_percent = 70;
  int layers = 6;
  int batch = 64;
  bool residual = false;
  int iterations = 5;
};

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const auto value = [&]() -> std::string {
      MEMPLAN_EXPECTS(i + 1 < argc, invalid_argument, "option '", a, "' needs a value");
      return argv[++i];
    };
    const auto number = [&](int low) {
      const std::string v = value();
      std::size_t used = 0;
      int n = 0;
      try {
        n = std::stoi(v, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      MEMPLAN_EXPECTS(used == v.size() && n >= low, invalid_argument, "option '", a, "': expected an integer >= ", low,
                      ", got '", v, "'");
      return n;
    };
    if (a == "--planner") o.planner = value();
    else if (a == "--budget") o.budget_percent = number(1);
    else if (a == "--layers") o.layers = number(1);
    else if (a == "--batch") o.batch = number(1);
    else if (a == "--residual") o.residual = true;
    else if (a == "--iterations") o.iterations = number(1);
    else throw invalid_argument(detail::concat("unknown option '", a, "'"));
  }
  return o;
}

/// One training step of `w` under `pl`: loads `state` (every tensor without
/// a producer), runs, moves the new parameters into `state`. Returns the
/// loss, 0.5 · mean of (h - target)², computed by the loss op.
double step(const example::float_workload& w, const plan& pl, const device_spec& spec, bytes_t budget,
            std::vector<std::vector<float>>& state,
            runtime::run_stats& stats) {
  // Issued as the simulator starts the actions on the plan's device.
  host::device dev({.arena_bytes = budget, .pinned_bytes = runtime::pinned_bytes(w.p, pl, &spec), .before_copy = {}});
  runtime::executor ex(dev, w.p, pl, spec);
  double sum = 0;  // of g², written by the loss op (or its micro-ops) on the compute stream, read after run()
  stats = ex.run(
      [&](const runtime::op_call& call, host::stream_view) {
        example::run_float_op(w, call);
        if (w.kind[static_cast<std::size_t>(call.op)] == example::float_op::loss_grad && !call.recompute) {
          const auto* g = static_cast<const float*>(call.outputs[0]);  // an output is one piece
          const auto n = static_cast<std::size_t>(call.output_regions[0].bytes) / sizeof(float);
          for (std::size_t i = 0; i < n; ++i) sum += static_cast<double>(g[i]) * g[i];
        }
      },
      [&](index_t t, void* address, host::stream_view) {
        const auto& v = state[static_cast<std::size_t>(t)];
        std::memcpy(address, v.data(), v.size() * sizeof(float));
      });
  for (std::size_t l = 0; l < w.weights.size(); ++l) {
    auto& weight = state[static_cast<std::size_t>(w.weights[l])];
    ex.read(w.updated[l], std::as_writable_bytes(std::span(weight)));
  }
  return 0.5 * sum / (static_cast<double>(w.batch) * w.width);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const options o = parse(argc, argv);
    const auto w = example::make_float_workload(o.layers, o.residual, o.batch);
    device_spec spec = find_device("titan-rtx");
    // Tensors of a few KiB: dtr's and delta's caching allocator scaled to
    // them (PyTorch's smallest segment, 2 MiB, is many times the budget).
    spec.allocator = byte_exact_allocator();
    const bytes_t peak = w.p.baseline_peak();
    const bytes_t budget = peak * o.budget_percent / 100;
    const plan planned = find_planner(o.planner).run(w.p, spec, budget, planner_options{});
    if (!planned.feasible) {
      std::fprintf(stderr, "memplan_train: %s cannot meet %lld bytes: %s\n", o.planner.c_str(),
                   static_cast<long long>(budget), planned.reason.c_str());
      return 2;
    }
    // The reference keeps every tensor, at the offsets of its memory layout
    // (which takes a little more than the live peak: alignment, and bytes
    // shared only once freed): its arena is that layout's.
    plan unplanned = keep_all_plan(w.p, peak);
    assign_layout(w.p, unplanned, spec);
    std::printf("%s network, %d layers, batch %d: baseline peak %lld B; %s at %d%% = %lld B\n",
                o.residual ? "residual" : "chain", o.layers, o.batch, static_cast<long long>(peak), o.planner.c_str(),
                o.budget_percent, static_cast<long long>(budget));
    std::vector<std::vector<float>> reference = w.values, trained = w.values;
    bool all_identical = true;
    for (int it = 1; it <= o.iterations; ++it) {
      runtime::run_stats base_stats, stats;
      const double base_loss = step(w, unplanned, spec, unplanned.arena_bytes, reference, base_stats);
      const double loss = step(w, planned, spec, budget, trained, stats);
      bool identical = base_loss == loss;
      for (const index_t t : w.weights) {  // bit for bit
        const auto& a = reference[static_cast<std::size_t>(t)];
        identical = identical && std::memcmp(a.data(), trained[static_cast<std::size_t>(t)].data(), a.size() * 4) == 0;
      }
      all_identical = all_identical && identical;
      std::printf("iteration %d: loss %.6f; planned: arena %lld B (live peak %lld B), %lld B swapped out, %d ops run (%zu steps): %s\n",
                  it, loss, static_cast<long long>(stats.arena_bytes), static_cast<long long>(stats.peak_live_bytes), static_cast<long long>(stats.swapped_out_bytes),
                  static_cast<int>(stats.ops_run), w.p.num_steps(), identical ? "identical" : "DIFFERENT");
    }
    return all_identical ? 0 : 1;
  } catch (const infeasible_budget& e) {
    std::fprintf(stderr, "memplan_train: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "memplan_train: %s\n", e.what());
    return 1;
  }
}
