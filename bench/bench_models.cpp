// How fast the zoo builds graphs (a 100,000-op gpt2 must take well under a
// second), and, with --table, the numbers of docs/models.md:
//
//   build-zoo/bench/bench_models                       # Google Benchmark
//   build-zoo/bench/bench_models --table               # docs/models.md table
//   build-zoo/bench/bench_models --saved resnet50 8    # forward saved-tensor bytes
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "memplan/compile.hpp"
#include "memplan/cost/devices.hpp"
#include "memplan/model/zoo.hpp"
#include "memplan/planners/max_batch.hpp"
#include "memplan/problem.hpp"

namespace {

using namespace memplan;

// gpt2 with `layers` blocks: 48 ops a block, 2,100 blocks = 100,850 ops.
void bm_gpt2_build(benchmark::State& state) {
  model::options o;
  o.batch = 1;
  o.seq_len = 128;
  o.layers = static_cast<int>(state.range(0));
  const auto& dev = find_device("titan-rtx");
  std::size_t ops = 0;
  for (auto _ : state) {
    graph g = model::build("gpt2", o, dev);
    ops = g.num_ops();
    benchmark::DoNotOptimize(g);
  }
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["ops/s"] = benchmark::Counter(static_cast<double>(ops), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(bm_gpt2_build)->Arg(21)->Arg(210)->Arg(2100)->Unit(benchmark::kMillisecond);

// Building and compiling (DFS schedule) a 100,000-op gpt2 graph.
void bm_gpt2_build_and_compile(benchmark::State& state) {
  model::options o;
  o.batch = 1;
  o.seq_len = 128;
  o.layers = 2100;
  const auto& dev = find_device("titan-rtx");
  for (auto _ : state) {
    problem p = compile(model::build("gpt2", o, dev));
    benchmark::DoNotOptimize(p);
  }
}
BENCHMARK(bm_gpt2_build_and_compile)->Unit(benchmark::kMillisecond);

void bm_zoo_build(benchmark::State& state, std::string_view name) {
  model::options o;
  o.batch = 32;
  const auto& dev = find_device("titan-rtx");
  for (auto _ : state) {
    graph g = model::build(name, o, dev);
    benchmark::DoNotOptimize(g);
  }
}
BENCHMARK_CAPTURE(bm_zoo_build, resnet50, "resnet50")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_zoo_build, inception_v4, "inception_v4")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_zoo_build, bert_large, "bert-large")->Unit(benchmark::kMillisecond);

// ---- --table ---------------------------------------------------------------------------

bytes_t peak(std::string_view name, model::options o) { return compile(model::build(name, o, find_device("titan-rtx"))).baseline_peak(); }

// Largest batch whose baseline peak fits in `memory` (0 if none).
int largest_batch(std::string_view name, model::options o, bytes_t memory) {
  return memplan::max_batch([&](int b) {
    o.batch = b;
    return peak(name, o) <= memory;
  }).batch;
}

bool is_image(std::string_view name) { return !model::detail::is_sequence_model(name); }

void print_table() {
  constexpr double gib = 1024.0 * 1024.0 * 1024.0;
  std::printf("| model | parameters | ops (b16) | peak b16 titan-rtx | titan-rtx 24 GiB | p100 16 GiB | rtx-2080ti 11 GiB (CIFAR) | a100 80 GiB |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const auto name : model::names()) {
    model::options o;
    o.batch = 16;
    const auto m = model::build_model(name, o, find_device("titan-rtx"));
    const bytes_t p16 = compile(m.graph).baseline_peak();
    model::options home;
    home.cifar = is_image(name);
    std::printf("| %s | %lld | %zu | %.2f GiB | %d | %d | %d | %d |\n", std::string(name).c_str(),
                static_cast<long long>(m.parameters + m.task_head_parameters), m.graph.num_ops(),
                static_cast<double>(p16) / gib, largest_batch(name, {}, find_device("titan-rtx").memory_bytes),
                largest_batch(name, {}, find_device("p100").memory_bytes),
                largest_batch(name, home, find_device("rtx-2080ti").memory_bytes),
                largest_batch(name, {}, find_device("a100").memory_bytes));
  }
  // TSPLIT Table V: the largest width factor k at batch 16 on the Titan RTX.
  std::printf("\n| model | largest k at batch 16, titan-rtx |\n|---|---:|\n");
  for (const std::string_view name : {"vgg16", "vgg19", "resnet50", "resnet101", "inception_v4", "transformer"}) {
    model::options o;
    o.batch = 16;
    const int k = memplan::max_batch(
                      [&](int scale) {
                        o.scale = scale;
                        return peak(name, o) <= find_device("titan-rtx").memory_bytes;
                      },
                      128)
                      .batch;
    std::printf("| %s | %d |\n", std::string(name).c_str(), k);
  }
}

// Bytes of the activation and input tensors some backward op reads: what
// autograd saves in the forward pass (examples/pytorch/saved_tensors.py).
void print_saved(std::string_view name, int batch) {
  model::options o;
  o.batch = batch;
  const graph g = model::build(name, o, find_device("titan-rtx"));
  bytes_t saved = 0;
  std::size_t count = 0;
  for (std::size_t t = 0; t < g.num_tensors(); ++t) {
    const auto& info = g.tensor(static_cast<index_t>(t));
    if (info.kind != tensor_kind::activation && info.kind != tensor_kind::input) continue;
    for (const index_t v : g.consumers(static_cast<index_t>(t))) {
      if (g.op(v).phase == phase::backward) {
        saved += info.bytes;
        ++count;
        break;
      }
    }
  }
  std::printf("| %s | %d | %zu | %lld |\n", std::string(name).c_str(), batch, count, static_cast<long long>(saved));
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--table") == 0) {
      print_table();
      return 0;
    }
    if (std::strcmp(argv[i], "--saved") == 0 && i + 2 < argc) {
      print_saved(argv[i + 1], std::atoi(argv[i + 2]));
      return 0;
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
