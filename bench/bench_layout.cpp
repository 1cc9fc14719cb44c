// How fast `place` lays out an arena, and how close to the peak of live
// bytes (arena_layout.hpp). A synthetic training run of about 100,000
// allocations: parameters and Adam moments never freed; per iteration a
// forward pass whose activations (and some small saved tensors and masks)
// live until their layer's backward, workspace freed after each op,
// activation gradients live for one layer, parameter gradients until the
// update. With `split`, a third of the saved activations are split in place
// into 4 micro-tensors released one by one (TSPLIT §V-A). The zoo's models
// give the arena/peak ratio on their tensors' lifetimes with no planner;
// --table lays out the device buffers of the zoo's plans (runtime::layout_of:
// what the executor allocates, in issue order) under 60 %, 40 % and 30 % of
// the unplanned peak, the table of docs/results.md.
//
//   build/default/bench/bench_layout --benchmark_counters_tabular=true
//   build/default/bench/bench_layout --table
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "memplan/arena_layout.hpp"
#include "memplan/compile.hpp"
#include "memplan/cost/devices.hpp"
#include "memplan/model/zoo.hpp"
#include "memplan/planners/registry.hpp"
#include "memplan/problem.hpp"
#include "memplan/runtime/layout.hpp"

namespace {

using namespace memplan;

struct trace {
  std::vector<lifetime> allocations;
  std::vector<segment> segments;
};

/// One layer's sizes, the same in every iteration.
struct layer_sizes {
  bytes_t activation, weight, bias, workspace, saved_small;
  bool workspace_used, saves_small, saves_mask, split;
};

/// Records allocations and frees, one event position each.
class recorder {
 public:
  explicit recorder(trace& t) : t_(&t) {}
  std::size_t alloc(bytes_t bytes) {
    t_->allocations.push_back({.begin = now_++, .end = never_freed, .bytes = bytes});
    return t_->allocations.size() - 1;
  }
  void release(std::size_t a) { t_->allocations[a].end = now_++; }
  /// Releases `a` as `parts` micro-tensors, one event each.
  void release_split(std::size_t a, index_t parts) {
    lifetime& l = t_->allocations[a];
    l.first_segment = static_cast<index_t>(t_->segments.size());
    l.segments = parts;
    for (index_t k = 0; k < parts; ++k) {
      t_->segments.push_back({l.bytes * (k + 1) / parts - l.bytes * k / parts, now_++});
    }
    l.end = now_ - 1;
  }

