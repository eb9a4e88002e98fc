// ggml's block-quantized weight formats, bit-exact to ggml-common.h, with the scalar
// dequantization every kernel must reproduce and the reference quantizers kvlm writes with.
//
// Each block holds consecutive elements of one row (blocks never straddle rows), fp16 scales
// stored little-endian as raw bits:
//   Q8_0 (32 values, 34 bytes): d, int8 q[32];                  value j = q[j] * d
//   Q4_0 (32 values, 18 bytes): d, uint8 qs[16];                value j = (nibble j - 8) * d,
//        nibble j < 16 the low half of qs[j], nibble j >= 16 the high half of qs[j - 16]
//   Q5_0 (32 values, 22 bytes): d, uint32 qh (little-endian), uint8 qs[16]: value j =
//        (q_j - 16) * d, q_j the nibble of j as in Q4_0 plus bit j of qh as its fifth bit
//   Q4_K (256 values, 144 bytes): d, dmin, scales[12], qs[128]: 8 sub-blocks of 32 with 6-bit
//        scale sc and min m (packed as get_scale_min_k4 unpacks them); value =
//        (d * sc) * q - dmin * m, q a nibble: for each 64 values, 32 bytes of qs, values
//        0..31 from the low nibbles and 32..63 from the high ones
//   Q6_K (256 values, 210 bytes): ql[128], qh[64], int8 scales[16], d: 6-bit q (4 low bits in
//        ql, 2 high bits in qh) minus 32; value = (d * scale) * q, one scale per 16 values
// Every product above is formed in the order written, in fp32, as ggml does: dequantized
// values are identical to ggml's dequantize_row_* bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ops/dtype.h"

namespace kvlm {

constexpr int kQ8_0Block = 32;
constexpr int kQ4_0Block = 32;
constexpr int kQKBlock = 256;  // the K-quants' super-block

struct BlockQ8_0 {
  uint16_t d;  // fp16 scale
  int8_t q[32];
};
struct BlockQ4_0 {
  uint16_t d;  // fp16 scale
  uint8_t qs[16];
};
struct BlockQ5_0 {
  uint16_t d;      // fp16 scale
  uint8_t qh[4];   // fifth bits, bit j for value j
  uint8_t qs[16];  // low 4 bits, as Q4_0's
};
struct BlockQ4_K {
  uint16_t d;          // fp16 scale of the sub-block scales
  uint16_t dmin;       // fp16 scale of the sub-block mins
  uint8_t scales[12];  // 8 scales and 8 mins, 6 bits each
  uint8_t qs[128];     // 4-bit quants
};
struct BlockQ6_K {
  uint8_t ql[128];    // low 4 bits of the quants
  uint8_t qh[64];     // high 2 bits
  int8_t scales[16];  // one per 16 values
  uint16_t d;         // fp16 super-block scale
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ6_K) == 210);

