// Rows of fp32 values rounded to 16 bits (f16, bf16), SIMD, dispatched at run time: what the
// KV cache does to every key and value it stores as f16 or bf16 (prefill writes 18,432 values a
// token for GPT-2 124M). Each value gets exactly the bits of the scalar f32_to_f16 /
// f32_to_bf16 (ops/dtype.h) on every target, NaN included, so a cache row's bits do not depend
// on which path or target wrote it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvlm {

// dst[i] = f32_to_f16(src[i]) for i < n: round to nearest even, overflow to infinity,
// subnormal halves kept, any NaN to the quiet NaN 0x7e00 with its sign.
void f32_to_f16_row(uint16_t* dst, const float* src, size_t n);

// dst[i] = f32_to_bf16(src[i]) for i < n: round to nearest even, NaN kept quiet.
void f32_to_bf16_row(uint16_t* dst, const float* src, size_t n);

}  // namespace kvlm
