// matmul_q8act.h: the 8-bit-activation kernels on every compiled SIMD target give their scalar
// reference's bits over sizes, row counts (on both sides of every tile and row chunk), partial
// output tiles, misaligned weights, inputs, biases and outputs, and thread counts; the reference
// itself matches hand-computed sums and stays within the activation quantization's derived
// bound of the exact product.
#include "ops/matmul_q8act.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ops/dtype.h"
#include "ops/for_each_target.h"
#include "ops/matmul.h"
#include "ops/quant.h"
#include "support/quant_matrix.h"
#include "support/random_values.h"

namespace kvlm {
namespace {

using test::QuantMatrix;

constexpr DType kTypes[] = {DType::kQ4_0};

// matmul_forward on m against the reference, bitwise; nothing written outside out.
void expect_reference_bits(const QuantMatrix& m, int n_rows, int offset, int threads,
                           std::mt19937& rng) {
  const int n_in = m.view.n_in, n_out = m.view.n_out;
  const std::vector<float> xbuf = test::random_normals(n_rows * n_in + offset, rng);
  const std::vector<float> bbuf = test::random_normals(n_out + offset, rng);
  const float* x = xbuf.data() + offset;
  const float* bias = (n_out + n_rows) % 2 ? bbuf.data() + offset : nullptr;
  std::vector<float> outbuf(n_rows * n_out + 2 * offset + 1, -1.0f), want(n_rows * n_out);
  float* out = outbuf.data() + offset;
  matmul_forward(out, x, m.view, bias, n_rows, Parallel{threads});
  matmul_q8act_reference(want.data(), x, m.view, bias, n_rows);
  for (int k = 0; k < n_rows * n_out; ++k)
    ASSERT_EQ(std::memcmp(&out[k], &want[k], 4), 0)
        << "element " << k << " (row " << k / n_out << ", output " << k % n_out << "): " << out[k]
        << " vs reference " << want[k];
  for (int k = 0; k < offset; ++k) ASSERT_EQ(outbuf[k], -1.0f) << "wrote before out";
  for (size_t k = offset + n_rows * n_out; k < outbuf.size(); ++k)
    ASSERT_EQ(outbuf[k], -1.0f) << "wrote past out";
}

std::vector<int> widths(DType type) {
  if (dtype_block_elements(type) == 32) return {32, 64, 96, 160, 544, 768};
  return {256, 512, 1280};
}

TEST(MatmulQ8ActTest, EveryTargetGivesTheReferenceBits) {
  std::mt19937 rng(51);
  for_each_target([&](const SimdTarget&) {
    for (DType type : kTypes)
      for (int n_in : widths(type))
        for (int n_out : {1, 3, 4, 5, 8, 9, 17, 33})
          for (int n_rows : {1, 2, 3, 4, 5, 8, 13}) {
            const int offset = (n_in / 32 + n_out + n_rows) % 4;
            const QuantMatrix m = test::random_quant_matrix(type, n_in, n_out, offset, rng,
                                                            test::ScaleSigns::kEither);
            SCOPED_TRACE(std::string(dtype_name(type)) + " n_in " + std::to_string(n_in) +
                         " n_out " + std::to_string(n_out) + " rows " + std::to_string(n_rows) +
                         " offset " + std::to_string(offset));
            expect_reference_bits(m, n_rows, offset, 1, rng);
            if (::testing::Test::HasFatalFailure()) return;
          }
  });
}

// Rows past a row chunk (64) and a partial tile after it; outputs split over threads.
TEST(MatmulQ8ActTest, ManyRowsAndThreadsKeepTheBits) {
  std::mt19937 rng(53);
  for_each_target([&](const SimdTarget&) {
    for (DType type : kTypes) {
      SCOPED_TRACE(dtype_name(type));
      const QuantMatrix m = test::random_quant_matrix(type, 512, 37, 2, rng);
      for (int threads : {1, 2, 3}) {
        expect_reference_bits(m, 1, 3, threads, rng);
        expect_reference_bits(m, 70, 1, threads, rng);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  });
}

// A row's outputs do not depend on the other rows computed with it (the contract behind
// cached == uncached and batch invariance).
TEST(MatmulQ8ActTest, ARowsOutputsDoNotDependOnTheRowCount) {
  std::mt19937 rng(57);
  for (DType type : kTypes) {
    const QuantMatrix m = test::random_quant_matrix(type, 768, 21, 0, rng);
    const std::vector<float> x = test::random_normals(67 * 768, rng);
    std::vector<float> all(67 * 21), one(21);
    matmul_forward(all.data(), x.data(), m.view, nullptr, 67, Parallel{2});
    for (int r : {0, 5, 63, 64, 66}) {
      matmul_forward(one.data(), x.data() + r * 768, m.view, nullptr, 1, Parallel{1});
      EXPECT_EQ(0, std::memcmp(one.data(), all.data() + r * 21, 21 * 4))
          << dtype_name(type) << " row " << r;
    }
  }
}

// Q4_0 by hand: d = 1 (fp16 0x3c00) and activations that are integers with |max| = 127 quantize
// to themselves (activation scale 1), so the output is the integer sum of (nibble - 8) * x.
TEST(MatmulQ8ActTest, Q4_0ReferenceMatchesAHandComputedSum) {
  BlockQ4_0 block;
  block.d = 0x3c00;
  for (int j = 0; j < 16; ++j) block.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  std::vector<float> x(32);
  int64_t want = 0;
  for (int i = 0; i < 32; ++i) {
    x[i] = static_cast<float>(i % 2 ? -127 + 3 * i : 127 - 5 * i);
    const int nibble = i < 16 ? i : 15 - (i - 16);
    want += static_cast<int64_t>(nibble - 8) * static_cast<int64_t>(x[i]);
  }
  ASSERT_EQ(x[0], 127.0f);
  const WeightMatrix w{&block, DType::kQ4_0, WeightLayout::kOutIn, 32, 1};
  const float bias = 0.5f;
  float out = 0;
  matmul_q8act_reference(&out, x.data(), w, &bias, 1);
  EXPECT_EQ(out, static_cast<float>(want) + 0.5f);
}

// Against the exact product of the dequantized weights and the fp32 activations: each
// activation moves by at most half its block's scale d = amax / 127, so the output moves by at
// most sum_i |w_i| * d_b(i) / 2, plus the float rounding of a few hundred terms (bounded here
// by 1e-5 of sum |w_i x_i| + 1e-6).
TEST(MatmulQ8ActTest, ReferenceStaysWithinTheActivationRoundingBound) {
  std::mt19937 rng(59);
  for (DType type : kTypes) {
    const int n_in = 768, n_out = 16, block = 32;
    const QuantMatrix m = test::random_quant_matrix(type, n_in, n_out, 0, rng);
    const std::vector<float> x = test::random_normals(n_in, rng);
    std::vector<float> out(n_out);
    matmul_q8act_reference(out.data(), x.data(), m.view, nullptr, 1);
    for (int o = 0; o < n_out; ++o) {
      double exact = 0, bound = 0, magnitude = 0;
      for (int b = 0; b < n_in / block; ++b) {
        double amax = 0;
        for (int i = 0; i < block; ++i) amax = std::max(amax, std::fabs(double(x[b * block + i])));
        for (int i = b * block; i < (b + 1) * block; ++i) {
          const double wi = m.values[o * n_in + i];
          exact += wi * x[i];
          bound += std::fabs(wi) * (amax / 127) / 2;
          magnitude += std::fabs(wi * x[i]);
        }
      }
      EXPECT_LE(std::fabs(out[o] - exact), bound + 1e-5 * magnitude + 1e-6)
          << dtype_name(type) << " output " << o;
    }
  }
}

}  // namespace
}  // namespace kvlm
