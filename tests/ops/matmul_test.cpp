// Matmul kernels on every compiled SIMD target: the exact bits the contract of ops/matmul.h
// promises (checked against a scalar model of that order), agreement with the double-precision
// reference within a rounding bound, and the invariances the engine's exactness rests on (a row
// gives the same bits alone or among others, with either kernel variant, at any thread count).
// Sizes run over 0..2N+1 around the 16-lane structure, with misaligned pointers.
#include "ops/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ops/dtype.h"
#include "ops/for_each_target.h"
#include "ops/matmul_bf16amx.h"
#include "ops/matmul_bf16dot.h"
#include "ops/matmul_internal.h"
#include "support/random_values.h"

namespace kvlm {
namespace {

// AMX off for a test's duration: these tests hold BF16 to the vdpbf16ps order; where the CPU has
// AMX, matmul_forward would send BF16 there (its own test: matmul_bf16amx_test.cpp).
struct AmxOff {
  AmxOff() { set_bf16_amx_enabled(false); }
  ~AmxOff() { set_bf16_amx_enabled(true); }
};

// A weight matrix with its storage, `offset` elements into the buffer (misalignment).
struct TestMatrix {
  std::vector<uint8_t> bytes;
  WeightMatrix view;
  float at(int i, int o) const {  // W[i][o] as the kernels widen it
    const size_t index = view.layout == WeightLayout::kInOut
                             ? static_cast<size_t>(i) * view.n_out + o
                             : static_cast<size_t>(o) * view.n_in + i;
    return load_as_f32(view.data, view.dtype, index);
  }
};

TestMatrix make_matrix(int n_in, int n_out, WeightLayout layout, DType dtype, int offset,
                       std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 0.5f);
  TestMatrix m;
  const size_t n = static_cast<size_t>(n_in) * n_out, size = dtype_size(dtype);
  m.bytes.resize((n + offset + 1) * size);
  uint8_t* base = m.bytes.data() + offset * size;
  for (size_t k = 0; k < n; ++k) {
    const float v = normal(rng);
    if (dtype == DType::kF32) {
      std::memcpy(base + k * 4, &v, 4);
    } else {
      const uint16_t h = dtype == DType::kF16 ? f32_to_f16(v) : f32_to_bf16(v);
      std::memcpy(base + k * 2, &h, 2);
    }
  }
  m.view = WeightMatrix{base, dtype, layout, n_in, n_out};
  return m;
}

float madd(float a, float b, float c, bool fused) {
  return fused ? std::fma(a, b, c) : a * b + c;
}

// The order ops/matmul.h states, computed one element at a time.
float model_element(const float* x, const TestMatrix& m, const float* bias, int o, bool fused) {
  const int n_in = m.view.n_in;
  float out;
  if (m.view.layout == WeightLayout::kInOut) {
    float acc = 0.0f;
    for (int i = 0; i < n_in; ++i) acc = madd(x[i], m.at(i, o), acc, fused);
    out = acc;
  } else {
    float s[16] = {};
    const int n_main = n_in / 16 * 16;
    for (int i = 0; i < n_main; ++i) s[i % 16] = madd(x[i], m.at(i, o), s[i % 16], fused);
    if (n_main < n_in) {
      for (int l = 0; l < 16; ++l) {
        const int i = n_main + l;
        s[l] = i < n_in ? madd(x[i], m.at(i, o), s[l], fused) : madd(0.0f, 0.0f, s[l], fused);
      }
    }
    float t[8], u[4];
    for (int l = 0; l < 8; ++l) t[l] = s[l] + s[l + 8];
    for (int l = 0; l < 4; ++l) u[l] = t[l] + t[l + 4];
    out = (u[0] + u[2]) + (u[1] + u[3]);
  }
  return bias ? out + bias[o] : out;
}

// |error| of an fp32 sum of n products against the exact value: n + 2 roundings of at most
// 2^-24 relative each, of the sum of magnitudes (the standard bound, with room for the
// reference's own final rounding).
float tolerance(const float* x, const TestMatrix& m, const float* bias, int o) {
  double magnitude = bias ? std::fabs(bias[o]) : 0.0;
  for (int i = 0; i < m.view.n_in; ++i) magnitude += std::fabs(x[i] * m.at(i, o));
  return static_cast<float>((m.view.n_in + 3) * std::ldexp(1.0, -24) * magnitude + 1e-30);
}

const char* layout_name(WeightLayout l) {
  return l == WeightLayout::kInOut ? "kInOut" : "kOutIn";
}

TEST(MatmulTest, EveryTargetKeepsTheStatedOrderAndMatchesTheReference) {
  AmxOff amx_off;
  std::mt19937 rng(7);
  const std::vector<int> n_outs = {1,  2,  3,  5,  7,  8,  9,  15, 16, 17,
                                   23, 24, 25, 31, 32, 33, 47, 48, 49, 65};
  const int n_rows = 7;
  for_each_target([&](const SimdTarget& target) {
    for (WeightLayout layout : {WeightLayout::kInOut, WeightLayout::kOutIn})
      for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16})
        for (int n_in = 0; n_in <= 33; ++n_in)
          for (int n_out : n_outs) {
            SCOPED_TRACE(std::string(layout_name(layout)) + " " + dtype_name(dtype) + " n_in " +
                         std::to_string(n_in) + " n_out " + std::to_string(n_out));
            const int offset = (n_in + n_out) % 4;  // misaligns x, W, bias and out
            const TestMatrix m = make_matrix(n_in, n_out, layout, dtype, offset, rng);
            const std::vector<float> xbuf = test::random_normals(n_rows * n_in + offset, rng);
            const std::vector<float> bbuf = test::random_normals(n_out + offset, rng);
            const float* x = xbuf.data() + offset;
            const float* bias = (n_in % 3 == 0) ? nullptr : bbuf.data() + offset;
            std::vector<float> outbuf(n_rows * n_out + offset + 1, -1.0f);
            float* out = outbuf.data() + offset;
            for (MatmulPath path : {MatmulPath::kRowStream, MatmulPath::kTiled}) {
              // One thread: threads are the next test's subject, and each parallel region costs
              // more than these small products.
              matmul_forward_path(out, x, m.view, bias, n_rows, Parallel{1}, path);
              std::vector<float> ref(n_rows * n_out);
              matmul_reference(ref.data(), x, m.view, bias, n_rows);
              // BF16 on an AVX-512 BF16 machine: the vdpbf16ps order (its own test checks
              // the tolerance, which x's rounding to bf16 widens).
              const bool dot = target.bf16_dot && dtype == DType::kBF16;
              std::vector<float> dot_model(n_rows * n_out);
              if (dot) matmul_bf16dot_reference(dot_model.data(), x, m.view, bias, n_rows);
              for (int r = 0; r < n_rows; ++r)
                for (int o = 0; o < n_out; ++o) {
                  const float got = out[r * n_out + o];
                  const float* xr = x + r * n_in;
                  const float want = dot ? dot_model[r * n_out + o]
                                         : model_element(xr, m, bias, o, target.fused_multiply_add);
                  ASSERT_EQ(std::memcmp(&got, &want, 4), 0)
                      << "row " << r << " output " << o << ": " << got << " vs order model "
                      << want;
                  if (!dot) {
                    ASSERT_NEAR(got, ref[r * n_out + o], tolerance(xr, m, bias, o))
                        << "row " << r << " output " << o;
                  }
                }
              ASSERT_EQ(outbuf.back(), -1.0f) << "wrote past the end of out";
              if (offset > 0) {
                ASSERT_EQ(outbuf[offset - 1], -1.0f) << "wrote before out";
              }
            }
          }
  });
}

