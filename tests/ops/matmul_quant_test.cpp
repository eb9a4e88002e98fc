// matmul_forward on the block-quantized types on every compiled SIMD target: each runs on 8-bit
// activations and gives its scalar reference's bits (matmul_q8act.h; how far that moves from
// the exact product is MatmulQ8ActTest's derived bound), also with special fp16 block scales,
// and keeps a row's bits whatever the batch and thread count. Sizes cover one to several blocks
// and chunks, with misaligned weights, inputs, biases and outputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ops/dtype.h"
#include "ops/for_each_target.h"
#include "ops/matmul.h"
#include "ops/matmul_internal.h"
#include "ops/matmul_q8act.h"
#include "ops/quant.h"
#include "support/quant_matrix.h"
#include "support/random_values.h"

namespace kvlm {
namespace {

using test::QuantMatrix;

QuantMatrix make_matrix(DType type, int n_in, int n_out, int offset, std::mt19937& rng) {
  return test::random_quant_matrix(type, n_in, n_out, offset, rng);
}

std::vector<int> sizes_for(DType type) {
  if (type == DType::kQ8_0 || type == DType::kQ4_0) return {32, 64, 96, 256, 288, 544};
  return {256, 512, 768};
}

TEST(MatmulQuantTest, EveryTargetEqualsF32OnDequantizedWeightsAndTheReference) {
  std::mt19937 rng(11);
  for_each_target([&](const SimdTarget&) {
    for (DType type : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ6_K})
      for (int n_in : sizes_for(type))
        for (int n_out : {1, 2, 3, 5, 8, 9, 17}) {
          for (int n_rows : {1, 4, 7}) {
            SCOPED_TRACE(std::string(dtype_name(type)) + " n_in " + std::to_string(n_in) +
                         " n_out " + std::to_string(n_out) + " rows " + std::to_string(n_rows));
            const int offset = (n_out + n_rows) % 4;
            const QuantMatrix m = make_matrix(type, n_in, n_out, offset, rng);
            const std::vector<float> xbuf = test::random_normals(n_rows * n_in + offset, rng);
            const std::vector<float> bbuf = test::random_normals(n_out + offset, rng);
            const float* x = xbuf.data() + offset;
            const float* bias = n_out % 2 ? bbuf.data() + offset : nullptr;
            std::vector<float> outbuf(n_rows * n_out + offset + 1, -1.0f), want(n_rows * n_out),
                ref(n_rows * n_out);
            float* out = outbuf.data() + offset;
            matmul_forward(out, x, m.view, bias, n_rows, Parallel{1});
            // Types on 8-bit activations (matmul_q8act.h): their scalar reference's bits; how
            // far that moves from the exact product is MatmulQ8ActTest's derived bound.
            const bool q8act = q8act_kernel_handles(type);
            if (q8act)
              matmul_q8act_reference(want.data(), x, m.view, bias, n_rows);
            else
              matmul_forward(want.data(), x, m.f32, bias, n_rows, Parallel{1});
            matmul_reference(ref.data(), x, m.f32, bias, n_rows);
            for (int k = 0; k < n_rows * n_out; ++k) {
              ASSERT_EQ(std::memcmp(&out[k], &want[k], 4), 0)
                  << "element " << k << ": " << out[k] << " vs reference kernel " << want[k];
              if (!q8act) {
                ASSERT_NEAR(out[k], ref[k], 1e-4f * (1.0f + std::fabs(ref[k]))) << "element " << k;
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

// The Q8_0 kernels convert the fp16 block scales of two blocks at once in vectors (vcvtph2ps):
// special scales (infinities, subnormals, negative zero, the largest half) must give the bits of
// the scalar reference's conversion, over row tiles and single outputs. NaN scales are left out,
// and an infinite scale times a zero partial sum gives NaN: which NaN payload an add passes on
// depends on the operand order the compiler picks (it treats adds as commutative), so there
// only "NaN" is stable.
// The fp16 block scales through every class (infinities, subnormals, negative zero, the largest
// half; Q4_K's dmin too), in every type, at decode and prefill row counts: every target gives
// the scalar reference's bits (NaN where it gives NaN: which payload an add passes on is not
// fixed).
TEST(MatmulQuantTest, SpecialBlockScalesGiveTheReferenceBits) {
  const uint16_t kScales[] = {0x7c00, 0xfc00, 0x0001, 0x83ff, 0x8000, 0x3c00, 0x0400, 0x7bff};
  std::mt19937 rng(23);
  for_each_target([&](const SimdTarget&) {
    for (DType type : {DType::kQ8_0, DType::kQ4_0, DType::kQ5_0, DType::kQ4_K, DType::kQ6_K}) {
      const int n_in = dtype_block_elements(type) == 32 ? 96 : 512;
      for (int n_out : {3, 8, 11, 16}) {
        // K-quant scales of either sign: a kernel must not assume ggml's positive ones.
        QuantMatrix m = test::random_quant_matrix(type, n_in, n_out, 0, rng,
                                                  test::ScaleSigns::kEither);
        const size_t block_bytes = dtype_block_bytes(type), row_bytes = dtype_bytes(type, n_in);
        const size_t scale_at = type == DType::kQ6_K ? 208 : 0;
        size_t k = 0;
        for (int o = 0; o < n_out; ++o)
          for (size_t b = 0; b < row_bytes / block_bytes; ++b, ++k) {
            uint8_t* block = m.bytes.data() + o * row_bytes + b * block_bytes;
            std::memcpy(block + scale_at, &kScales[(k * 7 + o) % std::size(kScales)], 2);
            if (type == DType::kQ4_K)  // dmin too
              std::memcpy(block + 2, &kScales[(k * 3 + 1) % std::size(kScales)], 2);
          }
        for (int n_rows : {1, 5, 12}) {
          const std::vector<float> x = test::random_normals(n_rows * n_in, rng);
          std::vector<float> out(n_rows * n_out), want(n_rows * n_out);
          matmul_forward(out.data(), x.data(), m.view, nullptr, n_rows, Parallel{1});
          matmul_q8act_reference(want.data(), x.data(), m.view, nullptr, n_rows);
          for (size_t i = 0; i < out.size(); ++i) {
            if (std::isnan(want[i])) {
              EXPECT_TRUE(std::isnan(out[i]))
                  << dtype_name(type) << " n_out " << n_out << " rows " << n_rows << " " << i;
            } else {
              EXPECT_EQ(0, std::memcmp(&out[i], &want[i], 4))
                  << dtype_name(type) << " n_out " << n_out << " rows " << n_rows << " element "
                  << i << ": " << out[i] << " vs " << want[i];
            }
          }
        }
      }
    }
  });
}

TEST(MatmulQuantTest, RowsAreBitwiseIndependentOfBatchAndThreads) {
  std::mt19937 rng(5);
  for (DType type : {DType::kQ8_0, DType::kQ4_K}) {
    const int n_in = 512, n_out = 67, n_rows = 11;
    const QuantMatrix m = make_matrix(type, n_in, n_out, 1, rng);
    const std::vector<float> x = test::random_normals(n_rows * n_in, rng);
    std::vector<float> all(n_rows * n_out), threaded(n_rows * n_out), one(n_out);
    matmul_forward(all.data(), x.data(), m.view, nullptr, n_rows, Parallel{1});
    matmul_forward(threaded.data(), x.data(), m.view, nullptr, n_rows, Parallel{3});
    EXPECT_EQ(0, std::memcmp(all.data(), threaded.data(), all.size() * 4)) << dtype_name(type);
    for (int r = 0; r < n_rows; ++r) {
      matmul_forward(one.data(), x.data() + r * n_in, m.view, nullptr, 1, Parallel{2});
      EXPECT_EQ(0, std::memcmp(one.data(), all.data() + r * n_out, n_out * 4))
          << dtype_name(type) << " row " << r;
    }
  }
}

}  // namespace
}  // namespace kvlm
