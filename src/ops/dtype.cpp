#include "ops/dtype.h"

namespace kvlm {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
    case DType::kQ8_0:
      return "Q8_0";
    case DType::kQ4_0:
      return "Q4_0";
    case DType::kQ4_K:
      return "Q4_K";
    case DType::kQ6_K:
      return "Q6_K";
    case DType::kQ5_0:
      return "Q5_0";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  if (name == "F32" || name == "f32") return DType::kF32;
  if (name == "F16" || name == "f16") return DType::kF16;
  if (name == "BF16" || name == "bf16") return DType::kBF16;
  if (name == "Q8_0" || name == "q8_0") return DType::kQ8_0;
  if (name == "Q4_0" || name == "q4_0") return DType::kQ4_0;
  if (name == "Q4_K" || name == "q4_k") return DType::kQ4_K;
  if (name == "Q6_K" || name == "q6_k") return DType::kQ6_K;
  if (name == "Q5_0" || name == "q5_0") return DType::kQ5_0;
  return std::nullopt;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {  // inf or NaN
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {  // normal
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {  // signed zero
    bits = sign;
  } else {  // subnormal: normalise
    exponent = 113;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --exponent;
    }
    bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (abs_bits >= 0x477ff000u) return sign | 0x7c00u;  // rounds to inf
  if (abs_bits < 0x38800000u) {                        // subnormal or zero in f16
    if (abs_bits < 0x33000000u) return sign;           // below half the smallest subnormal
    const uint32_t mantissa = (abs_bits & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(abs_bits >> 23);  // 14..24
    uint32_t value = mantissa >> shift;
    const uint32_t remainder = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (remainder > halfway || (remainder == halfway && (value & 1u))) ++value;
    return sign | static_cast<uint16_t>(value);
  }
  uint32_t value = ((abs_bits >> 23) - 112) << 10 | ((abs_bits >> 13) & 0x3ffu);
  const uint32_t remainder = abs_bits & 0x1fffu;
  if (remainder > 0x1000u || (remainder == 0x1000u && (value & 1u))) ++value;
  return sign | static_cast<uint16_t>(value);
}

}  // namespace kvlm
