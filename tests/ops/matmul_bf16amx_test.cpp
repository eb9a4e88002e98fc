// The AMX BF16 matmul (ops/matmul_bf16amx.h): the kernels against the scalar model, bit for bit
// on values whose exponents stay close (where the model is the hardware), and within a stated
// bound of the double-precision product on normal values, over sizes around every tile,
// chunk and block boundary, misaligned, at several thread counts; a row's bits alone and among
// other rows (what cached == uncached rests on); and matmul_forward sending BF16 there exactly when
// bf16_amx_active(). On a CPU without AMX the kernel tests skip (the scalar model's bound still
// runs).
#include "ops/matmul_bf16amx.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ops/dtype.h"
#include "ops/for_each_target.h"
#include "ops/matmul.h"
#include "ops/matmul_bf16dot.h"
#include "support/bf16_matrix.h"
#include "support/random_values.h"

namespace kvlm {
namespace {

using test::Bf16Matrix;
using test::layout_name;

#define SKIP_WITHOUT_AMX()                                                     \
  if (!cpu_has_amx_bf16())                                                     \
  GTEST_SKIP() << "this CPU has no AMX-BF16 (or Linux did not grant the tile " \
                  "state): the kernels are not used here"

// Values of either sign: normal (sd 0.5, so their exponents spread widely), or `narrow`:
// magnitudes in [0.5, 2), the ordinary range where the scalar model is the hardware bit for bit.
float random_value(std::mt19937& rng, bool narrow) {
  if (!narrow) return std::normal_distribution<float>(0.0f, 0.5f)(rng);
  const float v = std::uniform_real_distribution<float>(0.5f, 2.0f)(rng);
  return rng() & 1 ? -v : v;
}

std::vector<float> random_values(size_t n, std::mt19937& rng, bool narrow) {
  std::vector<float> v(n);
  for (float& f : v) f = random_value(rng, narrow);
  return v;
}

Bf16Matrix make_matrix(int n_in, int n_out, WeightLayout layout, int offset, std::mt19937& rng,
                       bool narrow = false) {
  return test::random_bf16_matrix(n_in, n_out, layout, offset,
                                  [&] { return random_value(rng, narrow); });
}

// The kernels at 1, 2 and 3 threads: on narrow values against the scalar model, bit for bit;
// on normal values against the double-precision product, within x's rounding to bf16 and two
// fp32 roundings per chunk (the chunk's sum, its add) and the bias's; never writing outside out.
void check_kernels(int n_in, int n_out, int n_rows, WeightLayout layout, int offset,
                   std::mt19937& rng) {
  SCOPED_TRACE(std::string(layout_name(layout)) + " n_in " + std::to_string(n_in) + " n_out " +
               std::to_string(n_out) + " rows " + std::to_string(n_rows));
  for (bool narrow : {true, false}) {
    SCOPED_TRACE(narrow ? "narrow values: bitwise the model" : "normal values: within the bound");
    const Bf16Matrix m = make_matrix(n_in, n_out, layout, offset, rng, narrow);
    const std::vector<float> xbuf =
        random_values(static_cast<size_t>(n_rows) * n_in + offset, rng, narrow);
    const std::vector<float> bbuf = random_values(n_out + offset, rng, narrow);
    const float* x = xbuf.data() + offset;
    const float* bias = n_in % 3 == 0 ? nullptr : bbuf.data() + offset;
    const size_t n_total = static_cast<size_t>(n_rows) * n_out;
    std::vector<float> model(n_total), exact(n_total);
    matmul_bf16amx_reference(model.data(), x, m.view, bias, n_rows);
    matmul_reference(exact.data(), x, m.view, bias, n_rows);
    const int n_chunks = (n_in + 31) / 32;
    std::vector<double> bound(n_total);
    for (int r = 0; r < n_rows; ++r)
      for (int o = 0; o < n_out; ++o) {
        double magnitude = bias ? std::fabs(bias[o]) : 0.0;
        for (int i = 0; i < n_in; ++i) {
          const size_t wi = layout == WeightLayout::kInOut ? static_cast<size_t>(i) * n_out + o
                                                           : static_cast<size_t>(o) * n_in + i;
          magnitude += std::fabs(x[r * n_in + i] * bf16_to_f32(m.storage[offset + wi]));
        }
        // + the fp32 reference's own n_in + 1 roundings.
        bound[r * n_out + o] =
            (std::ldexp(1.0, -8) + (2 * n_chunks + n_in + 2) * std::ldexp(1.0, -24)) * magnitude +
            1e-30;
        ASSERT_NEAR(model[r * n_out + o], exact[r * n_out + o], bound[r * n_out + o])
            << "model, row " << r << " output " << o;
      }
    if (!cpu_has_amx_bf16()) continue;
    // kInOut also with its weights packed as at load (WeightMatrix::amx_tiles).
    std::vector<uint16_t> tiles;
    if (layout == WeightLayout::kInOut) {
      tiles.resize(bf16amx_tiles_size(m.view));
      pack_bf16amx_tiles(tiles.data(), m.view, 2);
    }
    for (int run : {1, 2, 3, 4}) {
      const int threads = run <= 3 ? run : 2;
      if (run == 4 && tiles.empty()) break;
      SCOPED_TRACE(run == 4 ? "weights packed at load" : "weights as stored");
      WeightMatrix view = m.view;
      view.amx_tiles = run == 4 ? tiles.data() : nullptr;
      std::vector<float> outbuf(n_total + offset + 1, -1.0f);
      float* out = outbuf.data() + offset;
      matmul_bf16amx_forward(out, x, view, bias, n_rows, Parallel{threads});
      for (size_t k = 0; k < n_total; ++k) {
        if (narrow) {
          ASSERT_EQ(std::memcmp(&out[k], &model[k], 4), 0)
              << threads << " threads, row " << k / n_out << " output " << k % n_out << ": "
              << out[k] << " vs model " << model[k];
        } else {
          ASSERT_NEAR(out[k], exact[k], bound[k])
              << threads << " threads, row " << k / n_out << " output " << k % n_out;
        }
      }
      ASSERT_EQ(outbuf.back(), -1.0f) << "wrote past the end of out";
      if (offset > 0) {
        ASSERT_EQ(outbuf[offset - 1], -1.0f) << "wrote before out";
      }
    }
  }
}

// Sizes around the 16-wide tiles and 32-element chunks, 1..40 rows (the few-row kernel up to 16,
// the 2 x 2 tiles past it, partial row tiles), misaligned.
TEST(MatmulBf16AmxTest, KernelsAreBitwiseTheScalarModel) {
  std::mt19937 rng(7);
  const std::vector<int> n_outs = {1, 2, 15, 16, 17, 31, 32, 33, 49, 97};
  for (WeightLayout layout : {WeightLayout::kInOut, WeightLayout::kOutIn})
    for (int n_in = 0; n_in <= 99; n_in += (n_in < 40 ? 1 : 7))
      for (int n_out : n_outs) {
        const int n_rows = 1 + (n_in * 7 + n_out) % 40;
        check_kernels(n_in, n_out, n_rows, layout, (n_in + n_out) % 4, rng);
        if (HasFatalFailure()) return;
      }
}

// Every block: the tiled kernel's 1,024-element reduction blocks and 128-row x blocks, the
// few-row kernel's 2,048-element x blocks and column chunks, kOutIn's row groups.
TEST(MatmulBf16AmxTest, LargeShapesCrossEveryBlock) {
  std::mt19937 rng(17);
  check_kernels(2100, 77, 200, WeightLayout::kInOut, 1, rng);
  check_kernels(2500, 3000, 1, WeightLayout::kInOut, 0, rng);
  check_kernels(2049, 700, 16, WeightLayout::kInOut, 1, rng);
  check_kernels(67, 1000, 5, WeightLayout::kInOut, 2, rng);
  check_kernels(801, 37, 9, WeightLayout::kOutIn, 3, rng);
  check_kernels(801, 45, 200, WeightLayout::kOutIn, 0, rng);
  check_kernels(17000, 5, 20, WeightLayout::kOutIn, 1, rng);  // row groups of 3 rows
  check_kernels(70000, 3, 2, WeightLayout::kOutIn, 2, rng);   // x past the stack buffer
}

// Zeros of either sign, and all-zero chunks: the padding's +0 products leave every sum's bits.
TEST(MatmulBf16AmxTest, SignedZerosFollowTheModel) {
  SKIP_WITHOUT_AMX();
  const int n_in = 45, n_out = 20, n_rows = 3;
  for (WeightLayout layout : {WeightLayout::kInOut, WeightLayout::kOutIn}) {
    std::vector<uint16_t> w(static_cast<size_t>(n_in) * n_out);
    for (size_t k = 0; k < w.size(); ++k) w[k] = k % 3 == 0 ? 0x8000 : (k % 3 == 1 ? 0 : 0x3f80);
    std::vector<float> x(static_cast<size_t>(n_rows) * n_in);
    for (size_t k = 0; k < x.size(); ++k) x[k] = k % 2 ? -0.0f : (k % 5 == 0 ? -1.5f : 0.0f);
    const WeightMatrix m{w.data(), DType::kBF16, layout, n_in, n_out};
    std::vector<float> model(n_rows * n_out), out(n_rows * n_out);
    matmul_bf16amx_reference(model.data(), x.data(), m, nullptr, n_rows);
    matmul_bf16amx_forward(out.data(), x.data(), m, nullptr, n_rows, Parallel{2});
    EXPECT_EQ(std::memcmp(out.data(), model.data(), out.size() * 4), 0) << layout_name(layout);
  }
}

// A row's outputs have the same bits alone, among 1..40 other rows (every kernel, any tile
// position), at any thread count and with the weights packed at load or not: what cached ==
// uncached and batch invariance rest on.
TEST(MatmulBf16AmxTest, RowBitsDoNotDependOnTheOtherRowsOrThreads) {
  SKIP_WITHOUT_AMX();
  std::mt19937 rng(31);
  const int n_in = 300, n_out = 70, max_rows = 41;
  for (WeightLayout layout : {WeightLayout::kInOut, WeightLayout::kOutIn}) {
    SCOPED_TRACE(layout_name(layout));
    const Bf16Matrix m = make_matrix(n_in, n_out, layout, 0, rng);
    const std::vector<float> x = test::random_normals(static_cast<size_t>(max_rows) * n_in, rng);
    std::vector<float> alone(static_cast<size_t>(max_rows) * n_out);
    for (int r = 0; r < max_rows; ++r)
      matmul_bf16amx_forward(alone.data() + r * n_out, x.data() + r * n_in, m.view, nullptr, 1,
                             Parallel{1});
    std::vector<uint16_t> tiles(bf16amx_tiles_size(m.view));
    pack_bf16amx_tiles(tiles.data(), m.view, 1);
    WeightMatrix packed = m.view;
    if (layout == WeightLayout::kInOut) packed.amx_tiles = tiles.data();
    for (int rows : {1, 2, 7, 16, 17, 33, 41})
      for (int threads : {1, 2, 4}) {
        std::vector<float> together(static_cast<size_t>(rows) * n_out);
        matmul_bf16amx_forward(together.data(), x.data(), packed, nullptr, rows, Parallel{threads});
        ASSERT_EQ(std::memcmp(together.data(), alone.data(), together.size() * 4), 0)
            << rows << " rows, " << threads << " threads, weights packed at load";
        matmul_bf16amx_forward(together.data(), x.data(), m.view, nullptr, rows, Parallel{threads});
        ASSERT_EQ(std::memcmp(together.data(), alone.data(), together.size() * 4), 0)
            << rows << " rows, " << threads << " threads";
      }
  }
}

// Through matmul_forward: BF16 goes to AMX exactly when bf16_amx_active(), and switched off it
// goes to vdpbf16ps again.
TEST(MatmulBf16AmxTest, MatmulForwardUsesItWhenActive) {
  std::mt19937 rng(23);
  const int n_in = 96, n_out = 80, n_rows = 13;
  for_each_target([&](const SimdTarget& target) {
    EXPECT_EQ(bf16_amx_active(), target.bf16_dot && cpu_has_amx_bf16());
    for (WeightLayout layout : {WeightLayout::kInOut, WeightLayout::kOutIn}) {
      SCOPED_TRACE(layout_name(layout));
      const Bf16Matrix m = make_matrix(n_in, n_out, layout, 0, rng, /*narrow=*/true);
      const std::vector<float> x = random_values(static_cast<size_t>(n_rows) * n_in, rng, true);
      std::vector<float> got(static_cast<size_t>(n_rows) * n_out), model(got.size());
      matmul_forward(got.data(), x.data(), m.view, nullptr, n_rows, Parallel{2});
      matmul_bf16amx_reference(model.data(), x.data(), m.view, nullptr, n_rows);
      if (!bf16_amx_active()) {
        // vdpbf16ps where the target has it (its stated order; AMX's may give the same bits on
        // so small a product, so "differs from AMX" would prove nothing)
        if (target.bf16_dot) {
          matmul_bf16dot_reference(model.data(), x.data(), m.view, nullptr, n_rows);
          EXPECT_EQ(std::memcmp(got.data(), model.data(), got.size() * 4), 0);
        }
        continue;
      }
      EXPECT_EQ(std::memcmp(got.data(), model.data(), got.size() * 4), 0);
      set_bf16_amx_enabled(false);
      EXPECT_FALSE(bf16_amx_active());
      std::vector<float> dot(got.size()), dot_model(got.size());
      matmul_forward(dot.data(), x.data(), m.view, nullptr, n_rows, Parallel{2});
      set_bf16_amx_enabled(true);
      matmul_bf16dot_reference(dot_model.data(), x.data(), m.view, nullptr, n_rows);
      EXPECT_EQ(std::memcmp(dot.data(), dot_model.data(), dot.size() * 4), 0);
    }
  });
}

}  // namespace
}  // namespace kvlm
