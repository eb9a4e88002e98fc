// Converting a weight matrix to another storage type at load (`--weights q8_0|q4_k|f16|...`,
// GGUF files whose tensors need another type or are misaligned) and for `kvlm convert`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/checkpoint.h"

namespace kvlm {

// `m` stored as `to`, in owned memory, always in WeightLayout::kOutIn ([n_out, n_in] rows, the
// only layout block-quantized types have): a kInOut matrix is transposed. Each output row is
// widened to fp32 (dequantized) and then rounded or quantized to `to` (quant.h's reference
// quantizers), the rows split over every core (omp_get_max_threads(): the same bytes at any
// count). `name` appears in errors (n_in not a whole number of blocks).
Result<WeightMatrix> convert_weight_matrix(const WeightMatrix& m, DType to, OwnedTensors* owned,
                                           const std::string& name);

// What a loader does for `--weights TYPE`: convert_weight_matrix, except that a matrix whose
// input width is not a whole number of `to`'s blocks (stories260K's 172-wide w2 for Q8_0, every
// 64- or 172-wide matrix of it for Q4_K and Q6_K's blocks of 256) stays
// as it is, as llama.cpp's quantizer falls back for such tensors.
Result<WeightMatrix> convert_matrix_on_load(const WeightMatrix& m, DType to, OwnedTensors* owned,
                                            const std::string& name);

// The bytes of `m` as `to` in [n_out, n_in] order (what a GGUF file stores). Rows are
// converted independently, split over `n_threads` (the K-quant quantizers' scale searches make
// about 7M weights/s per core), so the bytes do not depend on the thread count.
Result<std::vector<uint8_t>> weight_matrix_bytes(const WeightMatrix& m, DType to,
                                                 const std::string& name, int n_threads = 1);

// n fp32 values stored as `to` (any type), appended to `out`.
bool store_row(std::vector<uint8_t>* out, const float* row, size_t n, DType to);

}  // namespace kvlm
