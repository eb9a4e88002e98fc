// The Llama kernels against their scalar double-precision references over many sizes, plus
// the properties the model relies on: RMSNorm rows independent of the batch, RoPE at position
// 0 is the identity and keeps each pair's length, and rotating pairs (2i, 2i+1) of run.c-ordered
// rows equals Hugging Face's rotate_half on the rows as Hugging Face permutes them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "model/llama.h"
#include "ops/rmsnorm.h"
#include "ops/rope.h"
#include "ops/swiglu.h"
#include "support/random_values.h"

namespace kvlm {
namespace {

std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  return test::random_normals(n, rng, scale);
}

TEST(LlamaOps, RmsnormMatchesReferenceAndIsRowIndependent) {
  for (int C : {1, 2, 3, 7, 8, 16, 31, 64, 100, 257}) {
    const int T = 5;
    const std::vector<float> x = random_floats(static_cast<size_t>(T) * C, C, 3.0f);
    const std::vector<float> w = random_floats(C, C + 1000);
    std::vector<float> out(x.size()), ref(x.size());
    rmsnorm_forward(out.data(), x.data(), w.data(), T, C, 1e-5f);
    rmsnorm_reference(ref.data(), x.data(), w.data(), T, C, 1e-5f);
    for (size_t i = 0; i < out.size(); ++i)
      EXPECT_NEAR(out[i], ref[i], 1e-5f * (1.0f + std::fabs(ref[i]))) << "C " << C << " i " << i;
    // Row 3 alone gives the same bits as row 3 of the batch.
    std::vector<float> alone(C);
    rmsnorm_forward(alone.data(), x.data() + 3 * C, w.data(), 1, C, 1e-5f);
    EXPECT_EQ(std::memcmp(alone.data(), out.data() + 3 * C, C * sizeof(float)), 0);
    // In place.
    std::vector<float> inplace = x;
    rmsnorm_forward(inplace.data(), inplace.data(), w.data(), T, C, 1e-5f);
    EXPECT_EQ(std::memcmp(inplace.data(), out.data(), out.size() * sizeof(float)), 0);
  }
}

TEST(LlamaOps, SwigluMatchesReference) {
  for (size_t n : {size_t{1}, size_t{2}, size_t{15}, size_t{172}, size_t{1000}}) {
    const std::vector<float> gate = random_floats(n, 1, 4.0f), up = random_floats(n, 2);
    std::vector<float> out(n), ref(n);
    swiglu_forward(out.data(), gate.data(), up.data(), n);
    swiglu_reference(ref.data(), gate.data(), up.data(), n);
    for (size_t i = 0; i < n; ++i) EXPECT_NEAR(out[i], ref[i], 1e-6f * (1.0f + std::fabs(ref[i])));
  }
  // silu(0) * up = 0; large gates pass through: silu(g) ~ g.
  const float gate[2] = {0.0f, 30.0f}, up[2] = {5.0f, 2.0f};
  float out[2];
  swiglu_forward(out, gate, up, 2);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_NEAR(out[1], 60.0f, 1e-4f);
}

TEST(LlamaOps, SwigluSplitOverThreadsGivesTheSameBits) {
  for (size_t n : {size_t{11008}, size_t{8 * 11008 + 5}}) {
    const std::vector<float> gate = random_floats(n, 3, 4.0f), up = random_floats(n, 4);
    std::vector<float> one(n);
    swiglu_forward(one.data(), gate.data(), up.data(), n);
    for (int threads : {2, 3}) {
      std::vector<float> split(n);
      swiglu_forward(split.data(), gate.data(), up.data(), n, Parallel{threads});
      ASSERT_EQ(std::memcmp(split.data(), one.data(), n * sizeof(float)), 0)
          << "n " << n << " threads " << threads;
    }
  }
}

TEST(LlamaOps, RopeMatchesReferenceAndRotates) {
  for (int D : {2, 4, 6, 8, 64, 128}) {
    for (float theta : {10000.0f, 500000.0f}) {
      std::vector<float> inv_freq(D / 2);
      rope_frequencies(inv_freq.data(), D, theta);
      EXPECT_EQ(inv_freq[0], 1.0f);
      const int H = 4, G = 2;
      for (int pos : {0, 1, 7, 63}) {
        std::vector<float> q = random_floats(H * D, D + pos), k = random_floats(G * D, D - pos);
        std::vector<float> q_ref = q, k_ref = k, q0 = q;
        rope_forward(q.data(), k.data(), inv_freq.data(), pos, H, G, D);
        rope_reference(q_ref.data(), k_ref.data(), inv_freq.data(), pos, H, G, D);
        // The float angle pos * inv_freq is off by up to pos ulps of 1 from the double one.
        const float tol = 2e-6f + 2e-7f * static_cast<float>(pos);
        for (size_t i = 0; i < q.size(); ++i) EXPECT_NEAR(q[i], q_ref[i], tol);
        for (size_t i = 0; i < k.size(); ++i) EXPECT_NEAR(k[i], k_ref[i], tol);
        for (int p = 0; p < H * D; p += 2) {  // each pair keeps its length
          EXPECT_NEAR(std::hypot(q[p], q[p + 1]), std::hypot(q0[p], q0[p + 1]), 1e-5f);
          if (pos == 0) {
            EXPECT_EQ(q[p], q0[p]);
          }
        }
      }
    }
  }
}

// Hugging Face's apply_rotary_pos_emb on one head: x * cos + rotate_half(x) * sin, where
// cos/sin repeat the D/2 angles twice and rotate_half(x) = cat(-x[D/2:], x[:D/2]).
void rotate_half_reference(float* x, const float* inv_freq, int pos, int D) {
  std::vector<float> out(D);
  for (int j = 0; j < D; ++j) {
    const int i = j % (D / 2);
    const double angle = static_cast<double>(pos) * inv_freq[i];
    const double rotated = j < D / 2 ? -x[j + D / 2] : x[j - D / 2];
    out[j] = static_cast<float>(x[j] * std::cos(angle) + rotated * std::sin(angle));
  }
  std::copy(out.begin(), out.end(), x);
}

TEST(LlamaOps, PairRotationEqualsRotateHalfOnPermutedRows) {
  for (int D : {2, 6, 8, 16}) {
    const int H = 3;
    std::vector<float> inv_freq(D / 2);
    rope_frequencies(inv_freq.data(), D, 10000.0f);
    const std::vector<float> x = random_floats(H * D, D);  // run.c order
    std::vector<float> hf(H * D);
    permute_rotary_rows(hf.data(), x.data(), H, D, sizeof(float));  // as Hugging Face stores it
    std::vector<float> back(H * D);
    unpermute_rotary_rows(back.data(), hf.data(), H, D, sizeof(float));
    EXPECT_EQ(back, x);
    for (int pos : {0, 3, 17}) {
      std::vector<float> ours = x;
      rope_reference(ours.data(), nullptr, inv_freq.data(), pos, H, 0, D);
      std::vector<float> theirs = hf;
      for (int h = 0; h < H; ++h)
        rotate_half_reference(theirs.data() + h * D, inv_freq.data(), pos, D);
      std::vector<float> theirs_in_our_order(H * D);
      unpermute_rotary_rows(theirs_in_our_order.data(), theirs.data(), H, D, sizeof(float));
      for (int i = 0; i < H * D; ++i) EXPECT_NEAR(ours[i], theirs_in_our_order[i], 1e-6f);
    }
  }
}

TEST(LlamaOps, PermutationMovesWholeRows) {
  // Rows of 3 two-byte elements (a BF16 matrix with 3 columns), 2 heads of 4 rows.
  std::vector<uint16_t> rows(2 * 4 * 3);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<uint16_t>(i);
  std::vector<uint16_t> hf(rows.size()), back(rows.size());
  permute_rotary_rows(hf.data(), rows.data(), 2, 4, 3 * sizeof(uint16_t));
  // Head 0 in run.c order is rows 0,1,2,3 = pairs (0,1), (2,3); Hugging Face keeps first
  // elements of pairs first: rows 0, 2, 1, 3.
  const std::vector<uint16_t> head0 = {0, 1, 2, 6, 7, 8, 3, 4, 5, 9, 10, 11};
  EXPECT_EQ(std::vector<uint16_t>(hf.begin(), hf.begin() + 12), head0);
  unpermute_rotary_rows(back.data(), hf.data(), 2, 4, 3 * sizeof(uint16_t));
  EXPECT_EQ(back, rows);
}

}  // namespace
}  // namespace kvlm
