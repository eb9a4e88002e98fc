#include "ops/kv_format.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "ops/dtype.h"
#include "ops/half_rows.h"
#include "ops/kv_encode_rows.h"

namespace kvlm {

size_t kv_row_bytes(KvDtype dtype, size_t n) {
  switch (dtype) {
    case KvDtype::f32:
      return 4 * n;
    case KvDtype::f16:
    case KvDtype::bf16:
      return 2 * n;
    case KvDtype::fp8:
    case KvDtype::int8:
      return n;
    case KvDtype::q8_0:
    case KvDtype::q8_0_kc:
      return n + 2 * ((n + kQ8BlockSize - 1) / kQ8BlockSize);
  }
  return 0;
}

bool kv_dtype_storable(KvDtype dtype) {
  return dtype != KvDtype::int8;
}

const char* kv_dtype_name(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::f32:
      return "f32";
    case KvDtype::f16:
      return "f16";
    case KvDtype::bf16:
      return "bf16";
    case KvDtype::fp8:
      return "fp8";
    case KvDtype::int8:
      return "int8";
    case KvDtype::q8_0:
      return "q8_0";
    case KvDtype::q8_0_kc:
      return "q8_0_kc";
  }
  return "?";
}

std::optional<KvDtype> parse_cache_dtype(std::string_view name) {
  std::string key(name);
  for (char& ch : key) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (key == "f32" || key == "fp32" || key == "float32") return KvDtype::f32;
  if (key == "f16" || key == "fp16" || key == "float16" || key == "half") return KvDtype::f16;
  if (key == "bf16" || key == "bfloat16") return KvDtype::bf16;
  if (key == "q8_0" || key == "q8") return KvDtype::q8_0;
  if (key == "q8_0_kc") return KvDtype::q8_0_kc;
  if (key == "fp8" || key == "fp8_e4m3" || key == "e4m3") return KvDtype::fp8;
  return std::nullopt;
}

uint8_t f32_to_e4m3(float x) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  if (std::isnan(x)) return 0x7f;
  const float a = std::fabs(x);
  if (a >= 448.0f) return sign | 0x7e;  // saturate (as vLLM's cast does), never NaN
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1): the leading bit is 2^(e - 1)
  // Quantum: 2^(e - 1 - 3) for normal values, 2^-9 below the smallest normal 2^-6.
  const int quantum_exp = std::max(e - 4, -9);
  // a / quantum is exact (a power-of-two scaling), nearbyint rounds half to even.
  const float q = std::nearbyint(std::ldexp(a, -quantum_exp));  // 0..16
  const float value = std::ldexp(q, quantum_exp);
  if (value >= 448.0f) return sign | 0x7e;  // cannot happen below 448 (464 rounds past it)
  if (value == 0.0f) return sign;
  // Re-encode the rounded value (rounding may have carried into the next binade).
  int ve;
  const float vm = std::frexp(value, &ve);  // value = vm * 2^ve
  const int biased = ve - 1 + 7;
  if (biased <= 0) return sign | static_cast<uint8_t>(std::ldexp(value, 9));  // subnormal
  const int mantissa = static_cast<int>(std::ldexp(vm, 4)) - 8;               // 0..7
  return sign | static_cast<uint8_t>(biased << 3) | static_cast<uint8_t>(mantissa);
}

float e4m3_to_f32(uint8_t b) {
  // The 7 magnitude bits placed at fp32's exponent/mantissa boundary read as 2^-120 times the
  // e4m3 value, normal or subnormal; 2^120 scales it back exactly. attention.cpp does the same.
  const uint32_t bits = static_cast<uint32_t>(b & 0x7f) << 20;
  float f;
  std::memcpy(&f, &bits, 4);
  if ((b & 0x7f) == 0x7f) return std::nanf("");
  f *= 0x1p120f;
  return (b & 0x80) ? -f : f;
}

