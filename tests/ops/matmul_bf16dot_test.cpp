// The AVX-512 BF16 matmul (ops/matmul_bf16dot.h): its scalar model against the instruction
// itself, lane by lane; the kernels against the model, bit for bit, over sizes around every
// vector, pair and block boundary, misaligned, with every variant and thread count; agreement
// with the double-precision product within the bound x's rounding to bf16 allows; and
// matmul_forward sending BF16 there exactly when bf16_dot_active() says so. On a CPU without
// AVX512_BF16 the kernel tests skip (the scalar model's own tests still run).
#include "ops/matmul_bf16dot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ops/dispatch.h"
#include "ops/dtype.h"
#include "ops/for_each_target.h"
#include "ops/matmul.h"
#include "ops/matmul_bf16amx.h"
#include "support/bf16_matrix.h"
#include "support/random_values.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define KVLM_TEST_HAS_BF16_INTRINSICS 1
#endif

namespace kvlm {
namespace {

using test::Bf16Matrix;
using test::layout_name;

#define SKIP_WITHOUT_AVX512_BF16()                            \
  if (!cpu_has_avx512_bf16())                                 \
  GTEST_SKIP() << "this CPU has no AVX512_BF16 (vdpbf16ps): " \
                  "the kernels are not used here"

uint16_t bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// A float with a random sign, significand and binary exponent in [lo, hi).
float random_float(std::mt19937& rng, int lo, int hi) {
  std::uniform_real_distribution<float> unit(0.5f, 1.0f);
  const float f = std::ldexp(unit(rng), lo + static_cast<int>(rng() % (hi - lo)));
  return rng() & 1 ? -f : f;
}

TEST(MatmulBf16DotTest, RoundingFollowsTheStatedRules) {
  EXPECT_EQ(bf16_dot_round(1.0f), 0x3f80);
  EXPECT_EQ(bf16_dot_round(from_bits(0x3f808000u)), 0x3f80);  // tie to even (down)
  EXPECT_EQ(bf16_dot_round(from_bits(0x3f818000u)), 0x3f82);  // tie to even (up)
  EXPECT_EQ(bf16_dot_round(from_bits(0x3f808001u)), 0x3f81);
  EXPECT_EQ(bf16_dot_round(from_bits(0x00400000u)), 0x0000);  // denormal: +0
  EXPECT_EQ(bf16_dot_round(from_bits(0x80400000u)), 0x8000);  // denormal: -0
  EXPECT_EQ(bf16_dot_round(INFINITY), 0x7f80);
  EXPECT_EQ(bf16_dot_round(from_bits(0x7f7fffffu)), 0x7f80);  // largest float rounds to inf
  EXPECT_TRUE(std::isnan(bf16_to_f32(bf16_dot_round(NAN))));
  // Odd pair first, then even: with acc = 1, x1 * w1 = 2^-24 vanishes against 1 (tie to even)
  // but 2^-24 + (-1) would not round back the same way.
  const float one = 1.0f;
  EXPECT_EQ(bf16_dot2(0.0f, bf16_bits(3.0f), bf16_bits(2.0f), bf16_bits(5.0f), bf16_bits(7.0f)),
            29.0f);
  const float got = bf16_dot2(one, bf16_bits(-1.0f), bf16_bits(std::ldexp(1.0f, -12)),
                              bf16_bits(1.0f), bf16_bits(std::ldexp(1.0f, -12)));
  EXPECT_EQ(got, 0.0f) << "acc + x1*w1 rounds to 1 first, then - 1";
}

#ifdef KVLM_TEST_HAS_BF16_INTRINSICS
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void instruction_dot(float* out,
                                                                            const float* acc,
                                                                            const uint16_t* a,
                                                                            const uint16_t* b) {
  const __m512 r =
      _mm512_dpbf16_ps(_mm512_loadu_ps(acc), reinterpret_cast<__m512bh>(_mm512_loadu_si512(a)),
                       reinterpret_cast<__m512bh>(_mm512_loadu_si512(b)));
  _mm512_storeu_ps(out, r);
}

__attribute__((target("avx512f,avx512bw,avx512bf16"))) void instruction_round(uint16_t* out,
                                                                              const float* x) {
  const __m256bh r = _mm512_cvtneps_pbh(_mm512_loadu_ps(x));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), reinterpret_cast<__m256i>(r));
}
#endif

