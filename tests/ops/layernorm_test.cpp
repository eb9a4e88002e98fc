// Layer norm on every SIMD target: close to the double-precision reference for widths 1..2N+1
// and misaligned rows, in place or not, and each row's bits independent of the other rows.
#include "ops/layernorm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ops/for_each_target.h"

namespace kvlm {
namespace {

std::vector<float> normal(size_t n, float mean, float stddev, std::mt19937& rng) {
  std::normal_distribution<float> dist(mean, stddev);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

TEST(LayernormTest, MatchesTheReferenceForEveryWidthAndOffset) {
  std::mt19937 rng(21);
  const int n_rows = 3;
  for_each_target([&](const SimdTarget&) {
    for (int C = 1; C <= 40; ++C)
      for (int offset = 0; offset < 4; ++offset) {
        SCOPED_TRACE("C " + std::to_string(C) + " offset " + std::to_string(offset));
        // A large common offset in x checks the two-pass variance.
        const std::vector<float> xbuf = normal(n_rows * C + offset, 3.0f, 2.0f, rng);
        const std::vector<float> w = normal(C + offset, 1.0f, 0.3f, rng);
        const std::vector<float> b = normal(C + offset, 0.0f, 0.3f, rng);
        const float* x = xbuf.data() + offset;
        std::vector<float> out(n_rows * C + offset + 1, 7.0f), want(n_rows * C);
        layernorm_forward(out.data() + offset, x, w.data() + offset, b.data() + offset, n_rows, C,
                          1e-5f);
        layernorm_reference(want.data(), x, w.data() + offset, b.data() + offset, n_rows, C, 1e-5f);
        for (int i = 0; i < n_rows * C; ++i) {
          const float wi = w[offset + i % C], bi = b[offset + i % C];
          const float norm = (want[i] - bi) / wi;  // the normalised value, about N(0, 1)
          const float tol = 4e-6f * (std::fabs(wi) * (std::fabs(norm) + 1.0f) + std::fabs(bi));
          ASSERT_NEAR(out[offset + i], want[i], tol) << "element " << i;
        }
        ASSERT_EQ(out.back(), 7.0f) << "wrote past the end";
        // In place gives the same bits.
        std::vector<float> in_place(xbuf.begin() + offset, xbuf.end());
        layernorm_forward(in_place.data(), in_place.data(), w.data() + offset, b.data() + offset,
                          n_rows, C, 1e-5f);
        ASSERT_EQ(std::memcmp(in_place.data(), out.data() + offset, n_rows * C * 4), 0);
      }
  });
}

TEST(LayernormTest, RowsAreIndependent) {
  std::mt19937 rng(4);
  const int C = 77, T = 9;
  const std::vector<float> x = normal(T * C, 0.0f, 1.0f, rng);
  const std::vector<float> w = normal(C, 1.0f, 0.3f, rng), b = normal(C, 0.0f, 0.3f, rng);
  for_each_target([&](const SimdTarget&) {
    std::vector<float> all(T * C), one(C);
    layernorm_forward(all.data(), x.data(), w.data(), b.data(), T, C, 1e-5f);
    for (int t = 0; t < T; ++t) {
      layernorm_forward(one.data(), x.data() + t * C, w.data(), b.data(), 1, C, 1e-5f);
      ASSERT_EQ(std::memcmp(one.data(), all.data() + t * C, C * 4), 0) << "row " << t;
    }
  });
}

}  // namespace
}  // namespace kvlm
