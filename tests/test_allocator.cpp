// Tests of runtime::caching_allocator, PyTorch's CUDA caching allocator
// rules (cost/allocator_spec.hpp), by bytes and offsets worked by hand.
#include <doctest/doctest.h>

#include <optional>

#include "memplan/runtime/caching_allocator.hpp"

namespace {

using namespace memplan;
using runtime::caching_allocator;
using runtime::release_clock;

constexpr bytes_t mib = bytes_t{1} << 20;

caching_allocator::allocation take(caching_allocator& a, bytes_t bytes) {
  const std::optional<caching_allocator::allocation> got = a.allocate(bytes);
  REQUIRE(got.has_value());
  return *got;
}

TEST_CASE("caching allocator: 512 B rounding, the small and large pools, segment sizes") {
  caching_allocator a(64 * mib, 256, allocator_spec{});
  // 1 B -> 512 B, small pool: a 2 MiB segment at 0, the rest kept (>= 512 B).
  const auto one = take(a, 1);
  CHECK(one.offset == 0);
  CHECK(one.size == 512);
  CHECK(a.reserved() == 2 * mib);
  // 1000 B -> 1024 B, best fit in the small segment's rest.
  CHECK(take(a, 1000).offset == 512);
  // 1 MiB is still small: at 1536, leaving 2 MiB - 1536 - 1 MiB = 1047040 B.
  CHECK(take(a, mib).offset == 1536);
  // 1 MiB + 1 B -> 1049088 B, large: a 20 MiB segment, first fit after the small one.
  const auto large = take(a, mib + 1);
  CHECK(large.offset == 2 * mib);
  CHECK(large.size == 1049088);
  // 12 MiB fits the large segment's rest (20 MiB - 1049088 B), best fit.
  CHECK(take(a, 12 * mib).offset == 2 * mib + 1049088);
  // 15 MiB + 1 B -> 15729152 B: no free block holds it (7 MiB left); >= 10
  // MiB, so a segment of it rounded up to 2 MiB (16 MiB) at 22 MiB. Its
  // rest, 1048064 B, is not more than 1 MiB: not split, the block is 16 MiB.
  const auto big = take(a, 15 * mib + 1);
  CHECK(big.offset == 22 * mib);
  CHECK(big.size == 16 * mib);
  CHECK(a.reserved() == 38 * mib);
  CHECK(a.high_water() == 38 * mib);
  // The small pool's rest, 1047040 B at 1050112, exactly: then a 512 B
  // request needs a new small segment, after the others.
  CHECK(take(a, 1046600).offset == 1050112);
  CHECK(take(a, 512).offset == 38 * mib);
  CHECK(a.driver_calls().mallocs == 4);
  CHECK(a.driver_calls().frees == 0);
  CHECK(a.driver_us() == doctest::Approx(4 * 50.0));
}

TEST_CASE("caching allocator: split and coalesce inside a segment, never across") {
  caching_allocator a(1000, 1, byte_exact_allocator());  // segments of exactly the request
  const auto x = take(a, 100);  // segment [0, 100)
  const auto y = take(a, 100);  // segment [100, 200)
  const auto z = take(a, 300);  // segment [200, 500)
  CHECK(y.offset == 100);
  CHECK(z.offset == 200);
  a.free(x.block, {3, no_index, no_index});
  a.free(y.block, {no_index, 4, no_index});
  // Two free neighbours in the arena, in two segments: 200 B does not fit
  // them; a new segment at 500.
  CHECK(take(a, 200).offset == 500);
  a.free(z.block, {6, no_index, no_index});
  // Best fit for 120 B among 100@0, 100@100, 300@200: 300@200, split; 180@320 stays free.
  const auto w = take(a, 120);
  CHECK(w.offset == 200);
  CHECK(w.after == release_clock{6, no_index, no_index});  // the bytes z left
  // 80 B: 100@0 and 100@100 tie on size, the lower address wins: 0, split.
  const auto v = take(a, 80);
  CHECK(v.offset == 0);
  CHECK(v.after == release_clock{3, no_index, no_index});
  // w freed merges with 180@320 in its segment: 300 B at 200 again, no new segment.
  a.free(w.block, {8, no_index, no_index});
  const auto u = take(a, 300);
  CHECK(u.offset == 200);
  CHECK(u.after == release_clock{8, no_index, no_index});  // the later of 6 and 8
  CHECK(a.driver_calls().mallocs == 4);
  CHECK(a.allocated() == 80 + 200 + 300);
  CHECK(a.reserved() == 700);
}

TEST_CASE("caching allocator: no room gives back the cached segments and tries again, then fails") {
  caching_allocator a(300, 1, byte_exact_allocator());
  const auto x = take(a, 100);
  const auto y = take(a, 100);
  a.free(x.block, {5, no_index, no_index});
  a.free(y.block, {no_index, 7, no_index});
  // 250 B: no free block, 100 B of arena left; both cached segments go
  // (two cudaFrees, one flush) and it lands at 0, after both clocks.
  const auto z = take(a, 250);
  CHECK(z.offset == 0);
  CHECK(z.after == release_clock{5, 7, no_index});
  CHECK(a.driver_calls().frees == 2);
  CHECK(a.driver_calls().flushes == 1);
  CHECK(a.reserved() == 250);
  CHECK(a.high_water() == 250);
  // 100 B: 50 B left, nothing cached: it fails after one more flush.
  CHECK_FALSE(a.allocate(100).has_value());
  CHECK(a.driver_calls().flushes == 2);
  CHECK(a.driver_us() == doctest::Approx(3 * 50.0 + 2 * 50.0));
  // A request of 0 bytes takes nothing.
  CHECK(take(a, 0).block == no_index);
}

TEST_CASE("caching allocator: bad input is an error, not an abort") {
  CHECK_THROWS_AS(caching_allocator(100, 3, allocator_spec{}), invalid_argument);
  CHECK_THROWS_AS(caching_allocator(-1, 256, allocator_spec{}), invalid_argument);
  caching_allocator a(100, 1, byte_exact_allocator());
  CHECK_THROWS_AS((void)a.allocate(-5), invalid_argument);
  CHECK_THROWS_AS(a.free(0, runtime::no_release), invalid_argument);
  const auto x = take(a, 10);
  a.free(x.block, runtime::no_release);
  CHECK_THROWS_WITH_AS(a.free(x.block, runtime::no_release), "caching allocator: block 0 is not allocated",
                       invalid_argument);
}

}  // namespace
