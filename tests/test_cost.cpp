// The device cost model: named specs, the roofline, device profiles, splits.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "memplan/cost/devices.hpp"
#include "memplan/cost/profile.hpp"
#include "memplan/cost/roofline.hpp"
#include "memplan/cost/split.hpp"

using namespace memplan;

TEST_CASE("the named devices have the cards' memory") {
  constexpr bytes_t gib = bytes_t{1} << 30;
  CHECK(devices().size() == 8);
  CHECK(find_device("titan-rtx").memory_bytes == 24 * gib);
  CHECK(find_device("titan-v").memory_bytes == 12 * gib);
  CHECK(find_device("gtx-1080ti").memory_bytes == 11 * gib);
  CHECK(find_device("rtx-2080ti").memory_bytes == 11 * gib);
  CHECK(find_device("p100").memory_bytes == 16 * gib);
  CHECK(find_device("v100").memory_bytes == 32 * gib);
  CHECK(find_device("a100").memory_bytes == 80 * gib);
  CHECK(find_device("h100").memory_bytes == 80 * gib);
  CHECK(find_device("titan-rtx").fp32_tflops == 16.3);
  CHECK(find_device("a100").tf32_tflops == 156.0);
  CHECK(find_device("a100").memory_bandwidth_gb_s == 2039.0);
  for (const auto& d : devices()) {
    CAPTURE(d.name);
    CHECK(d.fp32_tflops > 0);
    CHECK(d.memory_bandwidth_gb_s > 0);
    CHECK(d.h2d.bandwidth_gb_s > 0);
    CHECK(d.d2h.bandwidth_gb_s >= d.h2d.bandwidth_gb_s);
  }
  // PCIe 3.0 x16, 12 GB/s sustained: 1 GB takes 10 µs + 83,333 µs.
  CHECK(find_device("p100").h2d.transfer_us(1'000'000'000) == doctest::Approx(10 + 1e6 / 12.0));
  CHECK(find_device("a100").h2d.bandwidth_gb_s == 2 * find_device("p100").h2d.bandwidth_gb_s);
}

TEST_CASE("an unknown device is named, with the known ones") {
  CHECK_THROWS_WITH_AS((void)find_device("k80"),
                       "unknown device 'k80'; known devices: titan-rtx, titan-v, gtx-1080ti, rtx-2080ti, p100, v100, "
                       "a100, h100",
                       invalid_argument);
}

TEST_CASE("roofline: compute-bound and memory-bound ops") {
  const auto& titan = find_device("titan-rtx");
  // 1 GFLOP of GEMM: 5 µs launch + 1e9 / (16.3e6 FLOP/µs x 0.65).
  CHECK(roofline_time_us(titan, 1e9, 0) == doctest::Approx(5 + 1e9 / (16.3e6 * 0.65)));
  // 1 GB streamed: 5 + 1e9 / (672e3 B/µs x 0.85) = 1,755.7 µs.
  CHECK(roofline_time_us(titan, 1e6, 1e9, math_mode::fp32, elementwise_efficiency) ==
        doctest::Approx(5 + 1e9 / (672e3 * 0.85)));
  // The larger of the two wins, never the sum.
  CHECK(roofline_time_us(titan, 1e9, 1e3) == doctest::Approx(roofline_time_us(titan, 1e9, 0)));
  CHECK(roofline_time_us(titan, 0, 0) == titan.launch_overhead_us);
  // Tensor cores where the device has them, FP32 where it does not.
  CHECK(peak_tflops(find_device("a100"), math_mode::tf32) == 156.0);
  CHECK(peak_tflops(titan, math_mode::tf32) == 16.3);
  CHECK(peak_tflops(titan, math_mode::half) == 130.0);
  CHECK(peak_tflops(find_device("gtx-1080ti"), math_mode::half) == 11.34);
  CHECK_THROWS_AS((void)roofline_time_us(titan, -1, 0), invalid_argument);
}

TEST_CASE("a device profile overrides any figure") {
  const auto profile = nlohmann::json::parse(R"({
    "name": "lab-titan", "memory_bytes": 1000, "fp32_tflops": 14.0, "launch_overhead_us": 3.5,
    "h2d": {"bandwidth_gb_s": 11.2}, "d2h": {"latency_us": 7}, "comment": "ignored"})");
  const device_spec d = read_device_profile(profile, find_device("titan-rtx"));
  CHECK(d.name == "lab-titan");
  CHECK(d.memory_bytes == 1000);
  CHECK(d.fp32_tflops == 14.0);
  CHECK(d.bf16_tflops == 130.0);  // untouched
  CHECK(d.launch_overhead_us == 3.5);
  CHECK(d.h2d.bandwidth_gb_s == 11.2);
  CHECK(d.h2d.latency_us == 10.0);
  CHECK(d.d2h.latency_us == 7.0);
  CHECK(d.d2h.bandwidth_gb_s == 13.0);
}

TEST_CASE("a bad device profile names the field") {
  const auto& base = find_device("p100");
  CHECK_THROWS_WITH_AS(read_device_profile(nlohmann::json::parse(R"({"fp32_tflops": "fast"})"), base),
                       doctest::Contains("'fp32_tflops' must be a number"), invalid_graph);
  CHECK_THROWS_WITH_AS(read_device_profile(nlohmann::json::parse(R"({"h2d": {"latency_us": -1}})"), base),
                       doctest::Contains("'h2d.latency_us' must be non-negative"), invalid_graph);
  CHECK_THROWS_WITH_AS(read_device_profile(nlohmann::json::parse(R"({"memory_bandwidth_gb_s": 0})"), base),
                       doctest::Contains("'memory_bandwidth_gb_s' must be positive"), invalid_graph);
  CHECK_THROWS_WITH_AS(read_device_profile(nlohmann::json::parse(R"({"memory_bytes": 1.5})"), base),
                       doctest::Contains("'memory_bytes' must be a positive integer"), invalid_graph);
  CHECK_THROWS_AS(read_device_profile(nlohmann::json::parse("[]"), base), invalid_graph);
}

TEST_CASE("split cost: launch overhead and under-utilisation (TSPLIT Fig. 5)") {
  const auto& titan = find_device("titan-rtx");
  CHECK(split_time_us(titan, 1000, 1) == 1000);
  // Large parts stay efficient: only the extra launches cost.
  CHECK(split_time_us(titan, 1000, 4) == doctest::Approx(1000 + 3 * 5));
  // An 8 µs op in 4 parts: each 2 µs part runs as sqrt(2 x 20) µs.
  CHECK(split_time_us(titan, 8, 4) == doctest::Approx(4 * std::sqrt(40.0) + 15));
  // More parts never make an op faster.
  for (int p = 1; p < 64; ++p) CHECK(split_time_us(titan, 100, p + 1) >= split_time_us(titan, 100, p));
}
