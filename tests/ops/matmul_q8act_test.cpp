// matmul_q8act.h: the 8-bit-activation kernels on every compiled SIMD target give their scalar
// reference's bits over sizes, row counts (on both sides of every tile and row chunk), partial
// output tiles, misaligned weights, inputs, biases and outputs, and thread counts; the reference
// itself matches hand-computed sums and stays within the activation quantization's derived
// bound of the exact product; every weight byte and scale reaches the output on every target.
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

constexpr DType kTypes[] = {DType::kQ8_0, DType::kQ4_0, DType::kQ5_0, DType::kQ4_K, DType::kQ6_K};

// The activation block of each type (matmul_q8act.h).
int activation_block(DType type) {
  return dtype_block_elements(type) == 32 ? 32 : 256;
}

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
  return {256, 512, 768, 1280, 2304};
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

// Decode (up to 8 rows) over many 16-output slices, claimed about 64 KB of weights at a time and
// taken over between threads: every output is computed once, with the reference's bits.
TEST(MatmulQ8ActTest, DecodeSlicesSharedOverThreadsKeepTheBits) {
  std::mt19937 rng(59);
  for (DType type : kTypes) {
    SCOPED_TRACE(dtype_name(type));
    const QuantMatrix m = test::random_quant_matrix(type, 1024, 16 * 40 + 5, 1, rng);
    for (int threads : {2, 3})
      for (int n_rows : {1, 3, 8}) {
        expect_reference_bits(m, n_rows, 2, threads, rng);
        if (::testing::Test::HasFatalFailure()) return;
      }
  }
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

// Q8_0 by hand, at the int8 extremes: weights -128, 127, -127, 0 beside activations of +-127
// (the pairs that would overflow vpmaddubsw's int16 with Q8_0's w + 128, 2 * 255 * 127), scale
// 1 and integer activations quantizing to themselves: the exact integer sum, on every target.
TEST(MatmulQ8ActTest, Q8_0ExtremeWeightsGiveTheExactIntegerSum) {
  const int n_in = 96;  // three blocks: a pair of blocks and a lone one
  std::vector<BlockQ8_0> blocks(n_in / 32);
  std::vector<float> x(n_in);
  std::mt19937 rng(71);
  std::uniform_int_distribution<int> v(-127, 127);
  const int8_t kExtremes[] = {-128, -128, 127, 127, -127, -128, 0, 127};
  int64_t want = 0;
  for (int i = 0; i < n_in; ++i) {
    BlockQ8_0& blk = blocks[i / 32];
    blk.d = 0x3c00;
    const int8_t w = i % 3 ? kExtremes[i % 8] : static_cast<int8_t>(v(rng));
    blk.q[i % 32] = w;
    x[i] = static_cast<float>(i % 32 == 0 ? 127 : i % 4 < 2 ? (i % 8 < 4 ? 127 : -127) : v(rng));
    want += static_cast<int64_t>(w) * static_cast<int64_t>(x[i]);
  }
  const WeightMatrix m{blocks.data(), DType::kQ8_0, WeightLayout::kOutIn, n_in, 1};
  float out = 0;
  matmul_q8act_reference(&out, x.data(), m, nullptr, 1);
  EXPECT_EQ(out, static_cast<float>(want));
  for_each_target([&](const SimdTarget& t) {
    float fast = 0;
    matmul_forward(&fast, x.data(), m, nullptr, 1, Parallel{1});
    EXPECT_EQ(fast, out) << "on " << t.name;
  });
}

// Integer activations whose largest magnitude in each 256-block is 127 quantize to themselves
// (scale 1); with fp16 scales of 1 the K-quant weights are integers (dequantize_block_*, the
// independent layout reference), so the output is their exact integer dot product.
std::vector<float> integer_activations(int n, std::mt19937& rng) {
  std::vector<float> x(n);
  std::uniform_int_distribution<int> v(-127, 127);
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(i % 256 == 7 ? -127 : v(rng));
  return x;
}

void expect_integer_dot(const std::vector<uint8_t>& bytes, DType type, int n_blocks,
                        const std::vector<float>& x) {
  const int n_in = 256 * n_blocks;
  std::vector<float> w(n_in);
  dequantize_row(w.data(), bytes.data(), type, n_in);
  int64_t want = 0;
  for (int i = 0; i < n_in; ++i) {
    ASSERT_EQ(w[i], std::round(w[i])) << "weight " << i;
    want += static_cast<int64_t>(w[i]) * static_cast<int64_t>(x[i]);
  }
  const WeightMatrix m{bytes.data(), type, WeightLayout::kOutIn, n_in, 1};
  float out = 0;
  matmul_q8act_reference(&out, x.data(), m, nullptr, 1);
  EXPECT_EQ(out, static_cast<float>(want)) << dtype_name(type);
  float fast = 0;
  for_each_target([&](const SimdTarget& t) {
    matmul_forward(&fast, x.data(), m, nullptr, 1, Parallel{1});
    EXPECT_EQ(fast, out) << dtype_name(type) << " on " << t.name;
  });
}

// Q4_K: d = dmin = 1, sub-block j's scale j + 1 and min 2j + 1 (packed as q4_k_scale_min
// reads them), random nibbles.
TEST(MatmulQ8ActTest, Q4_KReferenceMatchesAHandComputedSum) {
  std::mt19937 rng(61);
  const int n_blocks = 3;
  std::vector<uint8_t> bytes(n_blocks * sizeof(BlockQ4_K));
  for (int b = 0; b < n_blocks; ++b) {
    BlockQ4_K block;
    block.d = block.dmin = 0x3c00;
    for (int j = 0; j < 8; ++j) {
      const int sc = (j + b) % 8 + 1, m = 2 * ((j + b) % 8) + 1;  // < 16: no high bits
      if (j < 4) {
        block.scales[j] = static_cast<uint8_t>(sc);
        block.scales[j + 4] = static_cast<uint8_t>(m);
      } else {
        block.scales[j + 4] = static_cast<uint8_t>(sc | (m << 4));
      }
    }
    for (uint8_t& q : block.qs) q = static_cast<uint8_t>(rng());
    std::memcpy(bytes.data() + b * sizeof(block), &block, sizeof(block));
  }
  uint8_t sc, m;
  q4_k_scale_min(6, bytes.data() + 4, &sc, &m);
  ASSERT_EQ(sc, 7);
  ASSERT_EQ(m, 13);
  expect_integer_dot(bytes, DType::kQ4_K, n_blocks, integer_activations(256 * n_blocks, rng));
}

// Q6_K: d = 1, scales of both signs, random 6-bit quants.
TEST(MatmulQ8ActTest, Q6_KReferenceMatchesAHandComputedSum) {
  std::mt19937 rng(67);
  const int n_blocks = 3;
  std::vector<uint8_t> bytes(n_blocks * sizeof(BlockQ6_K));
  for (int b = 0; b < n_blocks; ++b) {
    BlockQ6_K block;
    for (uint8_t& q : block.ql) q = static_cast<uint8_t>(rng());
    for (uint8_t& q : block.qh) q = static_cast<uint8_t>(rng());
    for (int k = 0; k < 16; ++k) block.scales[k] = static_cast<int8_t>(3 * k - 20 + b);
    block.d = 0x3c00;
    std::memcpy(bytes.data() + b * sizeof(block), &block, sizeof(block));
  }
  expect_integer_dot(bytes, DType::kQ6_K, n_blocks, integer_activations(256 * n_blocks, rng));
}

// Against the exact product of the dequantized weights and the fp32 activations: each
// activation moves by at most half its block's scale d = amax / 127, so the output moves by at
// most sum_i |w_i| * d_b(i) / 2, plus the float rounding of a few hundred terms (bounded here
// by 1e-5 of sum |w_i x_i| + 1e-6).
TEST(MatmulQ8ActTest, ReferenceStaysWithinTheActivationRoundingBound) {
  std::mt19937 rng(59);
  for (DType type : kTypes) {
    const int n_in = 768, n_out = 16, block = activation_block(type);
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

// Each byte of a weight row (quants, scales, mins, high bits) changed in turn, on every
// target: the changed row's output moves, the others keep their bits, and the kernel still gives
// the reference's bits. Activations are kept away from 0 so that every quant has a nonzero q,
// and the K-quant matrices drawn again until no sub-block scale or min is 0 (one would hide its
// quants): then every byte matters. Outputs 2 and 4: inside a 4-row tile and the single one
// after it; 1 and 5 activation rows.
bool has_zero_sub_block_scale(const QuantMatrix& m) {
  const auto* bytes = static_cast<const uint8_t*>(m.view.data);
  const size_t n_blocks = m.view.n_out * (m.view.n_in / 256);
  for (size_t b = 0; b < n_blocks; ++b)
    if (m.view.dtype == DType::kQ4_K) {
      for (int j = 0; j < 8; ++j) {
        uint8_t sc, mn;
        q4_k_scale_min(j, bytes + b * sizeof(BlockQ4_K) + 4, &sc, &mn);
        if (sc == 0 || mn == 0) return true;
      }
    } else if (m.view.dtype == DType::kQ6_K) {
      for (int k = 0; k < 16; ++k)
        if (bytes[b * sizeof(BlockQ6_K) + 192 + k] == 0) return true;
    }
  return false;
}

TEST(MatmulQ8ActTest, EveryWeightByteReachesItsOutputOnEveryTarget) {
  std::mt19937 rng(73);
  for_each_target([&](const SimdTarget&) {
    for (DType type : kTypes) {
      const int n_in = 2 * dtype_block_elements(type), n_out = 5;
      QuantMatrix m = test::random_quant_matrix(type, n_in, n_out, 1, rng);
      while (has_zero_sub_block_scale(m)) m = test::random_quant_matrix(type, n_in, n_out, 1, rng);
      auto* bytes = static_cast<uint8_t*>(const_cast<void*>(m.view.data));
      const size_t row_bytes = dtype_bytes(type, n_in);
      for (int n_rows : {1, 5}) {
        std::vector<float> x(n_rows * n_in);
        std::uniform_real_distribution<float> u(0.5f, 1.0f);
        // Q4_K: positive, so that no sub-block's sum of q (its min's factor) is 0.
        for (float& v : x) v = type == DType::kQ4_K || rng() % 2 ? u(rng) : -u(rng);
        std::vector<float> before(n_rows * n_out), after(n_rows * n_out), want(n_rows * n_out);
        matmul_forward(before.data(), x.data(), m.view, nullptr, n_rows, Parallel{1});
        for (int o : {2, 4})
          for (size_t k = 0; k < row_bytes; ++k)
            for (uint8_t flip : {0x01, 0x10, 0x80}) {
              SCOPED_TRACE(std::string(dtype_name(type)) + " rows " + std::to_string(n_rows) +
                           " output " + std::to_string(o) + " byte " + std::to_string(k) +
                           " flip " + std::to_string(flip));
              uint8_t& byte = bytes[o * row_bytes + k];
              byte ^= flip;
              matmul_forward(after.data(), x.data(), m.view, nullptr, n_rows, Parallel{1});
              matmul_q8act_reference(want.data(), x.data(), m.view, nullptr, n_rows);
              byte ^= flip;
              ASSERT_EQ(0, std::memcmp(after.data(), want.data(), after.size() * 4));
              for (int r = 0; r < n_rows; ++r)
                for (int j = 0; j < n_out; ++j) {
                  const float a = after[r * n_out + j], b = before[r * n_out + j];
                  if (j != o) {
                    ASSERT_EQ(0, std::memcmp(&a, &b, 4)) << "row " << r << " output " << j;
                  } else {
                    ASSERT_NE(a, b) << "row " << r << ": the output ignored the change";
                  }
                }
            }
      }
    }
  });
}

}  // namespace
}  // namespace kvlm
