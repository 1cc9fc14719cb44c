#pragma once
// The trainers' driver, written once over a backend (a memplan::device and
// a kernel set: host_backend.hpp, cuda_backend.hpp). It builds a network's
// iteration as a graph, plans it for a budget, then trains twice from the
// same start: unplanned (every tensor kept, an arena of the keep-all
// layout) and under the plan (an arena of exactly the budget), and checks
// that every iteration's loss and the final weights are the same to the bit.
//
//   TRAINER [--planner P] [--budget PERCENT] [--iterations N] [--batch B] [--seed S] [--lr X]
//           [--device NAME] [--device-profile FILE] [--measure-ops] [--json]
//
// Exit status: 0 the planned run matched the unplanned one and its arena
// stayed within the budget, 1 it did not (or bad input, or no device),
// 2 no plan fits the budget.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include <memplan/io/device_profile.hpp>
#include <memplan/all.hpp>

#include "dispatch.hpp"
#include "network.hpp"

namespace memplan::trainers {

struct options {
  std::string planner = "tsplit";
  int budget_percent = 50;
  int iterations = 20;
  int batch = 0;  // 0: the network's default
  std::uint32_t seed = 1;
  float lr = 0.05f;
  std::string device = "titan-rtx";
  std::string device_profile;
  bool measure_ops = false;
  bool json = false;
};

inline options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const auto value = [&]() -> std::string {
      MEMPLAN_EXPECTS(i + 1 < argc, invalid_argument, "option '", a, "' needs a value");
      return argv[++i];
    };
    const auto number = [&](double low, double high) {
      const std::string v = value();
      std::size_t used = 0;
      double x = 0;
      try {
        x = std::stod(v, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      MEMPLAN_EXPECTS(used == v.size() && x >= low && x <= high, invalid_argument, "option '", a,
                      "': expected a number in [", low, ", ", high, "], got '", v, "'");
      return x;
    };
    if (a == "--planner") o.planner = value();
    else if (a == "--budget") o.budget_percent = static_cast<int>(number(1, 100));
    else if (a == "--iterations") o.iterations = static_cast<int>(number(1, 1e6));
    else if (a == "--batch") o.batch = static_cast<int>(number(1, 1 << 20));
    else if (a == "--seed") o.seed = static_cast<std::uint32_t>(number(0, 4294967295.0));
    else if (a == "--lr") o.lr = static_cast<float>(number(0, 1e3));
    else if (a == "--device") o.device = value();
    else if (a == "--device-profile") o.device_profile = value();
    else if (a == "--measure-ops") o.measure_ops = true;
    else if (a == "--json") o.json = true;
    else throw invalid_argument(memplan::detail::concat("unknown option '", a, "'"));
  }
  return o;
}

/// The op of the first step that reads tensor t.
inline index_t first_user(const network& n, index_t t) {
  for (std::size_t s = 0; s < n.p.num_steps(); ++s) {
    const auto in = n.p.inputs(static_cast<index_t>(s));
    if (std::find(in.begin(), in.end(), t) != in.end()) return n.p.op[s];
  }
  throw invalid_argument(memplan::detail::concat("trainer: no op reads tensor ", t));
}

/// Per tensor without a producer, its starting values: images uniform in
/// [-1, 1) and one-hot labels from the data seed; weights uniform in
/// ±1/sqrt(fan in) from a fixed seed; batch norm's gamma 1, beta 0; biases 0.
inline std::vector<std::vector<float>> initial_values(const network& n, std::uint32_t data_seed) {
  std::vector<std::vector<float>> v(n.p.num_tensors());
  const auto random = [](std::uint32_t& state) {  // Numerical Recipes' LCG, top 24 bits: [0, 1)
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(state >> 8) / 16777216.0f;
  };
  std::uint32_t data = 2654435761u * (data_seed + 1);
  v[static_cast<std::size_t>(n.images)].resize(static_cast<std::size_t>(n.p.bytes[static_cast<std::size_t>(n.images)] / 4));
  for (float& x : v[static_cast<std::size_t>(n.images)]) x = 2 * random(data) - 1;
  auto& onehot = v[static_cast<std::size_t>(n.onehot)];
  onehot.assign(static_cast<std::size_t>(n.batch) * n.classes, 0.0f);
  for (int s = 0; s < n.batch; ++s) {
    const int label = std::min(n.classes - 1, static_cast<int>(random(data) * static_cast<float>(n.classes)));
    onehot[static_cast<std::size_t>(s) * n.classes + label] = 1.0f;
  }
  std::uint32_t weights = 12345;
  for (const index_t param : n.parameters) {
    const auto t = static_cast<std::size_t>(param);
    const layer_call& user = n.calls[static_cast<std::size_t>(first_user(n, param))];
    auto& w = v[t];
    w.assign(static_cast<std::size_t>(n.p.bytes[t] / 4), 0.0f);
    if (user.kind == layer_op::batchnorm) {
      std::fill_n(w.begin(), user.d.c_in, 1.0f);
      continue;
    }
    const bool conv = user.kind == layer_op::conv;
    const std::size_t fan_in = conv ? 9 * static_cast<std::size_t>(user.d.c_in) : static_cast<std::size_t>(user.d.c_in);
    const std::size_t count = conv ? w.size() : w.size() - static_cast<std::size_t>(user.d.c_out);  // biases stay 0
    const float bound = 1.0f / std::sqrt(static_cast<float>(fan_in));
    for (std::size_t k = 0; k < count; ++k) w[k] = bound * (2 * random(weights) - 1);
  }
  return v;
}

/// What one training run gives.
struct run_result {
  std::vector<double> loss;     ///< per iteration: mean cross-entropy over the batch
  std::vector<double> time_ms;  ///< per iteration: wall time of the executor's run
  std::vector<std::vector<float>> weights;  ///< the parameters after the last iteration
  runtime::run_stats stats;                 ///< of the last iteration
  std::vector<double> op_time_us;           ///< per step, from the last iteration (with timing)
};

/// Trains `iterations` steps of `n` under `pl` on a device of `backend`
/// with an arena of `arena_bytes`, from `start`.
template <class Backend>
run_result train_under(Backend& backend, const network& n, const plan& pl, const device_spec& spec, bytes_t arena_bytes,
                       const std::vector<std::vector<float>>& start, int iterations, bool time_ops = false) {
  auto dev = backend.make_device(arena_bytes, runtime::pinned_bytes(n.p, pl, &spec));
  runtime::executor ex(*dev, n.p, pl, spec);
  run_result r;
  std::vector<std::vector<float>> state = start;
  std::vector<float> log_likelihood(static_cast<std::size_t>(n.batch));
  const index_t loss_op = n.p.producer[static_cast<std::size_t>(n.log_likelihood)];
  for (int it = 0; it < iterations; ++it) {
    const bool timing = time_ops && it == iterations - 1;
    if (timing) backend.start_timing(n.p.num_steps());
    const auto begin = std::chrono::steady_clock::now();
    r.stats = ex.run(
        [&](const runtime::op_call& call, typename Backend::stream_view view) {
          backend.kernels.bind(view);
          if (timing && !call.recompute) backend.begin_op(call.step, view);
          run_layer(n, backend.kernels, call);
          if (timing && !call.recompute) backend.end_op(call.step, view);
          if (call.step != loss_op || call.recompute) return;
          const runtime::region& out = call.output_regions[1];  // this call's samples' log-likelihoods
          dev->copy(log_likelihood.data() + out.offset / 4, call.outputs[1], static_cast<std::size_t>(out.bytes),
                    copy_kind::device_to_host, view);
        },
        [&](index_t t, void* address, typename Backend::stream_view view) {
          const auto& v = state[static_cast<std::size_t>(t)];
          backend.upload(*dev, address, v.data(), v.size() * sizeof(float), view);
        });
    r.time_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count());
    if (timing) r.op_time_us = backend.op_times();
    double sum = 0;
    for (const float x : log_likelihood) sum += x;
    r.loss.push_back(-sum / n.batch);
    for (std::size_t i = 0; i < n.parameters.size(); ++i) {
      auto& w = state[static_cast<std::size_t>(n.parameters[i])];
      ex.read(n.updated[i], std::as_writable_bytes(std::span(w)));
    }
  }
  for (const index_t w : n.parameters) r.weights.push_back(state[static_cast<std::size_t>(w)]);
  return r;
}

