// Random block-quantized weight matrices for the quantized matmul kernels' tests, with their
// values dequantized by the scalar reference (ops/quant.h), so a kernel's output can be compared
// bit for bit with the F32 kernel's on the same values.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "ops/dtype.h"
#include "ops/weight_matrix.h"

namespace kvlm::test {

struct QuantMatrix {
  std::vector<uint8_t> bytes;
  WeightMatrix view;          // the quantized matrix, `offset` bytes into `bytes`
  std::vector<float> values;  // [n_out, n_in] its values as dequantize_row gives them
  WeightMatrix f32;           // a view of `values`
};

// Whether the K-quants' fp16 super-block scale may be negative (ggml never writes one, but a
// kernel must not assume so).
enum class ScaleSigns { kPositive, kEither };

// Types with 32-value blocks (Q8_0, Q4_0, Q5_0) quantize normal values (stddev 0.5); the K-quants
// are random bytes (every pattern of quants and 6-bit scales is valid) with fp16 scales drawn
// from [2^-10, 2^-6) and mins from [2^-11, 2^-7), so sums stay moderate.
QuantMatrix random_quant_matrix(DType type, int n_in, int n_out, int offset, std::mt19937& rng,
                                ScaleSigns signs = ScaleSigns::kPositive);

}  // namespace kvlm::test
