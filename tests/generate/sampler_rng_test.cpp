// The RNG: pinned against the published reference outputs of splitmix64 and xoshiro256**,
// uniform01 is uniform (chi-square), and sequence_seed gives every sequence its own stream.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <set>
#include <vector>

#include "generate/rng.h"

namespace kvlm {
namespace {

TEST(Rng, Splitmix64MatchesReference) {
  // splitmix64.c (Vigna) from state 0.
  uint64_t state = 0;
  EXPECT_EQ(splitmix64_next(&state), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(splitmix64_next(&state), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(splitmix64_next(&state), 0x06c45d188009454fULL);
}

TEST(Rng, Xoshiro256StarStarMatchesReference) {
  // xoshiro256starstar.c from state {1, 2, 3, 4}.
  Rng rng = Rng::from_state({1, 2, 3, 4});
  const uint64_t expected[] = {11520ULL,
                               0ULL,
                               1509978240ULL,
                               1215971899390074240ULL,
                               1216172134540287360ULL,
                               607988272756665600ULL};
  for (uint64_t e : expected) EXPECT_EQ(rng.next_u64(), e);
}

TEST(Rng, SeedingExpandsThroughSplitmix64) {
  Rng rng(0);
  EXPECT_EQ(rng.state()[0], 0xe220a8397b1dcdafULL);
  EXPECT_EQ(rng.state()[1], 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(rng.state()[2], 0x06c45d188009454fULL);
}

TEST(Rng, SameSeedSameStreamDifferentSeedDifferentStream) {
  Rng a(42), b(42), c(43);
  int same_as_c = 0;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t x = a.next_u64();
    EXPECT_EQ(x, b.next_u64());
    same_as_c += x == c.next_u64();
  }
  EXPECT_EQ(same_as_c, 0);
}

// Chi-square of uniform01 over 10 equal bins, 1e6 draws. Critical value at p = 1e-4 for 9
// degrees of freedom: 33.72 (computed with the regularized incomplete gamma function).
template <typename Draw>
double uniform_chi_square(Draw draw) {
  constexpr int kBins = 10, kDraws = 1000000;
  std::array<int, kBins> counts{};
  for (int i = 0; i < kDraws; ++i) {
    const auto u = draw();
    EXPECT_GE(u, 0);
    EXPECT_LT(u, 1);
    ++counts[static_cast<int>(u * kBins)];
  }
  double chi2 = 0;
  const double expected = static_cast<double>(kDraws) / kBins;
  for (int c : counts) chi2 += (c - expected) * (c - expected) / expected;
  return chi2;
}

TEST(Rng, Uniform01IsUniform) {
  Rng rng(7);
  EXPECT_LT(uniform_chi_square([&] { return rng.uniform01(); }), 33.72);
  EXPECT_LT(uniform_chi_square([&] { return rng.uniform01f(); }), 33.72);
}

TEST(Rng, Uniform01UsesTheTopBits) {
  // The reference stream's third output, 1509978240, has only its low 31 bits set: built
  // from the top 53 bits, uniform01 must be tiny (about 8e-11).
  Rng rng = Rng::from_state({1, 2, 3, 4});
  rng.next_u64();
  rng.next_u64();
  EXPECT_LT(rng.uniform01(), 1e-6);
}

TEST(SequenceSeed, DistinctForEveryIndexAndRequestSeed) {
  std::set<uint64_t> seen;
  const uint64_t request_seeds[] = {0, 1, 42, 0xffffffffffffffffULL};
  for (uint64_t seed : request_seeds) {
    for (size_t i = 0; i < 10000; ++i) seen.insert(sequence_seed(seed, i));
  }
  EXPECT_EQ(seen.size(), 4u * 10000u);
}

TEST(SequenceSeed, StreamsDoNotOverlap) {
  // The first 1000 outputs of sequences 0..63 of one request are all different: no sequence
  // replays another's draws, shifted or not.
  std::set<uint64_t> outputs;
  for (size_t i = 0; i < 64; ++i) {
    Rng rng(sequence_seed(1234, i));
    for (int k = 0; k < 1000; ++k) outputs.insert(rng.next_u64());
  }
  EXPECT_EQ(outputs.size(), 64u * 1000u);
}

TEST(SequenceSeed, IsAPureFunction) {
  EXPECT_EQ(sequence_seed(99, 3), sequence_seed(99, 3));
  EXPECT_NE(sequence_seed(99, 3), sequence_seed(100, 3));
  EXPECT_NE(sequence_seed(99, 3), sequence_seed(99, 4));
}

}  // namespace
}  // namespace kvlm