/// Whether two runs' weights are the same to the bit.
inline bool same_bits(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].size() != b[i].size() || std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0) {
      return false;
    }
  }
  return true;
}

/// FNV-1a over the weights' bytes.
inline std::uint64_t checksum(const std::vector<std::vector<float>>& weights) {
  std::uint64_t h = 1469598103934665603ull;
  for (const auto& w : weights) {
    for (const std::byte b : std::as_bytes(std::span(w))) h = (h ^ static_cast<std::uint64_t>(b)) * 1099511628211ull;
  }
  return h;
}

inline double median(std::vector<double> v) {
  if (v.size() > 1) v.erase(v.begin());  // the first iteration warms up
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

inline void print_report(const network& n, const options& o, bytes_t budget, const plan& pl, const report& sim,
                         const run_result& base, const run_result& got, bool identical, bool within) {
  const auto sum = checksum(got.weights);
  if (o.json) {
    nlohmann::json j{{"network", n.name}, {"planner", o.planner}, {"batch", n.batch}, {"iterations", o.iterations},
                     {"budget_bytes", budget}, {"baseline_peak_bytes", n.p.baseline_peak()}, {"feasible", pl.feasible},
                     {"identical", identical}, {"within_budget", within}, {"loss", got.loss}, {"unplanned_loss", base.loss},
                     {"checksum", sum}, {"unplanned_checksum", checksum(base.weights)},
                     {"arena_bytes", got.stats.arena_bytes}, {"peak_live_bytes", got.stats.peak_live_bytes},
                     {"arena_high_water_bytes", got.stats.arena_high_water_bytes},
                     {"unplanned_arena_bytes", base.stats.arena_bytes},
                     {"iteration_ms", median(got.time_ms)}, {"unplanned_iteration_ms", median(base.time_ms)},
                     {"simulated_ms", sim.time_us / 1e3}, {"simulated_unplanned_ms", sim.baseline_time_us / 1e3},
                     {"swapped_out_bytes", got.stats.swapped_out_bytes}, {"ops_run", got.stats.ops_run},
                     {"micro_actions", got.stats.micro_actions}};
    if (o.measure_ops) {  // as measured on this backend: what the planner and the simulator used
      nlohmann::json ops = nlohmann::json::object();
      for (std::size_t step = 0; step < n.p.num_steps(); ++step) ops[n.p.op_name[step]] = n.p.time_us[step];
      j["op_times_us"] = std::move(ops);
    }
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("%s, batch %d: baseline peak %s; %s at %d%% = %lld B\n", n.name.c_str(), n.batch,
              format_bytes(n.p.baseline_peak()).c_str(), o.planner.c_str(), o.budget_percent,
              static_cast<long long>(budget));
  for (std::size_t i = 0; i < got.loss.size(); ++i) {
    std::printf("iteration %zu: loss %.6f (unplanned %.6f), %.2f ms (unplanned %.2f ms)\n", i + 1, got.loss[i],
                base.loss[i], got.time_ms[i], base.time_ms[i]);
  }
  std::printf("planned: arena %lld B, high water %lld B of the %lld B budget (%s), live peak %lld B, %lld B swapped "
              "out, %d ops run, %d micro actions; simulated %.3f ms (unplanned %.3f ms)\n",
              static_cast<long long>(got.stats.arena_bytes), static_cast<long long>(got.stats.arena_high_water_bytes),
              static_cast<long long>(budget), within ? "within" : "OVER",
              static_cast<long long>(got.stats.peak_live_bytes), static_cast<long long>(got.stats.swapped_out_bytes),
              static_cast<int>(got.stats.ops_run), static_cast<int>(got.stats.micro_actions), sim.time_us / 1e3,
              sim.baseline_time_us / 1e3);
  std::printf("weights checksum %016llx (unplanned %016llx): %s\n", static_cast<unsigned long long>(sum),
              static_cast<unsigned long long>(checksum(base.weights)), identical ? "identical" : "DIFFERENT");
}

/// The device the graph's op times and the planner use: a named one, its
/// figures overridden by a profile file if given.
inline device_spec timing_device(const options& o) {
  device_spec spec = find_device(o.device);
  if (!o.device_profile.empty()) spec = io::read_device_profile_file(o.device_profile, spec);
  // Tensors of KiBs: a byte-exact allocator for dtr and delta (PyTorch's
  // 2 MiB segments would be many times the budget).
  spec.allocator = byte_exact_allocator();
  return spec;
}

/// The trainer's main: `build(batch, timing device, kernels)` makes the network.
template <class Backend, class Build>
int train_main(const char* program, int argc, char** argv, Build build) {
  try {
    const options o = parse(argc, argv);
    Backend backend;
    const device_spec spec = timing_device(o);
    network n = build(o.batch, o.lr, spec, backend.kernels);
    const auto start = initial_values(n, o.seed);
    const auto keep_all = [&] {  // the unplanned run: every tensor kept, at the offsets of its layout
      plan all = keep_all_plan(n.p, n.p.baseline_peak());
      assign_layout(n.p, all, spec);
      return all;
    };
    if (o.measure_ops) {  // the op times as this backend runs them, for the planner and the simulator;
      // timed in a second iteration, as cuDNN and cuBLAS set themselves up on their first calls
      const plan all = keep_all();
      n.p.time_us = train_under(backend, n, all, spec, all.arena_bytes, start, 2, true).op_time_us;
    }
    const bytes_t budget = n.p.baseline_peak() * o.budget_percent / 100;
    const plan planned = find_planner(o.planner).run(n.p, spec, budget, planner_options{});
    if (!planned.feasible) {
      std::fprintf(stderr, "%s: %s cannot meet %lld bytes: %s\n", program, o.planner.c_str(),
                   static_cast<long long>(budget), planned.reason.c_str());
      return 2;
    }
    const plan unplanned = keep_all();
    const run_result base = train_under(backend, n, unplanned, spec, unplanned.arena_bytes, start, o.iterations);
    const run_result got = train_under(backend, n, planned, spec, budget, start, o.iterations);
    const bool identical = base.loss == got.loss && same_bits(base.weights, got.weights);
    const bool within = got.stats.arena_high_water_bytes <= budget;
    print_report(n, o, budget, planned, simulate(n.p, planned, spec, budget), base, got, identical, within);
    return identical && within ? 0 : 1;
  } catch (const infeasible_budget& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
}

}  // namespace memplan::trainers