// The decode kernels at every row count they have a tile for (1..8, then 8 + 1). kInOut's row
// stream: with 3 or more rows of 16-bit weights x is packed as broadcast vectors in blocks of
// 32 values, so reductions of 31..65 steps cross those blocks. kOutIn's dot tiles: whole tiles
// of rows, then the rows left over in narrower ones (3 + 3 + 2 for 8 rows on AVX2). Every output
// keeps the stated order, bit for bit, on every target, with x, W, bias and out misaligned.
TEST(MatmulTest, DecodeKernelsAtEveryRowCountKeepTheOrder) {
  std::mt19937 rng(23);
  for_each_target([&](const SimdTarget& target) {
    for (WeightLayout layout : {WeightLayout::kInOut, WeightLayout::kOutIn})
      for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
        if (target.bf16_dot && dtype == DType::kBF16) continue;  // its own kernels and test
        // 300: reductions past the packed x block (256) and the register tiles (32 rows), and
        // columns past one chunk of accumulators (240 at 8 rows on AVX-512).
        for (int n_in : {1, 5, 31, 32, 33, 64, 65, 300})
          for (int n_out : {1, 17, 40, 65, 300})
            for (int n_rows = 1; n_rows <= 9; ++n_rows) {
              SCOPED_TRACE(std::string(layout_name(layout)) + " " + dtype_name(dtype) + " n_in " +
                           std::to_string(n_in) + " n_out " + std::to_string(n_out) + " rows " +
                           std::to_string(n_rows));
              const int offset = (n_in + n_out + n_rows) % 4;
              const TestMatrix m = make_matrix(n_in, n_out, layout, dtype, offset, rng);
              const std::vector<float> xbuf = test::random_normals(n_rows * n_in + offset, rng);
              const std::vector<float> bbuf = test::random_normals(n_out + offset, rng);
              const float* x = xbuf.data() + offset;
              const float* bias = bbuf.data() + offset;
              std::vector<float> outbuf(n_rows * n_out + offset + 1, -1.0f);
              float* out = outbuf.data() + offset;
              matmul_forward_path(out, x, m.view, bias, n_rows, Parallel{1},
                                  MatmulPath::kRowStream);
              for (int r = 0; r < n_rows; ++r)
                for (int o = 0; o < n_out; ++o) {
                  const float got = out[r * n_out + o];
                  const float want =
                      model_element(x + r * n_in, m, bias, o, target.fused_multiply_add);
                  ASSERT_EQ(std::memcmp(&got, &want, 4), 0) << "row " << r << " output " << o;
                }
              ASSERT_EQ(outbuf.back(), -1.0f) << "wrote past the end of out";
            }
      }
  });
}

