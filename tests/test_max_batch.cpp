// Tests of the largest-batch search (planners/max_batch.hpp) with a fits()
// made by hand: the batches it tries, in order, the result, and the count;
// and of io/largest_batch.hpp, the search with a planner's plan at each batch.
#include <doctest/doctest.h>

#include <algorithm>
#include <initializer_list>
#include <vector>

#include "memplan/compile.hpp"
#include "memplan/cost/devices.hpp"
#include "memplan/error.hpp"
#include "memplan/io/largest_batch.hpp"
#include "memplan/model/zoo.hpp"
#include "memplan/planners/max_batch.hpp"

namespace {

using namespace memplan;

/// fits(B) iff B <= `largest`, recording every batch asked.
struct fits_up_to {
  int largest;
  std::vector<int> asked;
  bool operator()(int batch) {
    asked.push_back(batch);
    return batch <= largest;
  }
};

/// Fits at 1..10, 20..30 and 33 only, recording every batch asked.
struct fits_in_islands {
  std::vector<int> asked;
  int last_true = 0;
  bool operator()(int batch) {
    asked.push_back(batch);
    const bool ok = batch <= 10 || (batch >= 20 && batch <= 30) || batch == 33;
    if (ok) last_true = batch;
    return ok;
  }
};

/// `from`, `from` - 1, ..., `to`: a window scanned from its top.
std::vector<int> down(int from, int to) {
  std::vector<int> v;
  for (int b = from; b >= to; --b) v.push_back(b);
  return v;
}

std::vector<int> join(std::initializer_list<std::vector<int>> parts) {
  std::vector<int> v;
  for (const auto& p : parts) v.insert(v.end(), p.begin(), p.end());
  return v;
}

}  // namespace

TEST_CASE("max_batch without a window: fits iff B <= 37 gives 37 after 12 calls") {
  // Doubling: 1, 2, 4, 8, 16, 32 fit, 64 fails (7 calls); bisection of
  // (32, 64): 48 no, 40 no, 36 yes, 38 no, 37 yes (5 calls). 2 floor(log2 37) + 2 = 12.
  fits_up_to fits{37, {}};
  const batch_search found = max_batch(fits, 1 << 20, batch_window::none());
  CHECK(found.batch == 37);
  CHECK(found.bisected == 37);
  CHECK(found.probes == 12);
  CHECK(fits.asked == std::vector<int>{1, 2, 4, 8, 16, 32, 64, 48, 40, 36, 38, 37});
}

TEST_CASE("max_batch: fits iff B <= 37 gives 37 after 25 calls, the window above it checked") {
  // The 12 calls above, then W(37) = max(16, ceil(5 % of 37)) = 16: 53 down
  // to 38, less 48, 40 and 38, which the bisection saw fail: 13 calls.
  fits_up_to fits{37, {}};
  const batch_search found = max_batch(fits);
  CHECK(found.batch == 37);
  CHECK(found.bisected == 37);
  CHECK(found.probes == 25);
  CHECK(fits.asked == std::vector<int>{1, 2, 4, 8, 16, 32, 64, 48, 40, 36, 38, 37,  // bisection
                                       53, 52, 51, 50, 49, 47, 46, 45, 44, 43, 42, 41, 39});
}

TEST_CASE("max_batch: the last call that fits is the batch reported") {
  // A caller that keeps what its fits made on success (as `memplan maxbatch`
  // keeps the plan) holds the reported batch's.
  for (const int largest : {1, 2, 3, 37, 64, 100, 1000, 4095}) {
    CAPTURE(largest);
    for (const batch_window window : {batch_window::none(), batch_window{}}) {
      CAPTURE(window.batches);
      fits_up_to fits{largest, {}};
      int last_fit = 0;
      const batch_search found = max_batch(
          [&](int batch) {
            const bool ok = fits(batch);
            if (ok) last_fit = batch;
            return ok;
          },
          1 << 20, window);
      CHECK(found.batch == largest);
      CHECK(last_fit == largest);
      CHECK(found.probes == static_cast<int>(fits.asked.size()));
      // 2 floor(log2 B) + 2 calls to bisect: B = 1: 1 fits, 2 fails; B = 4095: 2 x 11 + 2 = 24.
      int log2 = 0;
      while ((2 << log2) <= largest) ++log2;
      if (window.batches == 0) {
        CHECK(found.probes == 2 * log2 + 2);
        continue;
      }
      // Then every batch of the window above B, each asked once: W(1000) = 50, W(4095) = 205.
      const auto w = static_cast<int>(window.size_above(largest));
      CHECK(w == std::max(16, (5 * largest + 99) / 100));
      for (int b = largest + 1; b <= largest + w; ++b) CHECK(std::ranges::count(fits.asked, b) == 1);
      CHECK(found.probes > 2 * log2 + 2);
      CHECK(found.probes <= 2 * log2 + 2 + w);
    }
  }
}

