// The SIMD half conversions give the scalar ones' bits (ops/dtype.h) on every target: rounding
// ties, the subnormal halves, overflow to infinity, NaN and signed zero included.
#include "ops/half_rows.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "ops/dtype.h"
#include "ops/for_each_target.h"

namespace kvlm {
namespace {

float from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Every half value's neighbourhood (the value itself, the fp32 ties halfway to the next half
// and one bit either side of them), both signs, plus a stride through all fp32 bit patterns:
// NaNs with various payloads, infinities, zeros, fp32 subnormals, values past the half range.
std::vector<float> probe_values() {
  std::vector<uint32_t> bits;
  for (uint32_t h = 0; h < 0x7c00u; ++h) {
    const float v = f16_to_f32(static_cast<uint16_t>(h));
    const float next = f16_to_f32(static_cast<uint16_t>(h + 1));
    uint32_t vb, nb;
    std::memcpy(&vb, &v, 4);
    std::memcpy(&nb, &next, 4);
    const uint32_t tie = vb + (nb - vb) / 2;
    for (uint32_t b : {vb, tie - 1, tie, tie + 1}) {
      bits.push_back(b);
      bits.push_back(b | 0x80000000u);
    }
  }
  for (uint64_t b = 0; b <= 0xffffffffu; b += 40'009) bits.push_back(static_cast<uint32_t>(b));
  for (uint32_t b : {0u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7f800001u, 0x7fc00000u,
                     0xffc00001u, 0x7fffffffu, 0x477fefffu, 0x477ff000u, 0x33000000u, 0x33000001u,
                     0x387fffffu, 0x38800000u, 0x00000001u, 0x7f7fffffu, 0xff7fffffu})
    bits.push_back(b);
  std::vector<float> values;
  for (uint32_t b : bits) values.push_back(from_bits(b));
  return values;
}

template <class Vector, class Scalar>
void expect_scalar_bits(Vector row_fn, Scalar scalar_fn, const std::vector<float>& values) {
  for_each_target([&](const SimdTarget&) {
    // Odd lengths and offsets: the partial last vector goes through the padded copy.
    for (size_t n : {values.size(), size_t{1}, size_t{7}, size_t{19}}) {
      std::vector<uint16_t> got(n, 0xabcd);
      row_fn(got.data(), values.data() + (values.size() - n), n);
      for (size_t i = 0; i < n; ++i) {
        const float v = values[values.size() - n + i];
        uint32_t b;
        std::memcpy(&b, &v, 4);
        ASSERT_EQ(got[i], scalar_fn(v)) << "fp32 bits 0x" << std::hex << b;
      }
    }
  });
}

TEST(HalfRowsTest, F16RowGivesTheScalarBitsOnEveryTarget) {
  expect_scalar_bits(f32_to_f16_row, f32_to_f16, probe_values());
}

TEST(HalfRowsTest, Bf16RowGivesTheScalarBitsOnEveryTarget) {
  std::vector<float> values = probe_values();
  // bf16's own ties: every bf16 value's fp32 halfway point and its neighbours.
  for (uint32_t top = 0; top < 0x10000u; top += 7) {
    const uint32_t base = top << 16;
    for (uint32_t b : {base, base + 0x7fffu, base + 0x8000u, base + 0x8001u})
      values.push_back(from_bits(b));
  }
  expect_scalar_bits(f32_to_bf16_row, f32_to_bf16, values);
}

TEST(HalfRowsTest, WritesExactlyTheRowAndNothingPastIt) {
  const std::vector<float> src = {1.0f, -2.5f, 65504.0f, 1e-7f, 3.0f};
  for_each_target([&](const SimdTarget&) {
    for (size_t n = 0; n <= src.size(); ++n) {
      std::vector<uint16_t> dst(src.size() + 16, 0xabcd);
      f32_to_f16_row(dst.data(), src.data(), n);
      for (size_t i = 0; i < dst.size(); ++i)
        ASSERT_EQ(dst[i], i < n ? f32_to_f16(src[i]) : 0xabcd) << "n " << n << ", index " << i;
    }
  });
}

}  // namespace
}  // namespace kvlm
