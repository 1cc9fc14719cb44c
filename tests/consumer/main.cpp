// Builds a two-op graph through the umbrella header and checks its
// baseline peak: x (100 B) -> f -> y (300 B) -> g -> z (50 B). Step 0 holds
// x and y (400 B); step 1 holds y and z (350 B).
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
  return memplan::compile(g).baseline_peak() == 400 ? 0 : 1;
}
