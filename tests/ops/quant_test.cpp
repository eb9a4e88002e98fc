// ggml's block layouts: blocks packed by hand in the test (from the layout described in
// ops/quant.h, independently of the code that reads them), dequantized, and compared with
// values computed from the formulas; and the reference quantizers on inputs whose quantization
// is known.
#include "ops/quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace kvlm {
namespace {

template <typename Block>
std::vector<float> dequantize(const Block& b, DType type) {
  std::vector<float> y(dtype_block_elements(type));
  dequantize_row(y.data(), &b, type, y.size());
  for (size_t i = 0; i < y.size(); ++i)  // element access agrees with the row
    EXPECT_EQ(load_as_f32(&b, type, i), y[i]) << "element " << i;
  return y;
}

TEST(QuantBlocks, FastHalfConversionIsExactForEveryInput) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float a = f16_to_f32(static_cast<uint16_t>(h)),
                b = f16_to_f32_fast(static_cast<uint16_t>(h));
    ASSERT_EQ(0, std::memcmp(&a, &b, 4)) << "fp16 bits " << h;
  }
}

TEST(QuantBlocks, Q8_0) {
  BlockQ8_0 b;
  b.d = 0x3800;  // 0.5
  for (int j = 0; j < 32; ++j) b.q[j] = static_cast<int8_t>(j * 8 - 128);
  const auto y = dequantize(b, DType::kQ8_0);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], (j * 8 - 128) * 0.5f) << j;
}

TEST(QuantBlocks, Q4_0) {
  BlockQ4_0 b;
  b.d = 0x4000;  // 2.0
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = dequantize(b, DType::kQ4_0);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 2.0f) << j;            // low nibbles: values 0..15
    EXPECT_EQ(y[j + 16], (15 - j - 8) * 2.0f) << j;  // high nibbles: values 16..31
  }
}

// Q5_0: Q4_0's nibbles plus a fifth bit per value in a little-endian word (bit j: value j).
TEST(QuantBlocks, Q5_0) {
  BlockQ5_0 b;
  b.d = 0xb800;  // -0.5
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const uint32_t qh = 0xa5c3'0ff1u;
  std::memcpy(b.qh, &qh, 4);
  const auto y = dequantize(b, DType::kQ5_0);
  for (int j = 0; j < 16; ++j) {
    const int q0 = j + 16 * ((qh >> j) & 1), q1 = (15 - j) + 16 * ((qh >> (j + 16)) & 1);
    EXPECT_EQ(y[j], (q0 - 16) * -0.5f) << j;
    EXPECT_EQ(y[j + 16], (q1 - 16) * -0.5f) << j;
  }
}

TEST(QuantBlocks, Q4_K) {
  const int sc[8] = {1, 2, 3, 4, 17, 33, 50, 63};  // the last four need their high bits
  const int m[8] = {0, 5, 10, 15, 20, 40, 60, 63};
  BlockQ4_K b{};
  b.d = 0x3C00;     // 1.0
  b.dmin = 0x3800;  // 0.5
  for (int j = 0; j < 4; ++j) {
    b.scales[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    b.scales[j + 4] = static_cast<uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
    b.scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
  }
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>((i % 16) | ((15 - i % 16) << 4));
  const auto y = dequantize(b, DType::kQ4_K);
  for (int e = 0; e < 256; ++e) {
    const int s = e / 32, byte = (e / 64) * 32 + e % 32;
    const int q = s % 2 == 0 ? byte % 16 : 15 - byte % 16;
    EXPECT_EQ(y[e], 1.0f * sc[s] * q - 0.5f * m[s]) << e;
  }
}

TEST(QuantBlocks, Q6_K) {
  BlockQ6_K b{};
  b.d = 0x3400;  // 0.25
  for (int i = 0; i < 16; ++i) b.scales[i] = static_cast<int8_t>(i * 9 - 70);
  auto q6 = [](int e) { return (e * 7 + 3) % 64; };  // every 6-bit value, scrambled
  for (int n = 0; n < 2; ++n)
    for (int l = 0; l < 32; ++l) {
      const int e = n * 128 + l;
      const int a = q6(e), bb = q6(e + 32), c = q6(e + 64), d = q6(e + 96);
      b.ql[n * 64 + l] = static_cast<uint8_t>((a & 0xF) | ((c & 0xF) << 4));
      b.ql[n * 64 + l + 32] = static_cast<uint8_t>((bb & 0xF) | ((d & 0xF) << 4));
      b.qh[n * 32 + l] =
          static_cast<uint8_t>((a >> 4) | ((bb >> 4) << 2) | ((c >> 4) << 4) | ((d >> 4) << 6));
    }
  const auto y = dequantize(b, DType::kQ6_K);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 0.25f * b.scales[e / 16] * (q6(e) - 32)) << e;
}

