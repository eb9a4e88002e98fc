// Element types a checkpoint may store weights in, and their conversion to fp32.
// Activations and accumulation are always fp32; 16-bit weights are widened inside kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace kvlm {

enum class DType { kF32, kF16, kBF16 };

inline size_t dtype_size(DType t) {
  return t == DType::kF32 ? 4 : 2;
}

// Name as safetensors spells it ("F32", "F16", "BF16").
const char* dtype_name(DType t);
// Parses "F32"/"F16"/"BF16" (safetensors) or "f32"/"f16"/"bf16" (flags).
std::optional<DType> parse_dtype(std::string_view name);

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even, as PyTorch does; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);  // round to nearest even

// Widens element i of a weight array stored as `type`.
inline float load_as_f32(const void* data, DType type, size_t i) {
  switch (type) {
    case DType::kF32:
      return static_cast<const float*>(data)[i];
    case DType::kF16:
      return f16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case DType::kBF16:
      return bf16_to_f32(static_cast<const uint16_t*>(data)[i]);
  }
  return 0.0f;
}

}  // namespace kvlm