TEST_CASE("max_batch: batch 1 failing gives 0; the limit is never passed") {
  fits_up_to none{0, {}};
  const batch_search zero = max_batch(none, 1 << 20, batch_window::none());
  CHECK(zero.batch == 0);
  CHECK(zero.probes == 1);
  // With the window: 1 fails, then 16 down to 2 fail too.
  fits_up_to none_scanned{0, {}};
  const batch_search zero_scanned = max_batch(none_scanned);
  CHECK(zero_scanned.batch == 0);
  CHECK(none_scanned.asked == join({{1}, down(16, 2)}));
  // Everything fits: the doubling stops below the limit (1, 2, 4, ..., 64;
  // 128 would pass 100) and bisects (64, 101): 82, 91, 96, 98, 99, 100; no
  // window above the limit.
  fits_up_to all{1 << 30, {}};
  const batch_search capped = max_batch(all, 100);
  CHECK(capped.batch == 100);
  CHECK(all.asked == std::vector<int>{1, 2, 4, 8, 16, 32, 64, 82, 91, 96, 98, 99, 100});
  CHECK(capped.probes == 13);
  // The window stops at the limit: the doubling passes 45 after 32, the
  // bisection of (32, 46) asks 39, 35, 37, 38; the scan 45 down to 40.
  fits_up_to under{37, {}};
  const batch_search near_limit = max_batch(under, 45);
  CHECK(near_limit.batch == 37);
  CHECK(under.asked == std::vector<int>{1, 2, 4, 8, 16, 32, 39, 35, 37, 38, 45, 44, 43, 42, 41, 40});
  CHECK_THROWS_AS(static_cast<void>(max_batch(all, 0)), invalid_argument);
}

TEST_CASE("max_batch: where feasibility is not monotone, the window finds the largest batch it reaches") {
  // Fits at 1..10, 20..30 and 33. Doubling stops at 16 (fails), bisection
  // of (8, 16) gives 10: 8 calls. Known failures: 16, 12, 11.
  const std::vector<int> bisection{1, 2, 4, 8, 16, 12, 10, 11};
  SUBCASE("no window: the bisection's 10; 30 and 33 fit and are never asked for") {
    fits_in_islands fits;
    const batch_search found = max_batch(fits, 1 << 20, batch_window::none());
    CHECK(found.batch == 10);
    CHECK(found.probes == 8);
    CHECK(fits.asked == bisection);
  }
  SUBCASE("a window of 9 batches: 11 to 19 all fail, 10 stands") {
    fits_in_islands fits;
    const batch_search found = max_batch(fits, 1 << 20, batch_window{9, 0});
    CHECK(found.batch == 10);
    CHECK(found.probes == 14);
    CHECK(fits.asked == join({bisection, {19, 18, 17, 15, 14, 13}}));
    CHECK(fits.last_true == 10);
  }
  SUBCASE("the default window (16 batches here): 26 is in reach of 10, 33 of 26") {
    // From 10 the window's top, 26, fits; from 26, 42 down to 34 fail and
    // 33 fits; from 33, 49 down to 43 fail (42..34 known). 8 + 1 + 10 + 7.
    fits_in_islands fits;
    const batch_search found = max_batch(fits);
    CHECK(found.batch == 33);
    CHECK(found.bisected == 10);
    CHECK(found.probes == 26);
    CHECK(fits.asked == join({bisection, {26}, down(42, 33), down(49, 43)}));
    CHECK(fits.last_true == 33);
  }
  SUBCASE("a window of 2 batches reaches 20 from nowhere: 10; of 10 batches: 33") {
    fits_in_islands narrow;
    CHECK(max_batch(narrow, 1 << 20, batch_window{2, 0}).batch == 10);
    CHECK(narrow.asked == bisection);  // 11 and 12 are known failures: no call
    fits_in_islands ten;
    const batch_search found = max_batch(ten, 1 << 20, batch_window{10, 0});
    CHECK(found.batch == 33);
    // From 10: 20 fits; from 20: 30; from 30: 40 down to 34 fail, 33 fits;
    // from 33: 43 down to 41 fail (40..34 known).
    CHECK(found.probes == 21);
    CHECK(ten.asked == join({bisection, {20, 30}, down(40, 33), down(43, 41)}));
    CHECK(ten.last_true == 33);
  }
}

