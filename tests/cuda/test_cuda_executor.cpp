// The executor on cuda::device (label `gpu`): the same data-integrity check
// as on host::device — every registered planner, several budgets, bit for
// bit — plus a fault and the profiler. Ops run as a framework without
// kernels would: inputs copied to pinned staging on the op's stream, the
// reference op as a host function on that stream (cudaLaunchHostFunc),
// outputs copied back; so every value crosses the device arena and the
// executor's streams, events and swaps. Without a GPU the program says so
// and exits 77: CTest reports it skipped.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <span>
#include <stdexcept>
#include <vector>

#include <cuda_runtime_api.h>

#include "executor_checks.hpp"
#include "float_net.hpp"
#include "main_or_skip.hpp"
#include "memplan/cost/devices.hpp"
#include "memplan/cost/profile.hpp"
#include "memplan/cuda/device.hpp"
#include "memplan/cuda/profiler.hpp"
#include "memplan/runtime/executor.hpp"

namespace {

using namespace memplan;

struct pinned_free {
  void operator()(std::byte* p) const noexcept { MEMPLAN_CUDA_ASSERT_OK(cudaFreeHost(p)); }
};

/// One op call staged through pinned host memory: each region's bytes (all
/// its pieces, in order) in one staging run, so the staged call's regions
/// are one piece each.
struct staged {
  const example::float_workload* w = nullptr;
  test::integrity* check = nullptr;
  runtime::op_call call;
  std::vector<void*> in, out;
  std::vector<runtime::piece> pieces;
  std::vector<runtime::region> in_regions, out_regions;
  std::unique_ptr<std::byte, pinned_free> memory;

  static void CUDART_CB run(void* self) {
    auto* s = static_cast<staged*>(self);
    s->check->check(*s->w, s->call);
  }
};

struct cuda_backend {
  using device = cuda::device;
  std::vector<std::unique_ptr<staged>> calls;  // alive until the next device is made (runs are synchronized)

  std::unique_ptr<device> make(bytes_t arena, bytes_t pinned) {
    calls.clear();
    return std::make_unique<device>(cuda::device_options{.ordinal = 0, .arena_bytes = arena, .pinned_bytes = pinned});
  }
  auto op(const example::float_workload& w, test::integrity& check) {
    return [this, &w, &check](const runtime::op_call& call, cuda::stream_view v) {
      auto s = std::make_unique<staged>();
      s->w = &w;
      s->check = &check;
      s->call = call;
      bytes_t total = call.workspace_bytes;
      for (const runtime::region& r : call.input_regions) total += r.bytes;
      for (const runtime::region& r : call.output_regions) total += r.bytes;
      std::byte* base = nullptr;
      MEMPLAN_CUDA_TRY(cudaHostAlloc(reinterpret_cast<void**>(&base), static_cast<std::size_t>(total) + 1, 0));
      s->memory.reset(base);
      const std::size_t n = call.input_regions.size() + call.output_regions.size();
      s->pieces.reserve(n);  // the regions' spans point into it: no reallocation
      const auto stage = [&](const runtime::region& r, bool output) {
        const bool leave = r.pieces.empty();  // an output the op leaves alone
        s->pieces.push_back({leave ? nullptr : base, r.bytes});
        const std::span<const runtime::piece> one(leave ? nullptr : &s->pieces.back(), leave ? 0 : 1);
        (output ? s->out_regions : s->in_regions).push_back({r.offset, r.bytes, one});
        (output ? s->out : s->in).push_back(leave ? nullptr : base);
        if (!output) {
          std::byte* to = base;
          for (const runtime::piece& p : r.pieces) {
            MEMPLAN_CUDA_TRY(cudaMemcpyAsync(to, p.address, static_cast<std::size_t>(p.bytes), cudaMemcpyDeviceToHost, v));
            to += p.bytes;
          }
        }
        base += r.bytes;
      };
      for (const runtime::region& r : call.input_regions) stage(r, false);
      for (const runtime::region& r : call.output_regions) stage(r, true);
      // A later micro-op adds to the weight gradient it writes: stage what it holds.
      for (std::size_t i = 0; i < call.output_regions.size(); ++i) {
        const runtime::region& r = call.output_regions[i];
        if (call.outputs[i] == nullptr || !example::accumulates(w, call)) continue;
        MEMPLAN_CUDA_TRY(cudaMemcpyAsync(s->out[i], call.outputs[i], static_cast<std::size_t>(r.bytes),
                                         cudaMemcpyDeviceToHost, v));
      }
      s->call.inputs = s->in;
      s->call.outputs = s->out;
      s->call.input_regions = s->in_regions;
      s->call.output_regions = s->out_regions;
      s->call.workspace = call.workspace == nullptr ? nullptr : base;
      MEMPLAN_CUDA_TRY(cudaLaunchHostFunc(v, &staged::run, s.get()));
      for (std::size_t i = 0; i < call.output_regions.size(); ++i) {
        if (call.outputs[i] == nullptr) continue;
        MEMPLAN_CUDA_TRY(cudaMemcpyAsync(call.outputs[i], s->out[i],
                                         static_cast<std::size_t>(call.output_regions[i].bytes),
                                         cudaMemcpyHostToDevice, v));
      }
      calls.push_back(std::move(s));
    };
  }
  static auto load(const example::float_workload& w) {
    return [&w](index_t t, void* address, cuda::stream_view v) {
      const auto& values = w.values[static_cast<std::size_t>(t)];
      MEMPLAN_CUDA_TRY(cudaMemcpyAsync(address, values.data(), values.size() * sizeof(float), cudaMemcpyDefault, v));
    };
  }
};

}  // namespace