// A row's outputs are the same bits whether it is computed alone, among T rows, by either
// kInOut variant, or at any thread count: what cached == uncached and batch invariance need.
TEST(MatmulTest, RowsAreBitwiseIndependentOfBatchVariantAndThreads) {
  std::mt19937 rng(11);
  struct Shape {
    int n_in, n_out;
  };
  const std::vector<Shape> shapes = {{64, 200}, {77, 130}, {200, 37}, {128, 257}};
  const std::vector<int> row_counts = {2, 5, 7, 8, 9, 13, 33};
  for_each_target([&](const SimdTarget&) {
    for (WeightLayout layout : {WeightLayout::kInOut, WeightLayout::kOutIn})
      for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16})
        for (const Shape& s : shapes) {
          SCOPED_TRACE(std::string(layout_name(layout)) + " " + dtype_name(dtype) + " " +
                       std::to_string(s.n_in) + "x" + std::to_string(s.n_out));
          const TestMatrix m = make_matrix(s.n_in, s.n_out, layout, dtype, 1, rng);
          const int max_rows = row_counts.back();
          const std::vector<float> x =
              test::random_normals(static_cast<size_t>(max_rows) * s.n_in, rng);
          const std::vector<float> bias = test::random_normals(s.n_out, rng);
          // Each row alone, one thread: the baseline.
          std::vector<float> alone(static_cast<size_t>(max_rows) * s.n_out);
          for (int r = 0; r < max_rows; ++r)
            matmul_forward(alone.data() + r * s.n_out, x.data() + r * s.n_in, m.view, bias.data(),
                           1, Parallel{1});
          for (int T : row_counts)
            for (int threads : {1, 3})
              for (MatmulPath path :
                   {MatmulPath::kAuto, MatmulPath::kRowStream, MatmulPath::kTiled}) {
                std::vector<float> together(static_cast<size_t>(T) * s.n_out);
                matmul_forward_path(together.data(), x.data(), m.view, bias.data(), T,
                                    Parallel{threads}, path);
                ASSERT_EQ(std::memcmp(together.data(), alone.data(), together.size() * 4), 0)
                    << T << " rows, " << threads << " threads, path " << static_cast<int>(path);
              }
        }
  });
}

