// Column strips (ops/weight_strips.h): where the packing puts each value, which matrices a loader
// packs, and batched decode over the strips giving the bits of the kernels that read the matrix
// as stored (whose stated order matmul_test.cpp checks), on every SIMD target, at every row and
// thread count, with misaligned pointers.
#include "ops/weight_strips.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ops/dtype.h"
#include "ops/for_each_target.h"
#include "ops/matmul.h"
#include "ops/matmul_internal.h"
#include "support/random_values.h"

namespace kvlm {
namespace {

struct F16Matrix {
  std::vector<uint16_t> values;
  WeightMatrix view;
  uint16_t at(int i, int o) const {  // W[i][o]
    const auto* w = static_cast<const uint16_t*>(view.data);
    return view.layout == WeightLayout::kInOut ? w[static_cast<size_t>(i) * view.n_out + o]
                                               : w[static_cast<size_t>(o) * view.n_in + i];
  }
};

// Random normal F16 values, `offset` elements into the buffer (misalignment).
F16Matrix make_f16(int n_in, int n_out, WeightLayout layout, int offset, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 0.5f);
  F16Matrix m;
  m.values.resize(static_cast<size_t>(n_in) * n_out + offset);
  for (uint16_t& v : m.values) v = f32_to_f16(normal(rng));
  m.view = WeightMatrix{m.values.data() + offset, DType::kF16, layout, n_in, n_out};
  return m;
}

std::vector<uint16_t> pack(const WeightMatrix& w, int threads) {
  std::vector<uint16_t> strips(weight_strips_size(w), 0xffff);
  pack_weight_strips(strips.data(), w, threads);
  return strips;
}

const char* layout_name(WeightLayout l) {
  return l == WeightLayout::kInOut ? "[n_in, n_out]" : "[n_out, n_in]";
}

}  // namespace

TEST(WeightStripsTest, PackingPutsEachValueWhereTheHeaderSays) {
  std::mt19937 rng(5);
  struct Shape {
    int n_in, n_out;
  };
  for (WeightLayout layout : {WeightLayout::kInOut, WeightLayout::kOutIn})
    for (Shape s : std::vector<Shape>{{1, 1}, {5, 47}, {16, 48}, {17, 49}, {33, 100}, {64, 97}}) {
      SCOPED_TRACE(std::string(layout_name(layout)) + " " + std::to_string(s.n_in) + " x " +
                   std::to_string(s.n_out));
      const F16Matrix m = make_f16(s.n_in, s.n_out, layout, 1, rng);
      const size_t n_strips = (s.n_out + kStripCols - 1) / kStripCols;
      const size_t steps = layout == WeightLayout::kInOut ? s.n_in : (s.n_in + 15) / 16 * 16;
      ASSERT_EQ(weight_strips_size(m.view), n_strips * steps * kStripCols);
      const std::vector<uint16_t> strips = pack(m.view, 3);
      const size_t K = (s.n_in + 15) / 16;
      for (size_t index = 0; index < strips.size(); ++index) {
        const size_t c = index % kStripCols, row = index / kStripCols;  // row within all strips
        const size_t strip = row / steps, step = row % steps;
        // The element of W this slot holds: input i of output o.
        const size_t o = strip * kStripCols + c;
        const size_t i = layout == WeightLayout::kInOut ? step : 16 * (step % K) + step / K;
        const bool inside = o < static_cast<size_t>(s.n_out) && i < static_cast<size_t>(s.n_in);
        const uint16_t want = inside ? m.at(static_cast<int>(i), static_cast<int>(o)) : 0;
        ASSERT_EQ(strips[index], want) << "slot " << index << " (strip " << strip << ", step "
                                       << step << ", column " << c << ")";
      }
    }
}

TEST(WeightStripsTest, OnlyF16MatricesArePackedAndTheSwitchTurnsItOff) {
  uint16_t value = 0;
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kQ8_0, DType::kQ4_K})
    EXPECT_FALSE(wants_weight_strips({&value, dtype, WeightLayout::kInOut, 32, 32}))
        << dtype_name(dtype);
  for (WeightLayout layout : {WeightLayout::kInOut, WeightLayout::kOutIn})
    EXPECT_TRUE(wants_weight_strips({&value, DType::kF16, layout, 32, 32}));
  EXPECT_FALSE(wants_weight_strips({&value, DType::kF16, WeightLayout::kInOut, 0, 32}));
  set_weight_strips_enabled(false);
  const bool off = wants_weight_strips({&value, DType::kF16, WeightLayout::kInOut, 32, 32});
  set_weight_strips_enabled(true);
  EXPECT_FALSE(off) << "set_weight_strips_enabled(false) did not stop the packing";
}

