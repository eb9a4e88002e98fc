// for_each_share: every index of [0, n) in exactly one share, shares contiguous and in whole
// multiples of the alignment, no more shares than threads, and none shorter than min_share
// where n allows; short arrays stay on one thread.
#include "ops/parallel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

namespace kvlm {
namespace {

std::vector<std::pair<size_t, size_t>> shares(size_t n, size_t align, size_t min_share,
                                              int n_threads) {
  std::vector<std::pair<size_t, size_t>> got;
  std::mutex m;
  for_each_share(n, align, min_share, Parallel{n_threads}, [&](size_t begin, size_t end) {
    std::lock_guard<std::mutex> lock(m);
    got.emplace_back(begin, end);
  });
  std::sort(got.begin(), got.end());
  return got;
}

TEST(ForEachShareTest, CoversEveryIndexOnceInAlignedShares) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{1000}, size_t{24576},
                   size_t{24576 + 37}})
    for (int threads : {1, 2, 3, 5})
      for (size_t min_share : {size_t{1}, size_t{100}, size_t{8192}}) {
        const auto got = shares(n, 64, min_share, threads);
        ASSERT_FALSE(got.empty());
        ASSERT_LE(got.size(), static_cast<size_t>(threads));
        size_t next = 0;
        for (const auto& [begin, end] : got) {
          ASSERT_EQ(begin, next) << "n " << n << " threads " << threads;
          ASSERT_TRUE(end % 64 == 0 || end == n) << "share end " << end << " of " << n;
          if (got.size() > 1) {
            ASSERT_GE(end - begin, std::min(min_share, n / got.size()));
          }
          next = end;
        }
        ASSERT_EQ(next, n);
      }
}

TEST(ForEachShareTest, ShortArraysStayOnOneThreadLongOnesSplit) {
  EXPECT_EQ(shares(3072, 64, 8192, 2).size(), 1u);   // one GPT-2 decode row's GELU
  EXPECT_EQ(shares(24576, 64, 8192, 2).size(), 2u);  // eight of them
  EXPECT_EQ(shares(24576, 64, 8192, 8).size(), 3u);  // no share under 8,192
  EXPECT_EQ(shares(128, 64, 1, 4).size(), 2u);       // no more shares than aligned blocks
}

}  // namespace
}  // namespace kvlm