// Shapes large enough to cross every block boundary of the tiled kernel (reduction blocks of
// 384 steps, row blocks of 144, column strips), the row stream's chunks, the kOutIn dot tiles'
// blocks of output tiles (256 KB of weights: 20 tiles of 4 F32 outputs at n_in 800, so 333
// outputs are 5 blocks, the last one short and ending in a partial tile), and the kOutIn
// lane-class tiles' row blocks (144 rows) and strips (333 outputs end in a partial one): still
// the stated order, bit for bit, on every target.
TEST(MatmulTest, LargeShapesCrossEveryBlockAndKeepTheOrder) {
  AmxOff amx_off;
  std::mt19937 rng(17);
  const int n_in = 800, n_rows = 150;
  struct Case {
    WeightLayout layout;
    DType dtype;
    int n_out;
  };
  const std::vector<Case> cases = {{WeightLayout::kInOut, DType::kF32, 77},
                                   {WeightLayout::kInOut, DType::kBF16, 77},
                                   {WeightLayout::kOutIn, DType::kF32, 333},
                                   {WeightLayout::kOutIn, DType::kF16, 333}};
  for_each_target([&](const SimdTarget& target) {
    for (const Case& c : cases) {
      const DType dtype = c.dtype;
      const int n_out = c.n_out;
      SCOPED_TRACE(std::string(layout_name(c.layout)) + " " + dtype_name(dtype));
      const TestMatrix m = make_matrix(n_in, n_out, c.layout, dtype, 0, rng);
      const std::vector<float> x = test::random_normals(static_cast<size_t>(n_rows) * n_in, rng);
      const std::vector<float> bias = test::random_normals(n_out, rng);
      for (MatmulPath path : {MatmulPath::kRowStream, MatmulPath::kTiled}) {
        std::vector<float> out(static_cast<size_t>(n_rows) * n_out);
        matmul_forward_path(out.data(), x.data(), m.view, bias.data(), n_rows, Parallel{2}, path);
        const bool dot = target.bf16_dot && dtype == DType::kBF16;  // the vdpbf16ps order
        std::vector<float> dot_model(dot ? out.size() : 0);
        if (dot) matmul_bf16dot_reference(dot_model.data(), x.data(), m.view, bias.data(), n_rows);
        for (int r = 0; r < n_rows; r += 7)  // a sample of rows, every column
          for (int o = 0; o < n_out; ++o) {
            const float want = dot ? dot_model[r * n_out + o]
                                   : model_element(x.data() + r * n_in, m, bias.data(), o,
                                                   target.fused_multiply_add);
            const float got = out[r * n_out + o];
            ASSERT_EQ(std::memcmp(&got, &want, 4), 0)
                << "path " << static_cast<int>(path) << " row " << r << " output " << o;
          }
      }
    }
  });
}

TEST(MatmulTest, ZeroRowsWritesNothing) {
  std::mt19937 rng(3);
  const TestMatrix m = make_matrix(8, 8, WeightLayout::kInOut, DType::kF32, 0, rng);
  std::vector<float> out(8, 5.0f);
  matmul_forward(out.data(), nullptr, m.view, nullptr, 0, Parallel{2});
  for (float v : out) EXPECT_EQ(v, 5.0f);
}

}  // namespace
}  // namespace kvlm