// The same bits with and without strips: rows 1..8 of [n_in, n_out] and 3..8 of [n_out, n_in] read
// the strips (see the next test), the others and 9 (8 + 1) do not, and every row count must give a
// row the same bits.
TEST(WeightStripsTest, DecodeOverStripsGivesTheBitsOfTheStoredMatrix) {
  std::mt19937 rng(17);
  for_each_target([&](const SimdTarget&) {
    for (WeightLayout layout : {WeightLayout::kInOut, WeightLayout::kOutIn})
      // 65 and 300: past a register tile (32 steps) and past a lane class of 16 steps; n_out
      // around the 48-column strips.
      for (int n_in : {1, 5, 16, 17, 33, 65, 300})
        for (int n_out : {1, 17, 47, 48, 49, 150})
          for (int n_rows = 1; n_rows <= 9; ++n_rows) {
            SCOPED_TRACE(std::string(layout_name(layout)) + " n_in " + std::to_string(n_in) +
                         " n_out " + std::to_string(n_out) + " rows " + std::to_string(n_rows));
            const int offset = (n_in + n_out + n_rows) % 3;
            const F16Matrix m = make_f16(n_in, n_out, layout, offset, rng);
            const std::vector<uint16_t> strips = pack(m.view, 2);
            WeightMatrix packed = m.view;
            packed.strips = strips.data();
            const std::vector<float> xbuf = test::random_normals(n_rows * n_in + 1, rng);
            const std::vector<float> bias = test::random_normals(n_out, rng);
            const size_t n = static_cast<size_t>(n_rows) * n_out;
            std::vector<float> plain(n);
            matmul_forward(plain.data(), xbuf.data() + 1, m.view, bias.data(), n_rows, Parallel{1});
            for (int threads : {1, 3}) {
              std::vector<float> outbuf(n + 2, -1.0f);
              matmul_forward(outbuf.data() + 1, xbuf.data() + 1, packed, bias.data(), n_rows,
                             Parallel{threads});
              ASSERT_EQ(std::memcmp(outbuf.data() + 1, plain.data(), n * 4), 0)
                  << threads << " threads";
              ASSERT_EQ(outbuf.front(), -1.0f) << "wrote before out";
              ASSERT_EQ(outbuf.back(), -1.0f) << "wrote past the end of out";
            }
          }
  });
}

// Decode reads the strips and not the matrix as stored: zeroed strips leave only the bias, for
// 1..8 rows of [n_in, n_out] and 3..8 rows of [n_out, n_in]; 1 and 2 rows of [n_out, n_in] still
// see the weights.
TEST(WeightStripsTest, DecodeOfThreeToEightRowsReadsTheStrips) {
  std::mt19937 rng(29);
  for (WeightLayout layout : {WeightLayout::kInOut, WeightLayout::kOutIn}) {
    SCOPED_TRACE(layout_name(layout));
    const F16Matrix m = make_f16(40, 60, layout, 0, rng);
    std::vector<uint16_t> zeros(weight_strips_size(m.view), 0);
    WeightMatrix packed = m.view;
    packed.strips = zeros.data();
    const std::vector<float> x = test::random_normals(8 * 40, rng);
    const std::vector<float> bias = test::random_normals(60, rng);
    for (int n_rows = 1; n_rows <= 8; ++n_rows) {
      std::vector<float> out(static_cast<size_t>(n_rows) * 60);
      matmul_forward(out.data(), x.data(), packed, bias.data(), n_rows, Parallel{2});
      size_t bias_only = 0;
      for (size_t k = 0; k < out.size(); ++k) bias_only += out[k] == bias[k % 60];
      if (n_rows >= 3 || layout == WeightLayout::kInOut) {
        EXPECT_EQ(bias_only, out.size()) << n_rows << " rows: not every output read the strips";
      } else {
        EXPECT_LT(bias_only, out.size() / 10) << n_rows << " rows read the strips";
      }
    }
  }
}

}  // namespace kvlm
