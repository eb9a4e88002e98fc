// Column strips (ops/weight_strips.h): where the packing puts each value, which matrices a loader
// packs, and decode over the strips giving the bits of the kernels that read the matrix
// as stored (whose stated order matmul_test.cpp checks), on every SIMD target, at every row and
// thread count, with misaligned pointers.
#include "ops/weight_strips.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/dtype.h"
#include "ops/for_each_target.h"
#include "ops/matmul.h"
#include "ops/matmul_bf16dot.h"
#include "ops/matmul_internal.h"
#include "support/random_values.h"
#include "support/without_bf16_dot.h"

namespace kvlm {
namespace {

// A random normal matrix of F16 or BF16 (Element uint16_t, their bits) or F32 (Element float)
// values, `offset` elements into its buffer (misalignment).
template <typename Element>
struct TestMatrix {
  std::vector<Element> values;
  WeightMatrix view;
  Element at(int i, int o) const {  // W[i][o]
    const auto* w = static_cast<const Element*>(view.data);
    return view.layout == WeightLayout::kInOut ? w[static_cast<size_t>(i) * view.n_out + o]
                                               : w[static_cast<size_t>(o) * view.n_in + i];
  }
};

template <typename Element>
TestMatrix<Element> make_matrix(DType dtype, int n_in, int n_out, WeightLayout layout, int offset,
                                std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 0.5f);
  TestMatrix<Element> m;
  m.values.resize(static_cast<size_t>(n_in) * n_out + offset);
  for (Element& v : m.values) {
    if constexpr (std::is_same_v<Element, float>) {
      v = normal(rng);
    } else {
      v = dtype == DType::kBF16 ? f32_to_bf16(normal(rng)) : f32_to_f16(normal(rng));
    }
  }
  m.view = WeightMatrix{m.values.data() + offset, dtype, layout, n_in, n_out};
  return m;
}

// Packed into a buffer first filled with a value no slot should keep (all bits set: a NaN).
template <typename Element>
std::vector<Element> pack(const WeightMatrix& w, int threads) {
  Element unset;
  std::memset(&unset, 0xff, sizeof unset);
  std::vector<Element> strips(weight_strips_size(w), unset);
  EXPECT_EQ(weight_strips_bytes(w), strips.size() * sizeof(Element));
  pack_weight_strips(strips.data(), w, threads);
  return strips;
}

const char* layout_name(WeightLayout l) {
  return l == WeightLayout::kInOut ? "[n_in, n_out]" : "[n_out, n_in]";
}

// The matrices a loader packs: F16 and BF16 (where vdpbf16ps is off) of either layout, F32
// [n_in, n_out].
struct Packed {
  DType dtype;
  WeightLayout layout;
};
const Packed kPacked[] = {{DType::kF16, WeightLayout::kInOut},
                          {DType::kF16, WeightLayout::kOutIn},
                          {DType::kBF16, WeightLayout::kInOut},
                          {DType::kBF16, WeightLayout::kOutIn},
                          {DType::kF32, WeightLayout::kInOut}};

// Calls fn(TestMatrix<Element>) with a new random matrix of `p`'s type and layout.
template <typename Fn>
void with_matrix(const Packed& p, int n_in, int n_out, int offset, std::mt19937& rng, Fn fn) {
  if (p.dtype == DType::kF32) {
    fn(make_matrix<float>(p.dtype, n_in, n_out, p.layout, offset, rng));
  } else {
    fn(make_matrix<uint16_t>(p.dtype, n_in, n_out, p.layout, offset, rng));
  }
}

std::string name(const Packed& p) {
  return std::string(dtype_name(p.dtype)) + " " + layout_name(p.layout);
}

}  // namespace

