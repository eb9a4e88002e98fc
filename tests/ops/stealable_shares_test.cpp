// StealableShares: a member claims its own share front to back, `grain` at a time; a member whose
// share is done takes over the back of the fullest other share; under concurrent claims every
// item is claimed exactly once.
#include "ops/stealable_shares.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "ops/thread_team.h"

namespace kvlm {
namespace {

using Piece = std::pair<size_t, size_t>;

TEST(StealableSharesTest, OwnShareFrontToBackThenTheBackOfTheFullestOther) {
  StealableShares shares(20, 2);  // member 0 owns [0, 10), member 1 [10, 20)
  for (size_t begin = 0; begin < 10; begin += 4)
    EXPECT_EQ(shares.claim(0, 4), (Piece{begin, std::min<size_t>(begin + 4, 10)}));
  // Member 0's share is done: it takes half of member 1's ten items, a whole number of grains
  // (4 of 10 at grain 2), from the back, and claims them front to back.
  EXPECT_EQ(shares.claim(0, 2), (Piece{16, 18}));
  EXPECT_EQ(shares.claim(1, 2), (Piece{10, 12}));  // the owner goes on from its front
  EXPECT_EQ(shares.claim(0, 2), (Piece{18, 20}));
  // Member 1 has [12, 16) left: member 0 takes [14, 16) (half of 4 at grain 2).
  EXPECT_EQ(shares.claim(0, 2), (Piece{14, 16}));
  EXPECT_EQ(shares.claim(1, 2), (Piece{12, 14}));
  // Nothing is left anywhere.
  const Piece none = shares.claim(1, 2);
  EXPECT_EQ(none.first, none.second);
  const Piece none0 = shares.claim(0, 2);
  EXPECT_EQ(none0.first, none0.second);
}

TEST(StealableSharesTest, AShareNoLargerThanAGrainIsTakenWhole) {
  StealableShares shares(5, 2);  // member 0 owns [0, 3), member 1 [3, 5)
  EXPECT_EQ(shares.claim(0, 8), (Piece{0, 3}));
  EXPECT_EQ(shares.claim(0, 8), (Piece{3, 5}));
  const Piece none = shares.claim(1, 8);
  EXPECT_EQ(none.first, none.second);
}

TEST(StealableSharesTest, MembersWithEmptySharesTakeFromOthers) {
  StealableShares shares(1, 3);  // only member 0 owns an item
  EXPECT_EQ(shares.claim(2, 1), (Piece{0, 1}));
  const Piece none = shares.claim(0, 1);
  EXPECT_EQ(none.first, none.second);
}

TEST(StealableSharesTest, ConcurrentClaimsCoverEachItemOnce) {
  for (size_t n : {0, 1, 2, 7, 64, 1047, 5000})
    for (int members : {1, 2, 3, 7})
      for (size_t grain : {1, 2, 8}) {
        SCOPED_TRACE(std::to_string(n) + " items, " + std::to_string(members) + " members, grain " +
                     std::to_string(grain));
        std::vector<std::atomic<int>> claimed(n);
        StealableShares shares(n, members);
        run_team(members, [&](int t, int) {
          // Member 0 runs slowest, so that the others finish first and take over from it.
          for (auto [begin, end] = shares.claim(t, grain); begin < end;
               std::tie(begin, end) = shares.claim(t, grain)) {
            ASSERT_LE(end, n);
            for (size_t i = begin; i < end; ++i) claimed[i].fetch_add(1);
            if (t == 0) std::this_thread::yield();
          }
        });
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(claimed[i].load(), 1) << "item " << i;
      }
}

}  // namespace
}  // namespace kvlm
