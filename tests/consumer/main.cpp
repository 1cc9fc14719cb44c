// Builds a two-op graph through the umbrella header, checks its baseline
// peak and simulates the `none` plan in an arena of exactly its layout:
// x (100 B) -> f -> y (300 B) -> g -> z (50 B). Step 0 holds x and y
// (400 B); step 1 holds y and z (350 B). On titan-rtx every allocation is
// aligned to 256 B: x and y take 256 + 512 B, z reuses x's 256.
#include <memplan/memplan.hpp>

int main() {
  memplan::graph g("consumer");
  memplan::tensor_info x, y, z;
  x.name = "x", x.bytes = 100, x.kind = memplan::tensor_kind::input;
  y.name = "y", y.bytes = 300, y.kind = memplan::tensor_kind::activation;
  z.name = "z", z.bytes = 50, z.kind = memplan::tensor_kind::activation;
  const auto tx = g.add_tensor(x), ty = g.add_tensor(y), tz = g.add_tensor(z);
  memplan::op_info f, h;
  f.name = "f", f.time_us = 1, f.inputs = {tx}, f.outputs = {ty};
  h.name = "g", h.time_us = 1, h.inputs = {ty}, h.outputs = {tz};
  g.add_op(f);
  g.add_op(h);
  const memplan::problem p = memplan::compile(g);
  const memplan::device_spec& d = memplan::find_device("titan-rtx");
  const memplan::plan keep = memplan::find_planner("none").run(p, d, 768, {});
  const memplan::report r = memplan::simulate(p, keep, d, 768);
  return p.baseline_peak() == 400 && r.feasible && r.peak_live_bytes == 400 && r.peak_bytes == 768 ? 0 : 1;
}