// The scalar model against the instruction, lane by lane, in three exponent ranges: ordinary
// values, values whose products and sums fall into the denormals, and values that overflow.
TEST(MatmulBf16DotTest, ScalarModelIsBitwiseTheInstruction) {
  SKIP_WITHOUT_AVX512_BF16();
#ifdef KVLM_TEST_HAS_BF16_INTRINSICS
  std::mt19937 rng(5);
  const int ranges[3][2] = {{-12, 12}, {-80, -40}, {-150, 130}};
  for (const auto& range : ranges) {
    SCOPED_TRACE("exponents " + std::to_string(range[0]) + ".." + std::to_string(range[1]));
    for (int it = 0; it < 4000; ++it) {
      float acc[16], x[32], got[16];
      uint16_t a[32], b[32], rounded[16];
      for (int i = 0; i < 32; ++i) {
        x[i] = random_float(rng, range[0], range[1]);
        a[i] = bf16_dot_round(x[i]);
        b[i] = bf16_bits(random_float(rng, range[0], range[1]));
      }
      for (int l = 0; l < 16; ++l) {
        acc[l] = random_float(rng, range[0], range[1]);
        // Every fourth lane: acc cancels the odd product, so the even one meets a tiny sum.
        if (it % 4 == 1) acc[l] = -bf16_to_f32(a[2 * l + 1]) * bf16_to_f32(b[2 * l + 1]);
      }
      instruction_dot(got, acc, a, b);
      for (int l = 0; l < 16; ++l) {
        const float want = bf16_dot2(acc[l], a[2 * l], a[2 * l + 1], b[2 * l], b[2 * l + 1]);
        ASSERT_EQ(std::memcmp(&got[l], &want, 4), 0)
            << "lane " << l << ": instruction " << got[l] << ", model " << want;
      }
      instruction_round(rounded, x);
      for (int l = 0; l < 16; ++l) ASSERT_EQ(rounded[l], bf16_dot_round(x[l])) << "x = " << x[l];
    }
  }
#endif
}

Bf16Matrix make_matrix(int n_in, int n_out, WeightLayout layout, int offset, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 0.5f);
  return test::random_bf16_matrix(n_in, n_out, layout, offset, [&] { return normal(rng); });
}

// Runs every variant at 1 and 3 threads and checks each against the scalar model, bit for bit,
// and the model against the double-precision product within x's rounding bound.
void check_against_model(int n_in, int n_out, int n_rows, WeightLayout layout, int offset,
                         std::mt19937& rng) {
  SCOPED_TRACE(std::string(layout_name(layout)) + " n_in " + std::to_string(n_in) + " n_out " +
               std::to_string(n_out) + " rows " + std::to_string(n_rows));
  const Bf16Matrix m = make_matrix(n_in, n_out, layout, offset, rng);
  const std::vector<float> xbuf =
      test::random_normals(static_cast<size_t>(n_rows) * n_in + offset, rng);
  const std::vector<float> bbuf = test::random_normals(n_out + offset, rng);
  const float* x = xbuf.data() + offset;
  const float* bias = n_in % 3 == 0 ? nullptr : bbuf.data() + offset;
  const size_t n_out_total = static_cast<size_t>(n_rows) * n_out;
  std::vector<float> model(n_out_total), exact(n_out_total);
  matmul_bf16dot_reference(model.data(), x, m.view, bias, n_rows);
  matmul_reference(exact.data(), x, m.view, bias, n_rows);
  for (int r = 0; r < n_rows; ++r)
    for (int o = 0; o < n_out; ++o) {
      // |x - bf16(x)| <= 2^-8 |x| (8 significant bits), then n_in + 3 fp32 roundings of the running
      // sum.
      double magnitude = bias ? std::fabs(bias[o]) : 0.0;
      for (int i = 0; i < n_in; ++i) {
        const size_t wi = layout == WeightLayout::kInOut ? static_cast<size_t>(i) * n_out + o
                                                         : static_cast<size_t>(o) * n_in + i;
        magnitude += std::fabs(x[r * n_in + i] * bf16_to_f32(m.storage[offset + wi]));
      }
      const double bound = (std::ldexp(1.0, -8) + (n_in + 3) * std::ldexp(1.0, -24)) * magnitude;
      ASSERT_NEAR(model[r * n_out + o], exact[r * n_out + o], bound + 1e-30)
          << "row " << r << " output " << o;
    }
  if (!cpu_has_avx512_bf16()) return;
  // Also with what a loader packs for batched decode, which it reads where present: kInOut's
  // AMX tiles, kOutIn's pair strips by lane class.
  std::vector<uint16_t> tiles;
  if (layout == WeightLayout::kInOut) {
    tiles.resize(bf16amx_tiles_size(m.view));
    pack_bf16amx_tiles(tiles.data(), m.view, 2);
  } else {
    tiles.resize(bf16dot_head_strips_size(m.view));
    pack_bf16dot_head_strips(tiles.data(), m.view, 2);
  }
  for (bool packed : {false, true})
    for (MatmulPath path : {MatmulPath::kAuto, MatmulPath::kRowStream, MatmulPath::kTiled})
      for (int threads : {1, 3}) {
        WeightMatrix view = m.view;
        if (packed && layout == WeightLayout::kInOut) view.amx_tiles = tiles.data();
        if (packed && layout == WeightLayout::kOutIn) view.bf16dot_pairs = tiles.data();
        std::vector<float> outbuf(n_out_total + offset + 1, -1.0f);
        float* out = outbuf.data() + offset;
        matmul_bf16dot_forward(out, x, view, bias, n_rows, Parallel{threads}, path);
        for (size_t k = 0; k < n_out_total; ++k)
          ASSERT_EQ(std::memcmp(&out[k], &model[k], 4), 0)
              << (packed ? "packed at load, " : "") << "path " << static_cast<int>(path) << ", "
              << threads << " threads, row " << k / n_out << " output " << k % n_out << ": "
              << out[k] << " vs model " << model[k];
        ASSERT_EQ(outbuf.back(), -1.0f) << "wrote past the end of out";
        if (offset > 0) {
          ASSERT_EQ(outbuf[offset - 1], -1.0f) << "wrote before out";
        }
      }
}

