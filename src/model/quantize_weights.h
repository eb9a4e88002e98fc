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
// quantizers), the rows split over `n_threads` (0: omp_get_max_threads(); the same bytes at
// any count). `name` appears in errors (n_in not a whole number of blocks).
Result<WeightMatrix> convert_weight_matrix(const WeightMatrix& m, DType to, OwnedTensors* owned,
                                           const std::string& name, int n_threads = 0);

// The type a matrix of n_in-value rows is stored in when `wanted` is asked for (`--weights`,
// `kvlm convert --type`): `wanted` when each row is a whole number of its blocks; otherwise
// llama.cpp's fallback (llama_tensor_get_type): Q4_K -> Q5_0, Q6_K -> Q8_0, and F16 where those
// 32-value blocks do not fit either (stories260K: 64-wide rows take Q5_0 / Q8_0, its 172-wide
// w2 F16). Q8_0, Q4_0 and Q5_0 have no fallback in llama.cpp (llama-quantize stops with
// "Unsupported tensor size encountered"); kvlm keeps such a matrix in `source`, its stored type.
DType stored_weight_type(DType wanted, int64_t n_in, DType source);

// What a loader does for `--weights TYPE`: convert_weight_matrix to
// stored_weight_type(TYPE, m.n_in, m.dtype), or `m` itself when that is its own type.
Result<WeightMatrix> convert_matrix_on_load(const WeightMatrix& m, DType to, OwnedTensors* owned,
                                            const std::string& name, int n_threads = 0);

// How many of `matrices` are stored in each type, most first: "Q4_K x 10, Q5_0 x 4, F16 x 2"
// (what `--weights` made of a model whose rows do not all fit its blocks).
std::string count_weight_types(const std::vector<const WeightMatrix*>& matrices);

// The bytes of `m` as `to` in [n_out, n_in] order (what a GGUF file stores). Rows are
// converted independently, split over `n_threads` (the K-quant quantizers' scale searches make
// about 7M weights/s per core), so the bytes do not depend on the thread count.
Result<std::vector<uint8_t>> weight_matrix_bytes(const WeightMatrix& m, DType to,
                                                 const std::string& name, int n_threads = 1);

// n fp32 values stored as `to` (any type), appended to `out`.
bool store_row(std::vector<uint8_t>* out, const float* row, size_t n, DType to);

}  // namespace kvlm
