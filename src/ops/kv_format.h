// How a KV cache stores one row of keys or values (kv_dim = n_kv_head * head_dim values of one
// position in one layer): the element type, the row's byte layout, and the scalar conversions
// between fp32 and each stored type. The model writes fp32 rows (kv_encode_row quantizes
// them); attention reads stored rows directly and widens them in registers (ops/attention.cpp),
// with kv_decode_value as its scalar reference. A value decodes to the same fp32 bits on every
// path: the widening is exact and the one multiply by a scale is a single IEEE rounding.
//
// Layouts of one row of n values:
//   f32, f16, bf16  n elements
//   q8_0, q8_0_kc   n int8 values, then ceil(n / 32) fp16 scales: value c = q[c] * d[c / 32]
//                   (ggml's q8_0: d = max|x| / 127 over the 32 values, q = round(x / d);
//                   34 bytes per 32 values, 8.5 bits per value)
//   fp8             n e4m3 bytes (1 sign, 4 exponent bits biased by 7, 3 mantissa bits; no
//                   infinities, largest 448); value c = e4m3[c] * scale of c's KV head. The
//                   scales (one per layer and KV head, for K and for V) are fixed when the cache
//                   is made and never change (see docs/kv_cache_quantization.md), so a row's
//                   bytes depend on that row's values only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kvlm {

// int8 is only a price for `kvlm kv-size` (one byte per value, scales not counted); a cache
// stores q8_0 instead.
// q8_0_kc stores rows exactly as q8_0; its keys are divided by fixed per-channel scales before
// quantizing and stored before RoPE (kv/kv_cache.h's KvStorageOptions::k_channel_scales).
enum class KvDtype { f32, f16, bf16, fp8, int8, q8_0, q8_0_kc };

constexpr int kQ8BlockSize = 32;  // values sharing one q8_0 scale

// Bytes of one stored row of n values.
size_t kv_row_bytes(KvDtype dtype, size_t n);
// True for the types a cache can store (all but int8).
bool kv_dtype_storable(KvDtype dtype);
// "f32", "f16", "bf16", "fp8", "int8", "q8_0".
const char* kv_dtype_name(KvDtype dtype);
// The cache types a flag accepts: f32, f16, bf16, q8_0, fp8 (also fp32, float16, bfloat16, ...).
std::optional<KvDtype> parse_cache_dtype(std::string_view name);

// What attention needs to read a layer's rows: their type, the bytes between consecutive
// positions, and for fp8 the scales of that layer's KV heads.
struct KvRowFormat {
  KvDtype dtype = KvDtype::f32;
  size_t row_bytes = 0;                    // stride between positions
  const float* k_scale = nullptr;          // fp8: [n_kv_head] for this layer's keys
  const float* v_scale = nullptr;          // fp8: [n_kv_head] for this layer's values
  const float* k_channel_scale = nullptr;  // q8_0_kc: [kv_dim] this layer's key value c times it
};
// The format of plain fp32 rows of kv_dim values.
inline KvRowFormat f32_rows(size_t kv_dim) {
  return {KvDtype::f32, kv_dim * sizeof(float), nullptr, nullptr};
}

// dst (kv_row_bytes(dtype, n) bytes) = src [n] stored as `dtype`. fp8: head_scales[c / head_dim]
// divides value c before rounding (saturating at +-448).
void kv_encode_row(std::byte* dst, const float* src, size_t n, KvDtype dtype,
                   const float* head_scales, size_t head_dim);
// The same bytes, one value at a time in scalar code: what tests check the SIMD rows
// (ops/half_rows.h, ops/kv_encode_rows.h) against.
void kv_encode_row_reference(std::byte* dst, const float* src, size_t n, KvDtype dtype,
                             const float* head_scales, size_t head_dim);
// Value c of a stored row of n values; `scale` is the fp8 scale of c's head (ignored otherwise).
float kv_decode_value(const std::byte* row, size_t n, size_t c, KvDtype dtype, float scale);

// e4m3 (the "fn" variant: no infinities; 0x7f and 0xff are NaN) <-> fp32, round to nearest even,
// saturating at +-448. Exposed for tests.
uint8_t f32_to_e4m3(float x);
float e4m3_to_f32(uint8_t b);

}  // namespace kvlm
