// The Q4_0 / Q5_0 / Q4_K / Q6_K kernels of matmul_kquant_simd.cpp (and its Q8_0 prefill kernel) on
// every compiled SIMD target: the fused (decode) and panel (prefill) kernels, and the automatic
// choice between them, each give exactly the bits of the F32 kOutIn kernel on the dequantized
// matrix (its scalar reference being ops/quant.h's dequantize_row), over sizes of one to many
// blocks, row counts on both sides of the switch, partial output tiles and misaligned weights,
// inputs, biases and outputs.
#include "ops/matmul_kquant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ops/dtype.h"
#include "ops/for_each_target.h"
#include "ops/matmul.h"
#include "ops/matmul_q8act.h"
#include "ops/quant.h"
#include "support/quant_matrix.h"
#include "support/random_values.h"

namespace kvlm {
namespace {

using test::QuantMatrix;

// K-quant scales of either sign: a kernel must not assume ggml's positive ones.
QuantMatrix make_quantized(DType type, int n_in, int n_out, int offset, std::mt19937& rng) {
  return test::random_quant_matrix(type, n_in, n_out, offset, rng, test::ScaleSigns::kEither);
}

// Runs `path` on m and compares every output with the F32 kernel on m's dequantized values;
// checks nothing is written outside out.
void expect_f32_bits(const QuantMatrix& m, int n_rows, int offset, KQuantPath path, int threads,
                     std::mt19937& rng) {
  const int n_in = m.view.n_in, n_out = m.view.n_out;
  const std::vector<float> xbuf = test::random_normals(n_rows * n_in + offset, rng);
  const std::vector<float> bbuf = test::random_normals(n_out + offset, rng);
  const float* x = xbuf.data() + offset;
  const float* bias = (n_out + n_rows) % 2 ? bbuf.data() + offset : nullptr;
  std::vector<float> outbuf(n_rows * n_out + 2 * offset + 1, -1.0f), want(n_rows * n_out);
  float* out = outbuf.data() + offset;
  matmul_kquant_forward(out, x, m.view, bias, n_rows, Parallel{threads}, path);
  matmul_forward(want.data(), x, m.f32, bias, n_rows, Parallel{1});
  for (int k = 0; k < n_rows * n_out; ++k)
    ASSERT_EQ(std::memcmp(&out[k], &want[k], 4), 0)
        << "element " << k << ": " << out[k] << " vs F32 kernel " << want[k];
  for (int k = 0; k < offset; ++k) ASSERT_EQ(outbuf[k], -1.0f) << "wrote before out";
  for (size_t k = offset + n_rows * n_out; k < outbuf.size(); ++k)
    ASSERT_EQ(outbuf[k], -1.0f) << "wrote past out";
}

std::vector<int> widths(DType type) {
  if (dtype_block_elements(type) == 32) return {32, 64, 96, 160, 544, 768};
  return {256, 512, 1280};
}

TEST(MatmulKQuantTest, EveryTargetAndPathGivesTheF32KernelsBitsOnDequantizedWeights) {
  std::mt19937 rng(41);
  for_each_target([&](const SimdTarget&) {
    for (DType type : {DType::kQ4_0, DType::kQ5_0, DType::kQ4_K, DType::kQ6_K, DType::kQ8_0})
      for (int n_in : widths(type))
        for (int n_out : {1, 3, 4, 5, 8, 9, 17})
          for (int n_rows : {1, 2, 3, 5, 8, 13, 20}) {
            const int offset = (n_in / 32 + n_out + n_rows) % 4;
            const QuantMatrix m = make_quantized(type, n_in, n_out, offset, rng);
            for (KQuantPath path : {KQuantPath::kAuto, KQuantPath::kFused, KQuantPath::kPanel}) {
              SCOPED_TRACE(std::string(dtype_name(type)) + " n_in " + std::to_string(n_in) +
                           " n_out " + std::to_string(n_out) + " rows " + std::to_string(n_rows) +
                           " path " + std::to_string(static_cast<int>(path)) + " offset " +
                           std::to_string(offset));
              expect_f32_bits(m, n_rows, offset, path, 1, rng);
              if (::testing::Test::HasFatalFailure()) return;
            }
          }
  });
}

// Wider than the panel's stack buffer (12288 values): the panel path falls back to the fused
// kernel, same bits; and threads split outputs, never a sum.
TEST(MatmulKQuantTest, WideRowsAndThreadsKeepTheBits) {
  std::mt19937 rng(43);
  for (DType type : {DType::kQ4_0, DType::kQ5_0, DType::kQ4_K, DType::kQ6_K, DType::kQ8_0}) {
    SCOPED_TRACE(dtype_name(type));
    const QuantMatrix wide = make_quantized(type, 12288 + 256, 5, 1, rng);
    expect_f32_bits(wide, 9, 1, KQuantPath::kPanel, 2, rng);
    const QuantMatrix m = make_quantized(type, 512, 37, 2, rng);
    for (int threads : {2, 3}) {
      expect_f32_bits(m, 1, 3, KQuantPath::kAuto, threads, rng);
      expect_f32_bits(m, 16, 3, KQuantPath::kAuto, threads, rng);
    }
  }
}

// The fp16 super-block scales through every class: infinities, subnormals, negative zero, the
// largest half; the decoders' fp32 factors must carry the scalar dequantization's bits, and
// matmul_forward (which runs the types on 8-bit activations through matmul_q8act.h's kernels)
// its scalar reference's.
TEST(MatmulKQuantTest, SpecialScalesGiveTheDequantizedBits) {
  const uint16_t kScales[] = {0x7c00, 0xfc00, 0x0001, 0x83ff, 0x8000, 0x3c00, 0x0400, 0x7bff};
  std::mt19937 rng(47);
  for_each_target([&](const SimdTarget&) {
    for (DType type : {DType::kQ8_0, DType::kQ4_0, DType::kQ5_0, DType::kQ4_K, DType::kQ6_K}) {
      const int n_in = dtype_block_elements(type) == 32 ? 256 : 512, n_out = 6;
      QuantMatrix m = make_quantized(type, n_in, n_out, 0, rng);
      const size_t block_bytes = dtype_block_bytes(type), row_bytes = dtype_bytes(type, n_in);
      const size_t scale_at = type == DType::kQ6_K ? 208 : 0;
      size_t k = 0;
      for (int o = 0; o < n_out; ++o)
        for (size_t b = 0; b < row_bytes / block_bytes; ++b, ++k) {
          uint8_t* block = m.bytes.data() + o * row_bytes + b * block_bytes;
          std::memcpy(block + scale_at, &kScales[(k * 5 + o) % std::size(kScales)], 2);
          if (type == DType::kQ4_K)  // dmin too
            std::memcpy(block + 2, &kScales[(k * 3 + 1) % std::size(kScales)], 2);
        }
      for (int o = 0; o < n_out; ++o)
        dequantize_row(m.values.data() + o * n_in, m.bytes.data() + o * row_bytes, type, n_in);
      for (int n_rows : {1, 12}) {
        const std::vector<float> x = test::random_normals(n_rows * n_in, rng);
        std::vector<float> out(n_rows * n_out), want(n_rows * n_out);
        matmul_forward(out.data(), x.data(), m.view, nullptr, n_rows, Parallel{1});
        // Types on 8-bit activations: their scalar reference (matmul_q8act.h).
        if (q8act_kernel_handles(type))
          matmul_q8act_reference(want.data(), x.data(), m.view, nullptr, n_rows);
        else
          matmul_forward(want.data(), x.data(), m.f32, nullptr, n_rows, Parallel{1});
        for (size_t i = 0; i < out.size(); ++i) {
          if (std::isnan(want[i])) {  // which NaN payload an add passes on is not fixed
            EXPECT_TRUE(std::isnan(out[i])) << dtype_name(type) << " element " << i;
          } else {
            EXPECT_EQ(0, std::memcmp(&out[i], &want[i], 4))
                << dtype_name(type) << " rows " << n_rows << " element " << i << ": " << out[i]
                << " vs " << want[i];
          }
        }
      }
    }
  });
}

}  // namespace
}  // namespace kvlm
