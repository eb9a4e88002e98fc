// kv_encode_row's SIMD rows (ops/half_rows.h, ops/kv_encode_rows.h) give the scalar
// reference's bytes for every storable type on every target: random rows at many magnitudes,
// every e4m3 code's value and the ties between neighbouring codes, q8_0's exact .5 ties,
// NaN, infinities, signed zeros, short last blocks and heads that are not whole vectors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "ops/for_each_target.h"
#include "ops/kv_format.h"

namespace kvlm {
namespace {

struct Row {
  std::string what;
  std::vector<float> values;
};

std::vector<Row> probe_rows() {
  std::vector<Row> rows;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float magnitude : {1e-6f, 1e-3f, 0.05f, 1.0f, 30.0f, 600.0f, 1e5f}) {
    Row r{"normal x " + std::to_string(magnitude), {}};
    for (int i = 0; i < 768; ++i) r.values.push_back(normal(rng) * magnitude);
    rows.push_back(r);
  }
  // Every e4m3 code's value, the fp32 midpoints between neighbouring codes (the ties) and one
  // bit either side, both signs: each hits a rounding boundary once divided by a scale of 1.
  Row e4m3{"e4m3 codes and ties", {}};
  for (int b = 0; b < 0x7e; ++b) {
    const float v = e4m3_to_f32(static_cast<uint8_t>(b));
    const float next = e4m3_to_f32(static_cast<uint8_t>(b + 1));
    const float tie = (v + next) / 2;  // exact: neighbours differ by one quantum
    for (float x : {v, tie, std::nextafter(tie, 0.0f), std::nextafter(tie, 1e9f)})
      e4m3.values.push_back(x), e4m3.values.push_back(-x);
  }
  for (float x : {448.0f, 464.0f, 500.0f, 1e-9f, 1e-40f}) e4m3.values.push_back(x);
  rows.push_back(e4m3);
  // q8_0 blocks whose largest magnitude is 127 (d = 1, 1 / d = 1): x + 0.5 is an exact tie that
  // std::round takes away from zero, where round-to-even would not.
  Row ties{"q8_0 ties", {}};
  for (int block = 0; block < 4; ++block) {
    ties.values.push_back(block % 2 ? -127.0f : 127.0f);
    for (int i = 1; i < 32; ++i) ties.values.push_back((i - 16) + (block < 2 ? 0.5f : -0.5f));
  }
  rows.push_back(ties);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  rows.push_back({"specials",
                  {0.0f, -0.0f, nan, -nan, inf, -inf, 1.0f, -2.0f, 65504.0f, 65520.0f, 6e-8f,
                   -3e-8f, 1e-45f, -1e-45f, 0.3f, 1e30f}});
  rows.push_back({"NaN among finite values", {1.0f, nan, -3.0f, 2.5f, nan, 0.25f, -0.75f}});
  rows.push_back({"an infinite value in a block", {1.0f, inf, -3.0f, 2.5f}});
  rows.push_back({"all zero", std::vector<float>(40, 0.0f)});
  return rows;
}

TEST(KvEncodeRows, EveryTypeGivesTheScalarReferenceBytesOnEveryTarget) {
  const std::vector<Row> rows = probe_rows();
  for_each_target([&](const SimdTarget&) {
    for (KvDtype dtype : {KvDtype::f16, KvDtype::bf16, KvDtype::fp8, KvDtype::q8_0}) {
      SCOPED_TRACE(kv_dtype_name(dtype));
      for (const Row& row : rows) {
        SCOPED_TRACE(row.what);
        // Whole rows, and the first n values for n that leave partial vectors and blocks.
        for (size_t n : {row.values.size(), size_t{45}, size_t{13}, size_t{1}}) {
          if (n > row.values.size()) continue;
          // fp8: heads of 5 and of the whole row, scales 1 and a few others.
          for (size_t head_dim : {n, size_t{5}}) {
            const size_t n_heads = (n + head_dim - 1) / head_dim;
            std::vector<float> scales(n_heads);
            for (size_t h = 0; h < n_heads; ++h) scales[h] = h % 3 == 0 ? 1.0f : 0.37f * h;
            std::vector<std::byte> got(kv_row_bytes(dtype, n) + 8, std::byte{0xcd});
            std::vector<std::byte> want = got;
            kv_encode_row(got.data(), row.values.data(), n, dtype, scales.data(), head_dim);
            kv_encode_row_reference(want.data(), row.values.data(), n, dtype, scales.data(),
                                    head_dim);
            for (size_t i = 0; i < got.size(); ++i)
              ASSERT_EQ(got[i], want[i]) << "n " << n << ", head_dim " << head_dim << ", byte " << i
                                         << " of " << kv_row_bytes(dtype, n);
          }
        }
      }
    }
  });
}

}  // namespace
}  // namespace kvlm
