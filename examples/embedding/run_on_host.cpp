// Run a plan on host::device: the executor carries out a plan's actions
// (compute, swap out, swap in, recompute, free) on its streams, with
// every device buffer at the plan's offset in an arena of exactly the
// plan's size. The framework gives two callbacks: `run_op` runs an op on
// the addresses the executor hands it, `load` fills the graph's inputs.
// Here each op writes, per element j, 1 + half the sum of its inputs'
// elements j (modulo their sizes); the planned run must end with the same
// updated weights as a plain loop.
//   run_on_host   (exit 0: the planned run's weights equal the loop's)
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <memplan/host/device.hpp>
#include <memplan/memplan.hpp>
#include <memplan/runtime/executor.hpp>

namespace {

constexpr std::size_t activation = 1 << 16, weight = 1 << 12;  // floats: 256 KiB, 16 KiB

std::size_t floats(const memplan::problem& p, memplan::index_t t) { return std::size_t(p.bytes[std::size_t(t)]) / 4; }

/// Step s's op: its output from its inputs' values.
void run_layer(const memplan::problem& p, std::size_t s, std::span<const float* const> in, float* out) {
  const auto inputs = p.inputs(s);
  for (std::size_t j = 0; j < floats(p, p.outputs(s)[0]); ++j) {
    float sum = 0;
    for (std::size_t i = 0; i < in.size(); ++i) sum += in[i][j % floats(p, inputs[i])];
    out[j] = 1 + sum / 2;
  }
}

/// "a", 3 -> "a3" (appended: GCC 12 warns falsely on "a" + std::to_string(3), PR 105329).
std::string named(const char* prefix, int i) {
  std::string name = prefix;
  return name.append(std::to_string(i));
}

memplan::graph eight_layers() {
  memplan::graph g("eight-layers");
  const auto tensor = [&](std::string name, memplan::tensor_kind kind) {
    memplan::tensor_info t;
    t.name = std::move(name), t.kind = kind;
    t.bytes = 4 * (memplan::is_persistent(kind) ? weight : activation);
    return g.add_tensor(std::move(t));
  };
  const auto op = [&](std::string name, memplan::phase ph, std::vector<memplan::index_t> in, memplan::index_t out) {
    memplan::op_info o;
    o.name = std::move(name), o.phase = ph, o.time_us = ph == memplan::phase::forward ? 100 : 200;
    o.inputs = std::move(in), o.outputs = {out};
    g.add_op(std::move(o));
  };
  using k = memplan::tensor_kind;
  std::vector<memplan::index_t> a{tensor("x", k::input)}, w;
  for (int i = 1; i <= 8; ++i) {
    w.push_back(tensor(named("w", i), k::parameter));
    a.push_back(tensor(named("a", i), k::activation));
    op(named("f", i), memplan::phase::forward, {a[i - 1], w.back()}, a.back());
  }
  memplan::index_t grad = a.back();
  for (int i = 8; i >= 1; --i) {  // b_i reads the gradient and a_{i-1}; u_i makes the updated w_i
    const memplan::index_t g_i = tensor(named("g", i), k::gradient);
    op(named("b", i), memplan::phase::backward, {grad, a[i - 1]}, g_i);
    const memplan::index_t updated = tensor(named("w", i) + "'", k::parameter);
    op(named("u", i), memplan::phase::update, {w[i - 1], g_i}, updated);
    grad = g_i;
  }
  return g;
}

}  // namespace

int main() {
  const memplan::problem p = memplan::compile(eight_layers());
  const memplan::device_spec& spec = memplan::find_device("titan-rtx");
  const memplan::bytes_t budget = p.baseline_peak() / 2;
  memplan::plan pl = memplan::superneurons_planner{}(p, spec, budget, {});
  memplan::assign_layout(p, pl, spec);
  if (!pl.feasible) {
    std::fprintf(stderr, "%s\n", pl.reason.c_str());
    return 2;
  }

  // The unplanned reference: every op once, in schedule order, nothing freed.
  std::vector<std::vector<float>> ref;
  for (std::size_t t = 0; t < p.num_tensors(); ++t) ref.emplace_back(floats(p, memplan::index_t(t)), 0.5F);
  for (std::size_t s = 0; s < p.num_steps(); ++s) {
    std::vector<const float*> in;
    for (const memplan::index_t t : p.inputs(s)) in.push_back(ref[std::size_t(t)].data());
    run_layer(p, s, in, ref[std::size_t(p.outputs(s)[0])].data());
  }

  // The arena: exactly the plan's layout; the pinned pool: its host copies at their peak.
  const memplan::bytes_t pinned = memplan::runtime::pinned_bytes(p, pl, &spec);
  memplan::host::device dev({.arena_bytes = pl.arena_bytes, .pinned_bytes = pinned, .before_copy = {}});
  memplan::runtime::executor<memplan::host::device> ex(dev, p, pl, spec);
  const memplan::runtime::run_stats stats = ex.run(
      [&p](const memplan::runtime::op_call& call, memplan::host::stream_view) {
        if (call.outputs[0] == nullptr) return;  // a recompute whose output is still there
        // SuperNeurons never splits an op, so every input lies in one piece
        // (a TSPLIT plan's may not: then read call.input_regions).
        std::vector<const float*> in;
        for (void* x : call.inputs) in.push_back(static_cast<const float*>(x));
        run_layer(p, std::size_t(call.step), in, static_cast<float*>(call.outputs[0]));
      },
      [&ref](memplan::index_t t, void* address, memplan::host::stream_view) {  // x and w: 0.5
        std::memcpy(address, ref[std::size_t(t)].data(), ref[std::size_t(t)].size() * sizeof(float));
      });

  int wrong = 0;
  std::vector<float> out(weight);
  for (std::size_t t = 0; t < p.num_tensors(); ++t) {
    if (p.tensor_name[t].back() != '\'') continue;  // the updated weights
    ex.read(memplan::index_t(t), std::as_writable_bytes(std::span(out)));
    wrong += out != ref[t];
  }
  std::printf("budget %s, arena %s: %d ops run, %s swapped out, peak %s live; updated weights %s\n",
              memplan::format_bytes(budget).c_str(), memplan::format_bytes(stats.arena_bytes).c_str(),
              int(stats.ops_run),
              memplan::format_bytes(stats.swapped_out_bytes).c_str(),
              memplan::format_bytes(stats.peak_live_bytes).c_str(), wrong == 0 ? "match" : "differ");
  return wrong == 0 ? 0 : 1;
}