TEST(WeightStripsTest, PackingPutsEachValueWhereTheHeaderSays) {
  std::mt19937 rng(5);
  struct Shape {
    int n_in, n_out;
  };
  // Every type and layout the packing takes, F32 [n_out, n_in] included (no loader asks for it).
  for (DType dtype : {DType::kF16, DType::kBF16, DType::kF32})
    for (WeightLayout layout : {WeightLayout::kInOut, WeightLayout::kOutIn})
      for (Shape s : std::vector<Shape>{{1, 1}, {5, 47}, {16, 48}, {17, 49}, {33, 100}, {64, 97}})
        with_matrix({dtype, layout}, s.n_in, s.n_out, 1, rng, [&](const auto& m) {
          using Element = typename std::decay_t<decltype(m.values)>::value_type;
          SCOPED_TRACE(name({dtype, layout}) + " " + std::to_string(s.n_in) + " x " +
                       std::to_string(s.n_out));
          const size_t n_strips = (s.n_out + kStripCols - 1) / kStripCols;
          const size_t steps = layout == WeightLayout::kInOut ? s.n_in : (s.n_in + 15) / 16 * 16;
          ASSERT_EQ(weight_strips_size(m.view), n_strips * steps * kStripCols);
          const std::vector<Element> strips = pack<Element>(m.view, 3);
          const size_t K = (s.n_in + 15) / 16;
          for (size_t index = 0; index < strips.size(); ++index) {
            const size_t c = index % kStripCols, row = index / kStripCols;  // within all strips
            const size_t strip = row / steps, step = row % steps;
            // The element of W this slot holds: input i of output o.
            const size_t o = strip * kStripCols + c;
            const size_t i = layout == WeightLayout::kInOut ? step : 16 * (step % K) + step / K;
            const bool inside = o < static_cast<size_t>(s.n_out) && i < static_cast<size_t>(s.n_in);
            const Element want = inside ? m.at(static_cast<int>(i), static_cast<int>(o)) : 0;
            ASSERT_EQ(std::memcmp(&strips[index], &want, sizeof want), 0)
                << "slot " << index << " (strip " << strip << ", step " << step << ", column " << c
                << ")";
          }
        });
}

TEST(WeightStripsTest, F16AndBf16MatricesAndF32LayersArePackedAndTheSwitchTurnsItOff) {
  float value = 0;
  for (DType dtype : {DType::kQ8_0, DType::kQ4_K})
    for (WeightLayout layout : {WeightLayout::kInOut, WeightLayout::kOutIn})
      EXPECT_FALSE(wants_weight_strips({&value, dtype, layout, 32, 32})) << dtype_name(dtype);
  // F32's [n_out, n_in] head: each output's row is already one contiguous run.
  EXPECT_FALSE(wants_weight_strips({&value, DType::kF32, WeightLayout::kOutIn, 32, 32}));
  // BF16 where vdpbf16ps runs its products: they read AMX tiles or pairs, never these strips.
  for (WeightLayout layout : {WeightLayout::kInOut, WeightLayout::kOutIn})
    EXPECT_EQ(wants_weight_strips({&value, DType::kBF16, layout, 32, 32}), !bf16_dot_active())
        << layout_name(layout);
  const test::WithoutBf16Dot no_bf16_dot;
  for (const Packed& p : kPacked) {
    EXPECT_TRUE(wants_weight_strips({&value, p.dtype, p.layout, 32, 32})) << name(p);
    EXPECT_FALSE(wants_weight_strips({&value, p.dtype, p.layout, 0, 32})) << name(p);
    set_weight_strips_enabled(false);
    const bool off = wants_weight_strips({&value, p.dtype, p.layout, 32, 32});
    set_weight_strips_enabled(true);
    EXPECT_FALSE(off) << name(p) << ": set_weight_strips_enabled(false) did not stop the packing";
  }
}