TEST_CASE("cuda executor: every registered planner, several budgets: bit-identical, within budget") {
  cuda_backend backend;
  test::check_every_planner(backend);
}

TEST_CASE("cuda executor: a throwing op names the action; arena and pinned pool get every byte back") {
  const auto w = example::make_float_workload(4, true);
  // Half as much again as the baseline peak: room for the plan's memory
  // layout, which the arena then holds exactly.
  const device_spec titan = find_device("titan-rtx");
  const plan pl = find_planner("vdnn-all").run(w.p, titan, w.p.baseline_peak() * 3 / 2, planner_options{});
  REQUIRE(pl.feasible);
  cuda::device dev({.ordinal = 0, .arena_bytes = pl.arena_bytes, .pinned_bytes = runtime::pinned_bytes(w.p, pl, &titan)});
  runtime::executor<cuda::device> ex(dev, w.p, pl, titan);
  cuda_backend backend;
  test::integrity check(pl.actions.size());
  auto good = backend.op(w, check);
  const auto bad = [&](const runtime::op_call& call, cuda::stream_view v) {
    if (call.step == 3) throw std::runtime_error("launch failed");
    good(call, v);
  };
  CHECK_THROWS_WITH_AS((void)ex.run(bad, cuda_backend::load(w)), doctest::Contains("failed: launch failed"),
                       runtime::action_failed);
  CHECK(dev.arena().in_use() == 0);
  CHECK(dev.pinned().in_use() == 0);
}

TEST_CASE("cuda profiler: host link each way and device copy bandwidth, as a device profile") {
  const nlohmann::json j = cuda::device_profile(0, {.small_bytes = 4 << 10, .large_bytes = 64 << 20, .repeats = 10});
  MESSAGE("device profile: ", j.dump());
  const device_spec d = read_device_profile(j, find_device("h100"));
  // PCIe 3 x16 moves about 12 GB/s, PCIe 5 x16 about 55; NVLink-C2C more.
  CHECK(d.h2d.bandwidth_gb_s > 1.0);
  CHECK(d.d2h.bandwidth_gb_s > 1.0);
  CHECK(d.h2d.bandwidth_gb_s < 1000.0);
  CHECK(d.memory_bandwidth_gb_s > d.h2d.bandwidth_gb_s);
  CHECK(d.memory_bytes > 0);
  if (const char* out = std::getenv("MEMPLAN_PROFILE_OUT")) std::ofstream(out) << j.dump(2) << '\n';
}

int main(int argc, char** argv) {
  return memplan::test::main_or_skip(argc, argv,
                                     memplan::cuda::device_count() > 0 ? "" : "cudaGetDeviceCount found no CUDA device");
}
