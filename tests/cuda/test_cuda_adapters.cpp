// Tests of the CUDA adapters that need the toolkit but no GPU: the views
// refuse the default stream, MEMPLAN_CUDA_TRY turns a failed call into a
// cuda_error naming it, the link fit of the profiler, and the concept.
#include <doctest/doctest.h>

#include <string>

#include "memplan/cuda/device.hpp"
#include "memplan/cuda/error.hpp"
#include "memplan/cuda/profiler.hpp"
#include "memplan/cuda/stream.hpp"

using namespace memplan;

static_assert(memplan::device<cuda::device>);
static_assert(!std::is_copy_constructible_v<cuda::stream> && std::is_move_constructible_v<cuda::stream>);
static_assert(!std::is_copy_constructible_v<cuda::event> && std::is_move_constructible_v<cuda::event>);
static_assert(std::is_convertible_v<cudaStream_t, cuda::stream_view>);
static_assert(!std::is_constructible_v<cuda::stream_view, int>);

TEST_CASE("cuda::stream_view refuses the legacy default stream") {
  const cudaStream_t legacy = nullptr;
  CHECK_THROWS_WITH_AS(cuda::stream_view{legacy},
                       "cuda::stream_view: the legacy default stream (0) is not allowed; create a stream",
                       invalid_argument);
}

TEST_CASE("MEMPLAN_CUDA_TRY throws cuda_error naming the call and the error") {
  // An invalid ordinal fails with or without a GPU (no device / no driver /
  // invalid device): every one is a cuda_error naming the call.
  try {
    MEMPLAN_CUDA_TRY(cudaSetDevice(-1));
    FAIL("cudaSetDevice(-1) succeeded");
  } catch (const cuda_error& e) {
    const std::string what = e.what();
    CHECK(what.find("cudaSetDevice(-1) returned cuda") != std::string::npos);
    CHECK(what.find("test_cuda_adapters.cpp") != std::string::npos);
  }
  // With a GPU the error (invalid device) is cleared before throwing; without
  // one the runtime's failed initialization stays for the whole process.
  if (cuda::device_count() > 0) CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("the profiler's link fit: latency + bytes / bandwidth through two points") {
  // 4 KiB in 10 µs, 64 MiB in 10 + 67104768 / 25000 µs: 25 GB/s, 10 µs.
  const bytes_t small = 4096, large = 64 << 20;
  const double large_us = 10.0 + static_cast<double>(large - small) / 25000.0 + 4096.0 / 25000.0;
  const link_spec l = cuda::detail::fit_link(small, 10.0 + 4096.0 / 25000.0, large, large_us);
  CHECK(l.bandwidth_gb_s == doctest::Approx(25.0));
  CHECK(l.latency_us == doctest::Approx(10.0));
  CHECK(l.transfer_us(large) == doctest::Approx(large_us));
}

TEST_CASE("device_count is an answer, not an error, without a GPU") {
  const int n = cuda::device_count();
  CHECK(n >= 0);
  if (n == 0) MESSAGE("no CUDA device here: the gpu-labelled tests skip themselves");
}