// Sizes 0..2N+1 around the 16-lane vectors and 32-element pairs of chunks, misaligned.
TEST(MatmulBf16DotTest, KernelsAreBitwiseTheScalarModel) {
  std::mt19937 rng(7);
  const std::vector<int> n_outs = {1, 2, 7, 15, 16, 17, 31, 33, 47, 48, 49, 97};
  for (WeightLayout layout : {WeightLayout::kInOut, WeightLayout::kOutIn})
    for (int n_in = 0; n_in <= 67; ++n_in)
      for (int n_out : n_outs) {
        const int n_rows = 1 + (n_in + n_out) % 10;  // 1..10: both variants, partial tiles
        check_against_model(n_in, n_out, n_rows, layout, (n_in + n_out) % 4, rng);
        if (HasFatalFailure()) return;
      }
}

// Large enough to cross every block: the tiled kernel's 384-pair reduction blocks and 192-row
// blocks, the row stream's 1,024-pair blocks and 2,048-column chunks, several strips per
// thread, the one-row kOutIn path's 16,384-input buffer, the kOutIn row blocks.
TEST(MatmulBf16DotTest, LargeShapesCrossEveryBlock) {
  std::mt19937 rng(17);
  check_against_model(1100, 77, 200, WeightLayout::kInOut, 1, rng);
  check_against_model(2500, 100, 3, WeightLayout::kInOut, 2, rng);
  check_against_model(801, 37, 9, WeightLayout::kOutIn, 3, rng);
  check_against_model(801, 13, 200, WeightLayout::kOutIn, 0, rng);   // 156-row blocks of x
  check_against_model(33000, 3, 2, WeightLayout::kOutIn, 1, rng);    // rows too long to block
  check_against_model(801, 37, 1, WeightLayout::kOutIn, 1, rng);     // one row: x converted once
  check_against_model(16400, 5, 1, WeightLayout::kOutIn, 2, rng);    // past that buffer's 16,384
  check_against_model(2500, 3000, 1, WeightLayout::kInOut, 0, rng);  // row stream: 2 chunks
  // The row stream's register tiles (3-8 rows): several column chunks per thread, a partial
  // last tile, two pair blocks of which the second is one pair missing its odd row.
  check_against_model(2049, 700, 8, WeightLayout::kInOut, 1, rng);
  check_against_model(1101, 530, 5, WeightLayout::kInOut, 3, rng);
  check_against_model(67, 1000, 3, WeightLayout::kInOut, 2, rng);
}

