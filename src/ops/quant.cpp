#include "ops/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace kvlm {

namespace {

// Calls f(y, block bytes) for each block of n values at src.
template <typename Block, typename F>
void for_each_block(float* dst, const void* src, size_t n, size_t block_values, F f) {
  const auto* bytes = static_cast<const uint8_t*>(src);
  for (size_t i = 0; i < n / block_values; ++i)
    f(dst + i * block_values, bytes + i * sizeof(Block));
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
      return for_each_block<BlockQ8_0>(dst, src, n, 32, dequantize_block_q8_0);
    case DType::kQ4_0:
      return for_each_block<BlockQ4_0>(dst, src, n, 32, dequantize_block_q4_0);
    case DType::kQ5_0:
      return for_each_block<BlockQ5_0>(dst, src, n, 32, dequantize_block_q5_0);
    case DType::kQ4_K:
      return for_each_block<BlockQ4_K>(dst, src, n, 256, dequantize_block_q4_k);
    case DType::kQ6_K:
      return for_each_block<BlockQ6_K>(dst, src, n, 256, dequantize_block_q6_k);
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
  if (type == DType::kQ5_0) {  // quantize_row_q5_0_ref: Q4_0's scale over 32 levels
    for (size_t i = 0; i < n / 32; ++i) {
      const float* x = src + i * 32;
      float amax = 0.0f, max = 0.0f;
      for (int j = 0; j < 32; ++j)
        if (amax < std::fabs(x[j])) {
          amax = std::fabs(x[j]);
          max = x[j];
        }
      const float d = max / -16;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      BlockQ5_0 b;
      b.d = f32_to_f16(d);
      uint32_t qh = 0;
      for (int j = 0; j < 16; ++j) {
        const auto q0 = std::min<uint8_t>(31, static_cast<int8_t>(x[j] * id + 16.5f));
        const auto q1 = std::min<uint8_t>(31, static_cast<int8_t>(x[j + 16] * id + 16.5f));
        b.qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
        qh |= static_cast<uint32_t>((q0 & 0x10u) >> 4) << j;
        qh |= static_cast<uint32_t>((q1 & 0x10u) >> 4) << (j + 16);
      }
      std::memcpy(b.qh, &qh, 4);
      std::memcpy(out + i * sizeof(b), &b, sizeof(b));
    }
    return true;
  }
  if (type == DType::kQ4_K) {
    quantize_row_q4_k(dst, src, n);
    return true;
  }
  if (type == DType::kQ6_K) {
    quantize_row_q6_k(dst, src, n);
    return true;
  }
  return false;
}

}  // namespace kvlm