TEST_CASE("max_batch: bad windows are refused with the number") {
  fits_up_to fits{10, {}};
  CHECK_THROWS_WITH_AS(static_cast<void>(max_batch(fits, 100, batch_window{-1, 5})),
                       "max_batch: the window's batches must be 0 or more, got -1", invalid_argument);
  CHECK_THROWS_WITH_AS(static_cast<void>(max_batch(fits, 100, batch_window{16, -1})),
                       "max_batch: the window's percent of the best batch must be from 0 to 100, got -1",
                       invalid_argument);
  CHECK_THROWS_WITH_AS(static_cast<void>(max_batch(fits, 100, batch_window{16, 101})),
                       "max_batch: the window's percent of the best batch must be from 0 to 100, got 101",
                       invalid_argument);
  CHECK(fits.asked.empty());
}

TEST_CASE("largest_batch: plain20 with `none` in the baseline peak at batch 24: the batch, its plan, the count") {
  const device_spec& d = find_device("titan-rtx");
  const auto build = [&](int batch) {
    model::options o;
    o.batch = batch;
    return compile(model::build("plain20", o, d));
  };
  const planner_entry& none = find_planner("none");
  io::largest_batch_options o;
  io::size_spec budget;
  budget.bytes = build(24).baseline_peak();
  o.budget = budget;
  // The answer by planning every batch from 1 to 64.
  int largest = 0;
  for (int b = 1; b <= 64; ++b) {
    if (io::succeeded(io::run_and_simulate(none, build(b), d, o.budget->bytes, {}, false, std::nullopt))) largest = b;
  }
  REQUIRE(largest >= 12);  // 23: the layout at 24 needs more than its baseline peak
  REQUIRE(largest < 48);
  std::vector<int> asked;
  o.progress = [&](int batch, const io::planned&) { asked.push_back(batch); };
  const io::largest_batch_result found = io::largest_batch(build, d, none, {}, o);
  CHECK(found.search.batch == largest);
  CHECK(found.search.probes == static_cast<int>(asked.size()));
  REQUIRE(found.at_best);
  // The plan kept is the one made at the batch reported.
  const io::planned at = io::run_and_simulate(none, build(largest), d, o.budget->bytes, {}, false, std::nullopt);
  CHECK(found.at_best->sim.peak_bytes == at.sim.peak_bytes);
  CHECK(found.at_best->sim.time_us == at.sim.time_us);
  // `none` costs no time: a max overhead of 0 changes nothing; a budget of
  // 1 byte fits no batch, and there is no plan.
  o.max_overhead = 0;
  CHECK(io::largest_batch(build, d, none, {}, o).search.batch == largest);
  budget.bytes = 1;
  o.budget = budget;
  o.window = batch_window::none();
  const io::largest_batch_result nothing = io::largest_batch(build, d, none, {}, o);
  CHECK(nothing.search.batch == 0);
  CHECK(nothing.search.probes == 1);
  CHECK_FALSE(nothing.at_best);
  o.max_overhead = -1;
  CHECK_THROWS_WITH_AS(static_cast<void>(io::largest_batch(build, d, none, {}, o)),
                       "largest_batch: the max overhead must be 0 or more, got -1", invalid_argument);
}