 private:
  trace* t_;
  index_t now_ = 0;
};

std::vector<layer_sizes> draw_layers(int layers, bool split, std::mt19937_64& rng) {
  const auto log_uniform = [&](double lo, double hi) {
    return static_cast<bytes_t>(std::exp(std::uniform_real_distribution<double>(std::log(lo), std::log(hi))(rng)));
  };
  const auto chance = [&](double p) { return std::bernoulli_distribution(p)(rng); };
  std::vector<layer_sizes> out(static_cast<std::size_t>(layers));
  for (layer_sizes& l : out) {
    l = {.activation = log_uniform(64 << 10, 32 << 20),
         .weight = log_uniform(1 << 10, 16 << 20),
         .bias = log_uniform(64, 16 << 10),
         .workspace = log_uniform(1 << 10, 8 << 20),
         .saved_small = log_uniform(256, 8 << 10),
         .workspace_used = chance(0.5),
         .saves_small = chance(0.3),
         .saves_mask = chance(0.3),
         .split = split && chance(0.33)};
  }
  return out;
}

/// One training iteration: forward, backward, update.
void iteration(recorder& r, const std::vector<layer_sizes>& ls) {
  const std::size_t n = ls.size();
  std::vector<std::vector<std::size_t>> saved(n);
  saved[0].push_back(r.alloc(ls[0].activation));  // the input batch
  for (std::size_t i = 0; i < n; ++i) {
    const layer_sizes& l = ls[i];
    const std::size_t ws = l.workspace_used ? r.alloc(l.workspace) : 0;
    const std::size_t out = r.alloc(l.activation);
    if (l.saves_small) saved[i].push_back(r.alloc(l.saved_small));
    if (l.saves_mask) saved[i].push_back(r.alloc(l.activation / 4));
    if (l.workspace_used) r.release(ws);
    saved[i + 1 < n ? i + 1 : i].push_back(out);  // read by the next layer's backward
  }
  std::vector<std::size_t> grads;
  std::size_t g = r.alloc(ls[n - 1].activation);
  for (std::size_t i = n; i-- > 0;) {
    const layer_sizes& l = ls[i];
    const std::size_t ws = l.workspace_used ? r.alloc(l.workspace) : 0;
    const std::size_t g_in = i > 0 ? r.alloc(ls[i - 1].activation) : 0;
    grads.push_back(r.alloc(l.weight));
    grads.push_back(r.alloc(l.bias));
    if (l.workspace_used) r.release(ws);
    r.release(g);
    for (const std::size_t s : saved[i]) {
      if (l.split)
        r.release_split(s, 4);
      else
        r.release(s);
    }
    g = g_in;
  }
  for (const std::size_t gr : grads) r.release(gr);
}

trace training_trace(int layers, int iterations, bool split) {
  std::mt19937_64 rng(1);
  const std::vector<layer_sizes> ls = draw_layers(layers, split, rng);
  trace t;
  recorder r(t);
  for (const layer_sizes& l : ls) {  // parameters and Adam's two moments
    r.alloc(l.weight);
    r.alloc(l.bias);
    r.alloc(l.weight);
    r.alloc(l.weight);
  }
  for (int it = 0; it < iterations; ++it) iteration(r, ls);
  return t;
}

void report(benchmark::State& state, const trace& t, const arena_layout& l) {
  state.counters["allocations"] = static_cast<double>(t.allocations.size());
  state.counters["arena/peak"] = static_cast<double>(l.arena_bytes) / static_cast<double>(l.peak_live_bytes);
  state.counters["peak_MiB"] = static_cast<double>(l.peak_live_bytes) / (1 << 20);
}

// Args: layers, iterations, split. 440 layers x 41 iterations: 100,201
// allocations, 1,760 never freed (parameters and Adam's moments) and up to
// 885 others live at once; 2,000 x 8: 96,904, 8,000 and up to 4,005.
void bm_place_training(benchmark::State& state) {
  const trace t =
      training_trace(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)), state.range(2) != 0);
  arena_layout l;
  for (auto _ : state) {
    l = place(t.allocations, t.segments, 256);
    benchmark::DoNotOptimize(l);
  }
  report(state, t, l);
}
BENCHMARK(bm_place_training)
    ->Args({440, 41, 0})
    ->Args({440, 41, 1})
    ->Args({2000, 8, 0})
    ->Args({44, 3, 0})
    ->Unit(benchmark::kMillisecond);

/// A zoo model's tensors with no planner: each live from its producer to
/// its last reader (parameters and optimizer state throughout), workspace
/// for its op's step; step s allocates at 2s and frees at 2s + 1.
trace zoo_trace(std::string_view name, int batch) {
  model::options o;
  o.batch = batch;
  const problem p = compile(model::build(name, o, find_device("titan-rtx")));
  trace t;
  for (index_t i = 0; i < static_cast<index_t>(p.num_tensors()); ++i) {
    const index_t end = p.persistent(i) ? never_freed : 2 * p.live_end(i) + 1;
    t.allocations.push_back({.begin = 2 * p.live_begin(i), .end = end, .bytes = p.bytes[static_cast<std::size_t>(i)]});
  }
  for (index_t s = 0; s < static_cast<index_t>(p.num_steps()); ++s) {
    t.allocations.push_back({.begin = 2 * s, .end = 2 * s + 1, .bytes = p.workspace[static_cast<std::size_t>(s)]});
  }
  return t;
}

