#include "ops/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace kvlm {

namespace {

void dequantize_q8_0(float* y, const BlockQ8_0& b) {
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < 32; ++j) y[j] = b.q[j] * d;
}

void dequantize_q4_0(float* y, const BlockQ4_0& b) {
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < 16; ++j) {
    y[j] = ((b.qs[j] & 0x0F) - 8) * d;
    y[j + 16] = ((b.qs[j] >> 4) - 8) * d;
  }
}

void dequantize_q4_k(float* y, const BlockQ4_K& b) {
  const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
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

void dequantize_q6_k(float* y, const BlockQ6_K& b) {
  const float d = f16_to_f32(b.d);
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

// Calls f(y, block) for each block of n values at src, blocks copied out (the mapping gives
// no alignment guarantee for the 2-byte scales).
template <typename Block, typename F>
void for_each_block(float* dst, const void* src, size_t n, size_t block_values, F f) {
  const auto* bytes = static_cast<const uint8_t*>(src);
  for (size_t i = 0; i < n / block_values; ++i) {
    Block b;
    std::memcpy(&b, bytes + i * sizeof(Block), sizeof(Block));
    f(dst + i * block_values, b);
  }
}

}  // namespace

void dequantize_row(float* dst, const void* src, DType type, size_t n) {
  switch (type) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
      for (size_t i = 0; i < n; ++i) dst[i] = load_as_f32(src, type, i);
      return;
    case DType::kQ8_0:
      return for_each_block<BlockQ8_0>(dst, src, n, 32, dequantize_q8_0);
    case DType::kQ4_0:
      return for_each_block<BlockQ4_0>(dst, src, n, 32, dequantize_q4_0);
    case DType::kQ4_K:
      return for_each_block<BlockQ4_K>(dst, src, n, 256, dequantize_q4_k);
    case DType::kQ6_K:
      return for_each_block<BlockQ6_K>(dst, src, n, 256, dequantize_q6_k);
  }
}

float load_quantized_as_f32(const void* data, DType type, size_t i) {
  // Dequantizes the element's whole block: simple, and only used off the hot path (embedding
  // rows, references).
  const size_t block = dtype_block_elements(type);
  float values[kQKBlock];
  const auto* bytes = static_cast<const uint8_t*>(data) + i / block * dtype_block_bytes(type);
  dequantize_row(values, bytes, type, block);
  return values[i % block];
}

bool quantize_row(void* dst, const float* src, DType type, size_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  if (type == DType::kQ8_0) {
    for (size_t i = 0; i < n / 32; ++i) {
      const float* x = src + i * 32;
      float amax = 0.0f;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
      const float d = amax / 127;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      BlockQ8_0 b;
      b.d = f32_to_f16(d);
      for (int j = 0; j < 32; ++j) b.q[j] = static_cast<int8_t>(std::round(x[j] * id));
      std::memcpy(out + i * sizeof(b), &b, sizeof(b));
    }
    return true;
  }
  if (type == DType::kQ4_0) {
    for (size_t i = 0; i < n / 32; ++i) {
      const float* x = src + i * 32;
      float amax = 0.0f, max = 0.0f;  // the value of largest magnitude, with its sign
      for (int j = 0; j < 32; ++j)
        if (amax < std::fabs(x[j])) {
          amax = std::fabs(x[j]);
          max = x[j];
        }
      const float d = max / -8;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      BlockQ4_0 b;
      b.d = f32_to_f16(d);
      for (int j = 0; j < 16; ++j) {
        const auto q0 = std::min<uint8_t>(15, static_cast<int8_t>(x[j] * id + 8.5f));
        const auto q1 = std::min<uint8_t>(15, static_cast<int8_t>(x[j + 16] * id + 8.5f));
        b.qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
      }
      std::memcpy(out + i * sizeof(b), &b, sizeof(b));
    }
    return true;
  }
  return false;
}

}  // namespace kvlm