// The same bits with and without strips, for decode's row counts (1..8) and prefill's (9 = 8 + 1;
// 64 and 71, a block of rows and past it; 130, three blocks), every row's bits those of the
// kernels that read the stored matrix.
TEST(WeightStripsTest, MatmulOverStripsGivesTheBitsOfTheStoredMatrix) {
  std::mt19937 rng(17);
  const test::WithoutBf16Dot no_bf16_dot;
  for_each_target([&](const SimdTarget&) {
    for (const Packed& p : kPacked)
      // 65 and 300: past a register tile (32 steps) and past a lane class of 16 steps; n_out
      // around the 48-column strips, and 9 strips (1..3 rows read up to 8 at once, then the rest
      // fewer at a time).
      for (int n_in : {1, 5, 16, 17, 33, 65, 300})
        for (int n_out : {1, 17, 47, 48, 49, 150, 401})
          for (int n_rows : {1, 2, 3, 4, 5, 6, 7, 8, 9, 64, 71, 130}) {
            SCOPED_TRACE(name(p) + " n_in " + std::to_string(n_in) + " n_out " +
                         std::to_string(n_out) + " rows " + std::to_string(n_rows));
            const int offset = (n_in + n_out + n_rows) % 3;
            with_matrix(p, n_in, n_out, offset, rng, [&](const auto& m) {
              using Element = typename std::decay_t<decltype(m.values)>::value_type;
              const std::vector<Element> strips = pack<Element>(m.view, 2);
              WeightMatrix packed = m.view;
              packed.strips = strips.data();
              const std::vector<float> xbuf = test::random_normals(n_rows * n_in + 1, rng);
              const std::vector<float> bias = test::random_normals(n_out, rng);
              const size_t n = static_cast<size_t>(n_rows) * n_out;
              std::vector<float> plain(n);
              matmul_forward(plain.data(), xbuf.data() + 1, m.view, bias.data(), n_rows,
                             Parallel{1});
              for (int threads : {1, 3}) {
                std::vector<float> outbuf(n + 2, -1.0f);
                matmul_forward(outbuf.data() + 1, xbuf.data() + 1, packed, bias.data(), n_rows,
                               Parallel{threads});
                ASSERT_EQ(std::memcmp(outbuf.data() + 1, plain.data(), n * 4), 0)
                    << threads << " threads";
                ASSERT_EQ(outbuf.front(), -1.0f) << "wrote before out";
                ASSERT_EQ(outbuf.back(), -1.0f) << "wrote past the end of out";
              }
            });
            if (HasFatalFailure()) return;
          }
  });
}

// matmul_forward reads the strips and not the matrix as stored: zeroed strips leave only the
// bias, for decode's rows and prefill's of either layout. A caller naming the tiled kernel, as
// the kernels' own tests do, still gets the stored matrix.
TEST(WeightStripsTest, MatmulReadsTheStrips) {
  std::mt19937 rng(29);
  const test::WithoutBf16Dot no_bf16_dot;
  for (const Packed& p : kPacked) {
    SCOPED_TRACE(name(p));
    with_matrix(p, 40, 60, 0, rng, [&](const auto& m) {
      std::vector<uint8_t> zeros(weight_strips_bytes(m.view), 0);
      WeightMatrix packed = m.view;
      packed.strips = zeros.data();
      const std::vector<float> x = test::random_normals(130 * 40, rng);
      const std::vector<float> bias = test::random_normals(60, rng);
      auto bias_only = [&](const std::vector<float>& out) {
        size_t n = 0;
        for (size_t k = 0; k < out.size(); ++k) n += out[k] == bias[k % 60];
        return n;
      };
      for (int n_rows : {1, 2, 3, 8, 9, 64, 65, 130}) {
        std::vector<float> out(static_cast<size_t>(n_rows) * 60);
        matmul_forward(out.data(), x.data(), packed, bias.data(), n_rows, Parallel{2});
        EXPECT_EQ(bias_only(out), out.size())
            << n_rows << " rows: not every output read the strips";
      }
      std::vector<float> tiled(9 * 60);
      matmul_forward_path(tiled.data(), x.data(), packed, bias.data(), 9, Parallel{2},
                          MatmulPath::kTiled);
      EXPECT_LT(bias_only(tiled), tiled.size() / 10) << "the tiled path read the strips";
    });
  }
}

}  // namespace kvlm
