// The 8-bit KV cache encodings of a row in SIMD, dispatched at run time: what a cache stored as
// fp8 or q8_0 does to every key and value it writes (18,432 values a token for GPT-2 124M; the
// scalar loops took 16 and 4 ns a value, a fifth of a batch-8 decode step with fp8). Each gives
// exactly the bytes of kv_encode_row_reference (ops/kv_format.h) on every target.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvlm {

// dst[c] = f32_to_e4m3(src[c] / head_scales[c / head_dim]) for c < n.
void f32_to_e4m3_row(uint8_t* dst, const float* src, size_t n, const float* head_scales,
                     size_t head_dim);

// The q8_0 row of src [n] (kv_format.h's layout: n int8 values, then one fp16 scale per 32).
void quantize_q8_0_row(std::byte* dst, const float* src, size_t n);

}  // namespace kvlm