TEST(QuantBlocks, QuantizeQ8_0AsGgml) {
  std::vector<float> x(64);
  for (int j = 0; j < 32; ++j) x[j] = j == 0 ? 127.0f : 1.5f * (j - 16);  // d = 127/127 = 1
  for (int j = 32; j < 64; ++j) x[j] = 0.0f;                              // d = 0, all q 0
  std::vector<BlockQ8_0> q(2);
  ASSERT_TRUE(quantize_row(q.data(), x.data(), DType::kQ8_0, 64));
  EXPECT_EQ(q[0].d, 0x3C00);
  for (int j = 1; j < 32; ++j) EXPECT_EQ(q[0].q[j], std::round(1.5f * (j - 16))) << j;
  EXPECT_EQ(q[0].q[0], 127);
  EXPECT_EQ(q[1].d, 0);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(q[1].q[j], 0);
}

TEST(QuantBlocks, QuantizeQ4_0AsGgml) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = j == 0 ? -16.0f : static_cast<float>(j - 16);
  BlockQ4_0 q;
  ASSERT_TRUE(quantize_row(&q, x.data(), DType::kQ4_0, 32));
  EXPECT_EQ(q.d, 0x4000);  // d = max / -8 = 2
  const auto y = dequantize(q, DType::kQ4_0);
  EXPECT_EQ(y[0], -16.0f);
  for (int j = 1; j < 32; ++j) {
    const int level = std::min(15, static_cast<int>(0.5f * (j - 16) + 8.5f));
    EXPECT_EQ(y[j], (level - 8) * 2.0f) << j;
  }
  EXPECT_FALSE(quantize_row(&q, x.data(), DType::kF16, 32));  // plain types: store_row's job
}

// quantize_row_q5_0_ref: d = (value of largest magnitude) / -16, levels min(31, int8(x / d +
// 16.5)), the fifth bit of level j in bit j of qh.
TEST(QuantBlocks, QuantizeQ5_0AsGgml) {
  std::vector<float> x(64);
  for (int j = 0; j < 32; ++j) x[j] = j == 0 ? -32.0f : static_cast<float>(j - 16);
  for (int j = 32; j < 64; ++j) x[j] = 0.0f;  // an all-zero block: d = 0, every level 16
  BlockQ5_0 q[2];
  ASSERT_TRUE(quantize_row(q, x.data(), DType::kQ5_0, 64));
  EXPECT_EQ(q[0].d, 0x4000);  // d = -32 / -16 = 2
  const auto y = dequantize(q[0], DType::kQ5_0);
  EXPECT_EQ(y[0], -32.0f);
  for (int j = 1; j < 32; ++j) {
    const int level = std::min(31, static_cast<int>(0.5f * (j - 16) + 16.5f));
    EXPECT_EQ(y[j], (level - 16) * 2.0f) << j;
  }
  EXPECT_EQ(q[1].d, 0x8000);  // 0 / -16: negative zero, as ggml stores it
  uint32_t qh;
  std::memcpy(&qh, q[1].qh, 4);
  EXPECT_EQ(qh, 0xffffffffu);  // level 16 = fifth bit set, nibble 0
  for (int j = 0; j < 16; ++j) EXPECT_EQ(q[1].qs[j], 0);
}

}  // namespace
}  // namespace kvlm
