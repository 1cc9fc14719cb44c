// x (1 KiB) -> f -> y (3 KiB) -> g -> z (512 B), through the core header
// alone: step 0 holds x and y, so the unplanned peak is 4,096 B. Laid out on
// titan-rtx (256 B alignment), z reuses x's place: the arena is 4,096 B too.
#include <cstdio>

#include <memplan/memplan.hpp>
#include <memplan/version.hpp>

#ifdef NLOHMANN_JSON_VERSION_MAJOR
#error "the core umbrella memplan/memplan.hpp must not include nlohmann/json"
#endif

int main() {
  memplan::graph g("test_package");
  memplan::tensor_info x, y, z;
  x.name = "x", x.bytes = 1024, x.kind = memplan::tensor_kind::input;
  y.name = "y", y.bytes = 3072, y.kind = memplan::tensor_kind::activation;
  z.name = "z", z.bytes = 512, z.kind = memplan::tensor_kind::activation;
  const auto tx = g.add_tensor(x), ty = g.add_tensor(y), tz = g.add_tensor(z);
  memplan::op_info f, h;
  f.name = "f", f.time_us = 10, f.inputs = {tx}, f.outputs = {ty};
  h.name = "g", h.time_us = 10, h.inputs = {ty}, h.outputs = {tz};
  g.add_op(f);
  g.add_op(h);
  const memplan::problem p = memplan::compile(g);
  const memplan::device_spec& d = memplan::find_device("titan-rtx");
  memplan::plan keep = memplan::none_planner{}(p, d, 4096, {});
  memplan::assign_layout(p, keep, d);
  const memplan::report r = memplan::simulate(p, keep, d, 4096);
  std::printf("memplan %s: live peak %lld B, arena %lld B of 4096, feasible %d\n", MEMPLAN_VERSION,
              static_cast<long long>(r.peak_live_bytes), static_cast<long long>(r.peak_bytes), r.feasible);
  return p.baseline_peak() == 4096 && r.feasible && r.peak_live_bytes == 4096 && r.peak_bytes == 4096 ? 0 : 1;
}