void bm_place_zoo(benchmark::State& state, std::string_view name, int batch) {
  const trace t = zoo_trace(name, batch);
  arena_layout l;
  for (auto _ : state) {
    l = place(t.allocations, t.segments, 256);
    benchmark::DoNotOptimize(l);
  }
  report(state, t, l);
}
BENCHMARK_CAPTURE(bm_place_zoo, resnet50, "resnet50", 64)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_place_zoo, densenet121, "densenet121", 64)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_place_zoo, inception_v3, "inception_v3", 64)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_place_zoo, bert_base, "bert-base", 8)->Unit(benchmark::kMillisecond);

// ---- --table ---------------------------------------------------------------------------

/// The device buffers of plan `pl` as lifetimes: action a issues at 2a + 1
/// (the tensors loaded at time 0 at 0), a buffer it releases goes at
/// 2a + 2; a buffer split in place is one allocation whose segments are its
/// micro-tensors, each ending with its own release.
trace plan_trace(const problem& p, const plan& pl) {
  const runtime::layout l = runtime::layout_of(p, pl);
  const auto made = [&](index_t a) { return a == l.load ? 0 : 2 * a + 1; };
  std::vector<char> at_load(l.device.size(), 0);
  for (const index_t b : l.released_at_load) at_load[static_cast<std::size_t>(b)] = 1;
  const auto end_of = [&](std::size_t b, index_t begin) {
    const runtime::buffer& x = l.device[b];
    if (x.release == no_index) return at_load[b] != 0 ? begin : never_freed;
    return 2 * x.release + 2;
  };
  trace t;
  for (std::size_t b = 0; b < l.device.size(); ++b) {
    const runtime::buffer& x = l.device[b];
    if (x.whole != no_index) continue;  // a segment of its whole buffer
    lifetime a{.begin = made(x.maker), .end = 0, .bytes = x.bytes};
    if (x.split_into == no_index) {
      a.end = end_of(b, a.begin);
    } else {
      a.first_segment = static_cast<index_t>(t.segments.size());
      a.segments = x.parts;
      for (index_t k = 0; k < x.parts; ++k) {
        const auto part = static_cast<std::size_t>(x.split_into + k);
        t.segments.push_back({micro_bytes(x.bytes, x.parts, k), end_of(part, a.begin)});
        a.end = std::max(a.end, t.segments.back().end);
      }
    }
    t.allocations.push_back(a);
  }
  return t;
}

/// One row: the layout of `t` and how long it took.
void print_row(const std::string& what, const trace& t) {
  const auto start = std::chrono::steady_clock::now();
  const arena_layout l = place(t.allocations, t.segments, 256);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::size_t split = 0;
  for (const lifetime& a : t.allocations) split += a.segments > 0 ? 1 : 0;
  std::printf("| %s | %zu | %zu | %.1f | %.4f | %.1f |\n", what.c_str(), t.allocations.size(), split,
              static_cast<double>(l.peak_live_bytes) / (1 << 20),
              static_cast<double>(l.arena_bytes) / static_cast<double>(l.peak_live_bytes), ms);
}

void print_table() {
  std::printf("| model / planner / budget | allocations | split | peak MiB | arena / peak | ms |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  const device_spec& dev = find_device("titan-rtx");
  for (const std::string_view name : {"vgg16", "resnet50", "inception_v3", "densenet121", "bert-base", "gpt2"}) {
    model::options o;
    o.batch = model::detail::is_sequence_model(name) ? 8 : 32;
    const problem p = compile(model::build(name, o, dev));
    print_row(std::string(name) + " / none", zoo_trace(name, o.batch));
    for (const int percent : {60, 40, 30}) {
      for (const std::string_view planner : {"capuchin", "tsplit", "dtr", "checkpoint"}) {
        const plan pl = find_planner(planner).run(p, dev, p.baseline_peak() * percent / 100, planner_options{});
        if (!pl.feasible) continue;
        print_row(std::string(name) + " / " + std::string(planner) + " / " + std::to_string(percent) + " %",
                  plan_trace(p, pl));
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--table") == 0) {
      print_table();
      return 0;
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
