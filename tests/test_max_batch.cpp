// Tests of the largest-batch search (planners/max_batch.hpp) with a fits()
// made by hand: the batches it tries, in order, the result, and the count.
#include <doctest/doctest.h>

#include <vector>

#include "memplan/error.hpp"
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

}  // namespace

TEST_CASE("max_batch: fits iff B <= 37 gives 37 after 12 calls") {
  // Doubling: 1, 2, 4, 8, 16, 32 fit, 64 fails (7 calls); bisection of
  // (32, 64): 48 no, 40 no, 36 yes, 38 no, 37 yes (5 calls). 2 floor(log2 37) + 2 = 12.
  fits_up_to fits{37, {}};
  const batch_search found = max_batch(fits);
  CHECK(found.batch == 37);
  CHECK(found.probes == 12);
  CHECK(fits.asked == std::vector<int>{1, 2, 4, 8, 16, 32, 64, 48, 40, 36, 38, 37});
}

TEST_CASE("max_batch: the last call that fits is the batch reported") {
  // A caller that keeps what its fits made on success (as `memplan maxbatch`
  // keeps the plan) holds the reported batch's.
  for (const int largest : {1, 2, 3, 37, 64, 100, 1000, 4095}) {
    CAPTURE(largest);
    fits_up_to fits{largest, {}};
    int last_fit = 0;
    const batch_search found = max_batch([&](int batch) {
      const bool ok = fits(batch);
      if (ok) last_fit = batch;
      return ok;
    });
    CHECK(found.batch == largest);
    CHECK(last_fit == largest);
    // 2 floor(log2 B) + 2 calls: B = 1: 1 fits, 2 fails; B = 4095: 2 x 11 + 2 = 24.
    int log2 = 0;
    while ((2 << log2) <= largest) ++log2;
    CHECK(found.probes == 2 * log2 + 2);
  }
}

TEST_CASE("max_batch: batch 1 failing gives 0 after one call; the limit is never passed") {
  fits_up_to none{0, {}};
  const batch_search zero = max_batch(none);
  CHECK(zero.batch == 0);
  CHECK(zero.probes == 1);
  // Everything fits: the doubling stops below the limit (1, 2, 4, ..., 64;
  // 128 would pass 100) and bisects (64, 101): 82, 91, 96, 98, 99, 100.
  fits_up_to all{1 << 30, {}};
  const batch_search capped = max_batch(all, 100);
  CHECK(capped.batch == 100);
  CHECK(all.asked == std::vector<int>{1, 2, 4, 8, 16, 32, 64, 82, 91, 96, 98, 99, 100});
  CHECK(capped.probes == 13);
  CHECK_THROWS_AS(static_cast<void>(max_batch(all, 0)), invalid_argument);
}

TEST_CASE("max_batch: where feasibility is not monotone, the batch reported fits, a larger one may too") {
  // Fits at 1..10 and at 20..30: doubling stops at 16 (fails), bisection of
  // (8, 16) gives 10; 30 fits too and is never asked for.
  std::vector<int> asked;
  const batch_search found = max_batch([&](int b) {
    asked.push_back(b);
    return b <= 10 || (b >= 20 && b <= 30);
  });
  CHECK(found.batch == 10);
  CHECK(asked == std::vector<int>{1, 2, 4, 8, 16, 12, 10, 11});
}