// Decode of every row count reads [n_in, n_out]'s tiles packed at load, not the matrix as stored:
// zeroed tiles leave only the bias (one and two rows too: the stored matrix split by columns
// gives each thread pieces of rows apart, which the prefetchers stream at half the rate).
TEST(MatmulBf16DotTest, DecodeOfEveryRowCountReadsTheTilesPackedAtLoad) {
  SKIP_WITHOUT_AVX512_BF16();
  std::mt19937 rng(31);
  const int n_in = 40, n_out = 60;
  const Bf16Matrix m = make_matrix(n_in, n_out, WeightLayout::kInOut, 0, rng);
  std::vector<uint16_t> zeros(bf16amx_tiles_size(m.view), 0);
  WeightMatrix packed = m.view;
  packed.amx_tiles = zeros.data();
  const std::vector<float> x = test::random_normals(8 * n_in, rng);
  const std::vector<float> bias = test::random_normals(n_out, rng);
  for (int n_rows = 1; n_rows <= 8; ++n_rows) {
    std::vector<float> out(static_cast<size_t>(n_rows) * n_out);
    matmul_bf16dot_forward(out.data(), x.data(), packed, bias.data(), n_rows, Parallel{2},
                           MatmulPath::kAuto);
    size_t bias_only = 0;
    for (size_t k = 0; k < out.size(); ++k) bias_only += out[k] == bias[k % n_out];
    EXPECT_EQ(bias_only, out.size()) << n_rows << " rows: not every output read the tiles";
  }
}

// Through matmul_forward: BF16 goes to these kernels exactly when bf16_dot_active(), and then
// a row's bits do not depend on the rows beside it (what cached == uncached rests on).
TEST(MatmulBf16DotTest, MatmulForwardUsesItOnAvx512TargetsOnly) {
  // With AMX off: where the CPU has it, matmul_forward would send BF16 there instead.
  struct AmxOff {
    AmxOff() { set_bf16_amx_enabled(false); }
    ~AmxOff() { set_bf16_amx_enabled(true); }
  } amx_off;
  std::mt19937 rng(23);
  const int n_in = 96, n_out = 80, n_rows = 13;
  for_each_target([&](const SimdTarget& target) {
    EXPECT_EQ(target.bf16_dot, bf16_dot_active());
    EXPECT_EQ(target.bf16_dot, cpu_has_avx512_bf16() && simd_target_is_avx512(target.id));
    for (WeightLayout layout : {WeightLayout::kInOut, WeightLayout::kOutIn}) {
      SCOPED_TRACE(layout_name(layout));
      const Bf16Matrix m = make_matrix(n_in, n_out, layout, 0, rng);
      const std::vector<float> x = test::random_normals(static_cast<size_t>(n_rows) * n_in, rng);
      std::vector<float> together(static_cast<size_t>(n_rows) * n_out), model(together.size());
      matmul_forward(together.data(), x.data(), m.view, nullptr, n_rows, Parallel{2});
      matmul_bf16dot_reference(model.data(), x.data(), m.view, nullptr, n_rows);
      const bool same_as_model =
          std::memcmp(together.data(), model.data(), together.size() * 4) == 0;
      EXPECT_EQ(same_as_model, target.bf16_dot);
      // Switched off, BF16 takes the widening kernels again.
      set_bf16_dot_enabled(false);
      EXPECT_FALSE(bf16_dot_active());
      std::vector<float> widening(together.size());
      matmul_forward(widening.data(), x.data(), m.view, nullptr, n_rows, Parallel{2});
      set_bf16_dot_enabled(true);
      EXPECT_EQ(std::memcmp(widening.data(), together.data(), together.size() * 4) == 0,
                !target.bf16_dot);
      for (int r = 0; r < n_rows; ++r) {
        std::vector<float> alone(n_out);
        matmul_forward(alone.data(), x.data() + r * n_in, m.view, nullptr, 1, Parallel{1});
        ASSERT_EQ(std::memcmp(alone.data(), together.data() + r * n_out, n_out * 4), 0)
            << "row " << r;
      }
    }
  });
}

}  // namespace
}  // namespace kvlm