// Scale and min of Q4_K sub-block j (0..7) from the 12 packed bytes (ggml's get_scale_min_k4).
inline void q4_k_scale_min(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// fp16 -> fp32, exact and branch-light (the block scales are converted once per block, inside
// the kernels' inner loops): the 15 bits below the sign, shifted into an fp32's exponent and
// mantissa, scaled by 2^112 (exact for normals and subnormals alike); infinities and NaNs
// rebuilt. The same bits as f16_to_f32 for all 65536 inputs (tests/ops/quant_test.cpp).
inline float f16_to_f32_fast(uint16_t h) {
  const uint32_t magnitude = h & 0x7fffu;
  uint32_t bits = magnitude << 13;
  float f;
  std::memcpy(&f, &bits, 4);
  f *= 0x1p112f;
  if (magnitude >= 0x7c00u) {  // inf or NaN
    bits = 0x7f800000u | ((magnitude & 0x3ffu) << 13);
    std::memcpy(&f, &bits, 4);
  }
  std::memcpy(&bits, &f, 4);
  bits |= static_cast<uint32_t>(h & 0x8000u) << 16;
  std::memcpy(&f, &bits, 4);
  return f;
}

// One block's values, as ggml's dequantize_row_* computes them (fp32, products in the order
// the layout comment above writes them). Inline so that the SIMD kernels compile them for their
// own target; `src` need not be aligned.
inline void dequantize_block_q8_0(float* y, const uint8_t* src) {
  BlockQ8_0 b;
  std::memcpy(&b, src, sizeof(b));
  const float d = f16_to_f32_fast(b.d);
  for (int j = 0; j < 32; ++j) y[j] = b.q[j] * d;
}

inline void dequantize_block_q4_0(float* y, const uint8_t* src) {
  BlockQ4_0 b;
  std::memcpy(&b, src, sizeof(b));
  const float d = f16_to_f32_fast(b.d);
  for (int j = 0; j < 16; ++j) {
    y[j] = ((b.qs[j] & 0x0F) - 8) * d;
    y[j + 16] = ((b.qs[j] >> 4) - 8) * d;
  }
}

inline void dequantize_block_q5_0(float* y, const uint8_t* src) {
  BlockQ5_0 b;
  std::memcpy(&b, src, sizeof(b));
  const float d = f16_to_f32_fast(b.d);
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  for (int j = 0; j < 16; ++j) {
    const int high0 = ((qh >> j) << 4) & 0x10, high1 = (qh >> (j + 12)) & 0x10;
    y[j] = (((b.qs[j] & 0x0F) | high0) - 16) * d;
    y[j + 16] = (((b.qs[j] >> 4) | high1) - 16) * d;
  }
}

inline void dequantize_block_q4_k(float* y, const uint8_t* src) {
  BlockQ4_K b;
  std::memcpy(&b, src, sizeof(b));
  const float d = f16_to_f32_fast(b.d), dmin = f16_to_f32_fast(b.dmin);
  const uint8_t* q = b.qs;
  for (int j = 0; j < 4; ++j, q += 32, y += 64) {  // 64 values per 32 bytes of qs
    uint8_t sc, m;
    q4_k_scale_min(2 * j, b.scales, &sc, &m);
    const float d1 = d * sc, m1 = dmin * m;
    q4_k_scale_min(2 * j + 1, b.scales, &sc, &m);
    const float d2 = d * sc, m2 = dmin * m;
    for (int l = 0; l < 32; ++l) y[l] = d1 * (q[l] & 0xF) - m1;
    for (int l = 0; l < 32; ++l) y[l + 32] = d2 * (q[l] >> 4) - m2;
  }
}

inline void dequantize_block_q6_k(float* y, const uint8_t* src) {
  BlockQ6_K b;
  std::memcpy(&b, src, sizeof(b));
  const float d = f16_to_f32_fast(b.d);
  const uint8_t* ql = b.ql;
  const uint8_t* qh = b.qh;
  const int8_t* sc = b.scales;
  for (int n = 0; n < 2; ++n, y += 128, ql += 64, qh += 32, sc += 8) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * sc[is] * q1;
      y[l + 32] = d * sc[is + 2] * q2;
      y[l + 64] = d * sc[is + 4] * q3;
      y[l + 96] = d * sc[is + 6] * q4;
    }
  }
}

// dst [n] = the n values at src, stored as `type` (any type; n a multiple of its block).
// The scalar reference.
void dequantize_row(float* dst, const void* src, DType type, size_t n);

// dst = src [n] quantized to Q8_0, Q4_0, Q5_0, Q4_K or Q6_K with ggml's reference quantizers
// (quantize_row_q8_0_ref, q4_0_ref, q5_0_ref, q4_K_ref, q6_K_ref: what llama-quantize writes
// without an importance matrix), so kvlm writes the bytes llama.cpp would. n a multiple of the
// type's block; plain types are not handled here (returns false).
bool quantize_row(void* dst, const float* src, DType type, size_t n);

// The K-quant reference quantizers (ops/quantize_k.cpp); n a multiple of 256.
void quantize_row_q4_k(void* dst, const float* src, size_t n);
void quantize_row_q6_k(void* dst, const float* src, size_t n);

}  // namespace kvlm