void kv_encode_row(std::byte* dst, const float* src, size_t n, KvDtype dtype,
                   const float* head_scales, size_t head_dim) {
  switch (dtype) {
    case KvDtype::f32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case KvDtype::f16:
      f32_to_f16_row(reinterpret_cast<uint16_t*>(dst), src, n);
      return;
    case KvDtype::bf16:
      f32_to_bf16_row(reinterpret_cast<uint16_t*>(dst), src, n);
      return;
    case KvDtype::fp8:
      f32_to_e4m3_row(reinterpret_cast<uint8_t*>(dst), src, n, head_scales, head_dim);
      return;
    case KvDtype::int8:
      return;  // not storable; caches refuse it
    case KvDtype::q8_0:
    case KvDtype::q8_0_kc:
      quantize_q8_0_row(dst, src, n);
      return;
  }
}

void kv_encode_row_reference(std::byte* dst, const float* src, size_t n, KvDtype dtype,
                             const float* head_scales, size_t head_dim) {
  switch (dtype) {
    case KvDtype::f32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case KvDtype::f16:
      for (size_t c = 0; c < n; ++c) {
        const uint16_t h = f32_to_f16(src[c]);
        std::memcpy(dst + 2 * c, &h, 2);
      }
      return;
    case KvDtype::bf16:
      for (size_t c = 0; c < n; ++c) {
        const uint16_t h = f32_to_bf16(src[c]);
        std::memcpy(dst + 2 * c, &h, 2);
      }
      return;
    case KvDtype::fp8:
      for (size_t c = 0; c < n; ++c)
        dst[c] = static_cast<std::byte>(f32_to_e4m3(src[c] / head_scales[c / head_dim]));
      return;
    case KvDtype::int8:
      return;  // not storable; caches refuse it
    case KvDtype::q8_0:
    case KvDtype::q8_0_kc: {
      // ggml's quantize_row_q8_0_ref: d = amax / 127 in fp32, stored as fp16; q = roundf(x / d)
      // computed as x * (1 / d). A short last block uses the values it has.
      auto* q = reinterpret_cast<int8_t*>(dst);
      std::byte* scales = dst + n;
      for (size_t b0 = 0, i = 0; b0 < n; b0 += kQ8BlockSize, ++i) {
        const size_t b1 = std::min(n, b0 + kQ8BlockSize);
        float amax = 0.0f;
        for (size_t c = b0; c < b1; ++c) amax = std::max(amax, std::fabs(src[c]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        const uint16_t h = f32_to_f16(d);
        std::memcpy(scales + 2 * i, &h, 2);
        for (size_t c = b0; c < b1; ++c) {
          const float r = std::round(src[c] * id);
          q[c] = static_cast<int8_t>(std::isnan(r) ? 0.0f : std::clamp(r, -127.0f, 127.0f));
        }
      }
      return;
    }
  }
}

float kv_decode_value(const std::byte* row, size_t n, size_t c, KvDtype dtype, float scale) {
  switch (dtype) {
    case KvDtype::f32: {
      float f;
      std::memcpy(&f, row + 4 * c, 4);
      return f;
    }
    case KvDtype::f16:
    case KvDtype::bf16: {
      uint16_t h;
      std::memcpy(&h, row + 2 * c, 2);
      return dtype == KvDtype::f16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
    case KvDtype::fp8:
      return e4m3_to_f32(static_cast<uint8_t>(row[c])) * scale;
    case KvDtype::int8:
      return 0.0f;
    case KvDtype::q8_0:
    case KvDtype::q8_0_kc: {  // q8_0_kc: the channel scale is the reader's (widen_row) to apply
      uint16_t h;
      std::memcpy(&h, row + n + 2 * (c / kQ8BlockSize), 2);
      return static_cast<float>(static_cast<int8_t>(row[c])) * f16_to_f32(h);
    }
  }
  return 0.0f;
}

}  // namespace kvlm
