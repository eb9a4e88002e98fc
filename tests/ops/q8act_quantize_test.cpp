// The activation quantizer of matmul_q8act.h: on every compiled SIMD target it gives the scalar
// definition's bytes (int8 values, scales, the offset sums of 4 and the sums of 32) over widths,
// misaligned inputs, ties, zeros, NaNs, infinities, subnormals and the largest floats; the
// definition itself rounds ties to even, skips NaNs and clamps to [-127, 127] as stated.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ops/dtype.h"
#include "ops/for_each_target.h"
#include "ops/matmul_q8act.h"
#include "support/random_values.h"

namespace kvlm {
namespace {

constexpr DType kTypes[] = {DType::kQ8_0, DType::kQ4_0, DType::kQ5_0, DType::kQ4_K, DType::kQ6_K};

size_t activation_block(DType type) {
  return dtype_block_elements(type) == 32 ? 32 : 256;
}

// One row's quantized arrays, sized for n values.
struct QuantizedRow {
  explicit QuantizedRow(size_t n) : q(n, 99), d(n / 32, -1.0f), off4(n / 4, 7), sum32(n / 32, 7) {}
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int32_t> off4, sum32;
};

// A row of random normals at a magnitude that changes from block to block, with the special
// values the quantizer must handle dropped in: zero and negative-zero blocks, NaNs, infinities,
// subnormals, the largest floats, and exact ties of x / d.
std::vector<float> awkward_row(size_t n, size_t block, std::mt19937& rng) {
  std::vector<float> x = test::random_normals(n, rng);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (size_t b = 0; b < n / block; ++b) {
    float* xb = x.data() + b * block;
    for (size_t i = 0; i < block; ++i) xb[i] *= std::ldexp(1.0f, static_cast<int>(b % 9) * 4 - 16);
    switch (b % 8) {
      case 1:  // all zeros, one of them negative
        for (size_t i = 0; i < block; ++i) xb[i] = 0.0f;
        xb[block / 2] = -0.0f;
        break;
      case 2:  // a NaN among normal values, and a block's last value NaN
        xb[3] = nan;
        xb[block - 1] = -nan;
        break;
      case 3:  // infinities
        xb[5] = inf;
        xb[block - 2] = -inf;
        break;
      case 4:  // ties: the largest magnitude 127 makes d 1, so x / d is x itself
        xb[0] = 127.0f;
        for (size_t i = 1; i < block; ++i)
          xb[i] = (static_cast<float>(i % 50) - 25.0f) + 0.5f * static_cast<float>(i % 2 ? 1 : -1);
        break;
      case 5:  // subnormals only
        for (size_t i = 0; i < block; ++i)
          xb[i] = std::numeric_limits<float>::denorm_min() * static_cast<float>(i * 37 % 101 - 50);
        break;
      case 6:  // the largest floats
        xb[1] = std::numeric_limits<float>::max();
        xb[2] = -std::numeric_limits<float>::max();
        break;
      case 7:  // all NaN
        for (size_t i = 0; i < block; ++i) xb[i] = nan;
        break;
      default:
        break;
    }
  }
  return x;
}

void expect_same_row(const QuantizedRow& got, const QuantizedRow& want) {
  for (size_t i = 0; i < want.q.size(); ++i) ASSERT_EQ(got.q[i], want.q[i]) << "value " << i;
  for (size_t i = 0; i < want.d.size(); ++i)
    ASSERT_EQ(std::memcmp(&got.d[i], &want.d[i], 4), 0)
        << "scale " << i << ": " << got.d[i] << " vs " << want.d[i];
  for (size_t i = 0; i < want.off4.size(); ++i)
    ASSERT_EQ(got.off4[i], want.off4[i]) << "offset sum of values " << 4 * i << "..";
  for (size_t i = 0; i < want.sum32.size(); ++i)
    ASSERT_EQ(got.sum32[i], want.sum32[i]) << "sum of values " << 32 * i << "..";
}

TEST(Q8ActQuantizeTest, EveryTargetGivesTheScalarBytes) {
  std::mt19937 rng(77);
  for_each_target([&](const SimdTarget&) {
    for (DType type : kTypes) {
      const size_t block = activation_block(type);
      for (size_t blocks : {1, 2, 3, 5, 9, 24})
        for (size_t misalign : {0, 1, 3}) {
          const size_t n = blocks * block;
          SCOPED_TRACE(std::string(dtype_name(type)) + " n " + std::to_string(n) + " misaligned " +
                       std::to_string(misalign));
          std::vector<float> padded(misalign);
          const std::vector<float> row = awkward_row(n, block, rng);
          padded.insert(padded.end(), row.begin(), row.end());
          const float* x = padded.data() + misalign;
          QuantizedRow got(n), want(n);
          quantize_activation_row(type, x, n, got.q.data(), got.d.data(), got.off4.data(),
                                  got.sum32.data());
          quantize_activation_row_reference(type, x, n, want.q.data(), want.d.data(),
                                            want.off4.data(), want.sum32.data());
          expect_same_row(got, want);
          if (::testing::Test::HasFatalFailure()) return;
        }
    }
  });
}

TEST(Q8ActQuantizeTest, TheDefinitionRoundsTiesToEvenSkipsNaNsAndClamps) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x(64, 0.0f);
  // Block 0: largest magnitude 254, so d = 2 and q = nearbyint(x / 2).
  const float first[] = {254.0f, 5.0f, 7.0f, -5.0f, -7.0f, 1.0f, 3.0f, nan, -254.0f, 0.4f};
  std::memcpy(x.data(), first, sizeof(first));
  // Block 1: an infinity makes d infinite and every value's product 0 or NaN: all 0.
  x[32] = inf;
  x[33] = 12.0f;
  for_each_target([&](const SimdTarget&) {
    QuantizedRow got(64);
    quantize_activation_row(DType::kQ8_0, x.data(), 64, got.q.data(), got.d.data(), got.off4.data(),
                            nullptr);
    const int8_t want_first[] = {127, 2, 4, -2, -4, 0, 2, 0, -127, 0};
    for (size_t i = 0; i < std::size(want_first); ++i) EXPECT_EQ(got.q[i], want_first[i]) << i;
    EXPECT_EQ(got.d[0], 2.0f);
    EXPECT_EQ(got.off4[0], -128 * (127 + 2 + 4 - 2));
    EXPECT_EQ(got.off4[1], -128 * (-4 + 0 + 2 + 0));
    EXPECT_EQ(got.off4[2], -128 * -127);
    EXPECT_TRUE(std::isinf(got.d[1]));
    for (size_t i = 32; i < 64; ++i) EXPECT_EQ(got.q[i], 0) << i;
  });
}

TEST(Q8ActQuantizeTest, Q4_KRowsCarryTheirSumsOf32) {
  std::mt19937 rng(5);
  const std::vector<float> x = test::random_normals(512, rng);
  for_each_target([&](const SimdTarget&) {
    QuantizedRow got(512);
    quantize_activation_row(DType::kQ4_K, x.data(), 512, got.q.data(), got.d.data(),
                            got.off4.data(), got.sum32.data());
    for (size_t k = 0; k < 16; ++k) {
      int32_t sum = 0;
      for (size_t i = 0; i < 32; ++i) sum += got.q[32 * k + i];
      EXPECT_EQ(got.sum32[k], sum) << k;
    }
  });
}

}  // namespace
}  // namespace kvlm
