// The reference quantizers against ggml: blocks whose quantization follows by hand from ggml's
// algorithm, the bytes ggml's own quantize_row_*_ref write for 24 varied blocks
// (tests/golden/ggml_quants.bin, made by tests/reference/ggml_quants_fixture.c: zeros,
// constants, outliers, values below ggml's epsilon, fp16-subnormal scales, rounding ties, heavy
// tails), and quantize -> dequantize -> quantize round trips.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <vector>

#include "ops/quant.h"
#include "support/test_support.h"

namespace kvlm {
namespace {

std::vector<uint8_t> quantize(const std::vector<float>& x, DType type) {
  std::vector<uint8_t> out(dtype_bytes(type, x.size()));
  EXPECT_TRUE(quantize_row(out.data(), x.data(), type, x.size()));
  return out;
}

std::vector<float> dequantize(const std::vector<uint8_t>& q, DType type, size_t n) {
  std::vector<float> y(n);
  dequantize_row(y.data(), q.data(), type, n);
  return y;
}

// Q6_K, by hand: each 16-value group holds the integers -8..7. Its fit maps the largest
// magnitude (-8) to level -32: scale 8 / 32 = 0.25 exactly, levels 4x, squared error 0 (no
// other candidate scale can do better). The block scale is then -0.25 / 128 = -2^-9 (fp16
// 0x9800) and every group's 6-bit scale -128 (-128 * -2^-9 = 0.25), so the block stores
// q = 4x + 32 and dequantizes to x exactly.
TEST(QuantizeK, Q6KBlockByHand) {
  std::vector<float> x(256);
  for (int i = 0; i < 256; ++i) x[i] = static_cast<float>(i % 16 - 8);
  const auto bytes = quantize(x, DType::kQ6_K);
  BlockQ6_K b;
  std::memcpy(&b, bytes.data(), sizeof(b));
  EXPECT_EQ(b.d, 0x9800);
  for (int s = 0; s < 16; ++s) EXPECT_EQ(b.scales[s], -128) << s;
  for (int h = 0; h < 2; ++h)  // layout of ops/quant.h, written out independently
    for (int l = 0; l < 32; ++l) {
      auto q = [&](int e) { return 4 * static_cast<int>(x[128 * h + e]) + 32; };
      EXPECT_EQ(b.ql[64 * h + l], (q(l) & 0xF) | ((q(l + 64) & 0xF) << 4)) << h << " " << l;
      EXPECT_EQ(b.ql[64 * h + l + 32], (q(l + 32) & 0xF) | ((q(l + 96) & 0xF) << 4));
      EXPECT_EQ(b.qh[32 * h + l], (q(l) >> 4) | ((q(l + 32) >> 4) << 2) | ((q(l + 64) >> 4) << 4) |
                                      ((q(l + 96) >> 4) << 6));
    }
  EXPECT_EQ(dequantize(bytes, DType::kQ6_K, 256), x);
}

// Q4_K, by hand: each 32-value sub-block holds (i % 16) / 8, from 0 to 1.875. The affine fit
// has min 0 and scale 1.875 / 15 = 0.125 with levels i % 16 and error 0 (no candidate beats
// it). So the mins are all 0 (dmin 0, 6-bit mins 0), every 6-bit scale is 63 (the largest),
// d = fp16(0.125 / 63), and the levels survive the re-quantization against d * 63.
TEST(QuantizeK, Q4KBlockByHand) {
  std::vector<float> x(256);
  for (int i = 0; i < 256; ++i) x[i] = static_cast<float>(i % 16) / 8;
  const auto bytes = quantize(x, DType::kQ4_K);
  BlockQ4_K b;
  std::memcpy(&b, bytes.data(), sizeof(b));
  EXPECT_EQ(b.d, f32_to_f16(0.125f / 63));
  EXPECT_EQ(b.dmin, 0);
  for (int j = 0; j < 4; ++j) {
    EXPECT_EQ(b.scales[j], 63 | (3 << 6)) << j;  // scale j, and the high bits of scale j + 4
    EXPECT_EQ(b.scales[j + 4], 0) << j;          // min j, and the high bits of min j + 4
    EXPECT_EQ(b.scales[j + 8], 15) << j;         // low bits of scale and min j + 4
  }
  for (int i = 0; i < 128; ++i) EXPECT_EQ(b.qs[i], (i % 16) * 0x11) << i;
  const auto y = dequantize(bytes, DType::kQ4_K, 256);
  const float d = f16_to_f32(b.d) * 63;
  for (int i = 0; i < 256; ++i) EXPECT_EQ(y[i], d * (i % 16)) << i;
}

TEST(QuantizeK, ZeroAndTinyBlocksAreZero) {
  for (float v : {0.0f, 1e-20f})
    for (DType type : {DType::kQ4_K, DType::kQ6_K}) {
      const auto y = dequantize(quantize(std::vector<float>(512, v), type), type, 512);
      for (float e : y) ASSERT_EQ(e, 0.0f) << dtype_name(type) << " of " << v;
    }
}

// The bytes ggml writes, for every type kvlm quantizes to.
TEST(QuantizeK, SameBytesAsGgml) {
  std::ifstream in(test::source_dir() + "/tests/golden/ggml_quants.bin", std::ios::binary);
  ASSERT_TRUE(in) << "tests/golden/ggml_quants.bin";
  char magic[4];
  uint32_t n = 0;
  in.read(magic, 4);
  in.read(reinterpret_cast<char*>(&n), 4);
  ASSERT_EQ(std::string(magic, 4), "KVQF");
  ASSERT_EQ(n % 256, 0u);
  std::vector<float> x(n);
  in.read(reinterpret_cast<char*>(x.data()), 4 * n);
  // The fixture's order (ggml_quants_fixture.c): each type appended after the earlier ones.
  for (DType type : {DType::kQ4_K, DType::kQ6_K, DType::kQ8_0, DType::kQ4_0, DType::kQ5_0}) {
    std::vector<uint8_t> expected(dtype_bytes(type, n));
    in.read(reinterpret_cast<char*>(expected.data()),
            static_cast<std::streamsize>(expected.size()));
    ASSERT_TRUE(in) << "fixture truncated at " << dtype_name(type);
    const auto ours = quantize(x, type);
    const size_t block_bytes = dtype_block_bytes(type);
    for (size_t b = 0; b < expected.size() / block_bytes; ++b)
      EXPECT_EQ(0, std::memcmp(ours.data() + b * block_bytes, expected.data() + b * block_bytes,
                               block_bytes))
          << dtype_name(type) << " block " << b << " (values from "
          << b * dtype_block_elements(type) << ")";
  }
  EXPECT_EQ(in.peek(), std::char_traits<char>::eof()) << "fixture has bytes this test ignores";
}

// Quantizing what a quantization dequantizes to gives its values back (the quantizers fit
// the levels they are given), and the error of a first quantization stays within the types'
// step sizes.
TEST(QuantizeK, RoundTrips) {
  std::vector<float> x(1024);
  uint32_t s = 12345;
  for (float& v : x) {
    s = s * 1664525u + 1013904223u;
    v = (static_cast<float>(s >> 8) / 16777216.0f - 0.5f) * 0.1f;
  }
  for (DType type : {DType::kQ4_K, DType::kQ6_K}) {
    const auto once = dequantize(quantize(x, type), type, x.size());
    float worst = 0;
    for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(once[i] - x[i]));
    // Range 0.1: a 4-bit step is 0.1 / 15, a 6-bit one 0.1 / 64; half a step, plus the
    // scales' 6- or 8-bit rounding.
    EXPECT_LT(worst, type == DType::kQ4_K ? 0.0045f : 0.0012f) << dtype_name(type);
    const auto twice = dequantize(quantize(once, type), type, x.size());
    float drift = 0;
    for (size_t i = 0; i < x.size(); ++i) drift = std::max(drift, std::fabs(twice[i] - once[i]));
    EXPECT_LT(drift, worst) << dtype_name(type) << ": re-quantizing moved values";
  }
}

}  // namespace
}  // namespace kvlm
