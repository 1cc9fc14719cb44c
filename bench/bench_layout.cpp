// How fast `place` lays out an arena, and how close to the peak of live
// bytes (arena_layout.hpp). A synthetic training run of about 100,000
// allocations: parameters and Adam moments never freed; per iteration a
// forward pass whose activations (and some small saved tensors and masks)
// live until their layer's backward, workspace freed after each op,
// activation gradients live for one layer, parameter gradients until the
// update. With `split`, a third of the saved activations are split in place
// into 4 micro-tensors released one by one (TSPLIT §V-A). The zoo's models
// give the arena/peak ratio on their tensors' lifetimes with no planner.
//
//   build/default/bench/bench_layout --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

#include "memplan/arena_layout.hpp"
#include "memplan/cost/devices.hpp"
#include "memplan/model/zoo.hpp"
#include "memplan/problem.hpp"

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

// Args: layers, iterations, split. 440 layers x 30 iterations: 101,150
// allocations (about 1,800 parameters and states and up to 1,000
// activations live at once); 2,000 x 6: 99,296, up to 4,600 activations.
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

}  // namespace

BENCHMARK_MAIN();
