// GELU on every SIMD target: close to the std::tanh reference over a wide range of inputs,
// for every length 0..2N+1 and misalignment, and each element's bits independent of its
// position in the array (the tail goes through the same vector code).
#include "ops/activation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ops/for_each_target.h"

namespace kvlm {
namespace {

std::vector<float> inputs(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(-8.0f, 8.0f);
  std::vector<float> v(n);
  for (float& f : v) f = uniform(rng);
  return v;
}

TEST(GeluTest, MatchesTheReferenceForEveryLengthAndOffset) {
  std::mt19937 rng(5);
  for_each_target([&](const SimdTarget&) {
    for (size_t n = 0; n <= 40; ++n)
      for (size_t offset = 0; offset < 4; ++offset) {
        std::vector<float> buffer = inputs(n + offset + 1, rng);
        const float guard = buffer.back();
        std::vector<float> want(buffer.begin() + offset, buffer.begin() + offset + n);
        gelu_reference(want.data(), n);
        gelu_forward(buffer.data() + offset, n);
        for (size_t i = 0; i < n; ++i)
          ASSERT_NEAR(buffer[offset + i], want[i], 2e-6f + 2e-6f * std::fabs(want[i]))
              << "n " << n << " offset " << offset << " element " << i;
        ASSERT_EQ(buffer.back(), guard) << "wrote past the end, n " << n;
      }
  });
}

TEST(GeluTest, SpecialValues) {
  const std::vector<float> x = {0.0f, -0.0f, 1e-30f, -1e-30f, 30.0f, -30.0f, 1e4f, -1e4f, 0.5f};
  for_each_target([&](const SimdTarget&) {
    std::vector<float> got = x, want = x;
    gelu_forward(got.data(), got.size());
    gelu_reference(want.data(), want.size());
    for (size_t i = 0; i < x.size(); ++i)
      EXPECT_NEAR(got[i], want[i], 2e-6f + 2e-6f * std::fabs(want[i])) << "x = " << x[i];
    EXPECT_EQ(got[4], 30.0f);  // saturated: gelu(x) = x
    EXPECT_EQ(got[5], 0.0f);   // and 0 (of either sign) far below
  });
}

TEST(GeluTest, AnElementsBitsDoNotDependOnItsPosition) {
  std::mt19937 rng(9);
  const std::vector<float> x = inputs(37, rng);
  for_each_target([&](const SimdTarget&) {
    std::vector<float> all = x;
    gelu_forward(all.data(), all.size());
    for (size_t i = 0; i < x.size(); ++i) {
      float one = x[i];
      gelu_forward(&one, 1);
      ASSERT_EQ(std::memcmp(&one, &all[i], 4), 0) << "element " << i;
    }
  });
}

TEST(GeluTest, SplitOverThreadsGivesTheSameBits) {
  std::mt19937 rng(11);
  for (size_t n : {size_t{3072}, size_t{16384}, size_t{24576 + 37}, size_t{50001}}) {
    const std::vector<float> x = inputs(n, rng);
    std::vector<float> one = x;
    gelu_forward(one.data(), n);
    for (int threads : {1, 2, 3, 4}) {
      std::vector<float> split = x;
      gelu_forward(split.data(), n, Parallel{threads});
      ASSERT_EQ(std::memcmp(split.data(), one.data(), n * sizeof(float)), 0)
          << "n " << n << " threads " << threads;
    }
  }
}

}  // namespace
}  // namespace kvlm
