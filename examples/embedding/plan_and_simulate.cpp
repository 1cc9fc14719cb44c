// Plan and simulate: build a training step in code with memplan::graph,
// compile it to a problem, and ask each classic planner for a plan under a
// budget of 70 % of the unplanned peak. The simulator says what each plan
// costs on the device (time, overhead, peak, bytes moved) and the validator
// checks it independently; `decisions` says per tensor what the plan does.
//   plan_and_simulate   (exit 0: every feasible plan is valid)
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <memplan/memplan.hpp>

namespace {

/// "a", 3 -> "a3" (appended: GCC 12 warns falsely on "a" + std::to_string(3), PR 105329).
std::string named(const char* prefix, int i) {
  std::string name = prefix;
  return name.append(std::to_string(i));
}

/// A six-layer step: forward (8 ms a layer), loss, backward (16 ms a layer).
memplan::graph six_layers() {
  using memplan::tensor_kind;
  memplan::graph g("six-layers");
  const auto tensor = [&](std::string name, long long mib, tensor_kind kind) {
    memplan::tensor_info t;
    t.name = std::move(name), t.bytes = mib << 20, t.kind = kind;
    return g.add_tensor(std::move(t));
  };
  const auto op = [&](std::string name, memplan::phase ph, double us, std::vector<memplan::index_t> in,
                      std::vector<memplan::index_t> out) {
    memplan::op_info o;
    o.name = std::move(name), o.phase = ph, o.time_us = us, o.inputs = std::move(in), o.outputs = std::move(out);
    g.add_op(std::move(o));
  };
  constexpr int layers = 6;
  std::vector<memplan::index_t> a{tensor("x", 128, tensor_kind::input)}, w;
  for (int i = 1; i <= layers; ++i) {
    w.push_back(tensor(named("w", i), 8, tensor_kind::parameter));
    a.push_back(tensor(named("a", i), 128, tensor_kind::activation));
    op(named("layer", i), memplan::phase::forward, 8000, {a[i - 1], w.back()}, {a[i]});
  }
  memplan::index_t grad = tensor(named("g", layers), 128, tensor_kind::gradient);
  op("loss", memplan::phase::backward, 500, {a[layers]}, {grad});
  for (int i = layers; i >= 1; --i) {
    const memplan::index_t dw = tensor(named("dw", i), 8, tensor_kind::parameter_gradient);
    std::vector<memplan::index_t> out{dw};
    if (i > 1) out.push_back(tensor(named("g", i - 1), 128, tensor_kind::gradient));
    op(named("layer", i) + ".backward", memplan::phase::backward, 16000, {grad, a[i - 1], w[i - 1]}, out);
    grad = out.back();
  }
  return g;
}

}  // namespace

int main() {
  const memplan::problem p = memplan::compile(six_layers());
  const memplan::device_spec& device = memplan::find_device("titan-rtx");
  const memplan::bytes_t budget = p.baseline_peak() * 7 / 10;
  std::printf("%s: %zu ops, unplanned peak %s, budget %s\n", p.name.c_str(), p.num_steps(),
              memplan::format_bytes(p.baseline_peak()).c_str(), memplan::format_bytes(budget).c_str());
  bool all_valid = true;
  const auto show = [&](auto planner) {
    memplan::plan pl = planner(p, device, budget, {});
    if (!pl.feasible) {  // the reason names the op, the bytes needed and the bytes free
      std::printf("%-13s does not fit: %s\n", pl.planner.c_str(), pl.reason.c_str());
      return;
    }
    memplan::assign_layout(p, pl, device);  // a fixed memory layout: the plan runs in an arena of its budget
    const memplan::report r = memplan::simulate(p, pl, device, budget);
    const bool valid = memplan::validate(p, pl, device, budget).ok;
    all_valid = all_valid && valid;
    std::printf("%-13s %6.1f ms, overhead %5.1f %%, arena %s, %s swapped out, %d recomputes, valid: %s\n",
                pl.planner.c_str(), r.time_us / 1000, 100 * r.overhead, memplan::format_bytes(r.peak_bytes).c_str(),
                memplan::format_bytes(r.swapped_out_bytes).c_str(), int(r.recomputed_ops), valid ? "yes" : "no");
    for (std::size_t t = 0; t < p.num_tensors(); ++t) {
      const memplan::decision d = pl.decisions[t];
      if (d != memplan::decision::keep) std::printf("  %s: %s", p.tensor_name[t].c_str(), to_string(d).data());
    }
    std::printf("\n");
  };
  show(memplan::vdnn_all_planner{});
  show(memplan::checkpoint_planner{});
  show(memplan::superneurons_planner{});
  return all_valid ? 0 : 1;
}
