// Element types a checkpoint may store weights in, and their conversion to fp32.
// Activations and accumulation are always fp32; 16-bit weights are widened inside kernels.
//
// Besides the plain types (one element each: F32, F16, BF16) there are ggml's block-quantized
// types, whose elements come in blocks stored together (layouts in ops/quant.h):
//   Q8_0: 32 elements in 34 bytes, Q4_0: 32 in 18, Q5_0: 32 in 22, Q4_K: 256 in 144,
//   Q6_K: 256 in 210.
// A quantized matrix is always [n_out, n_in] with blocks along n_in (WeightLayout::kOutIn).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace kvlm {

enum class DType { kF32, kF16, kBF16, kQ8_0, kQ4_0, kQ4_K, kQ6_K, kQ5_0 };

inline bool dtype_is_quantized(DType t) {
  return t != DType::kF32 && t != DType::kF16 && t != DType::kBF16;
}

// Elements per block: 1 for the plain types.
inline size_t dtype_block_elements(DType t) {
  switch (t) {
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ5_0:
      return 32;
    case DType::kQ4_K:
    case DType::kQ6_K:
      return 256;
    default:
      return 1;
  }
}

// Bytes per block (per element for the plain types).
inline size_t dtype_block_bytes(DType t) {
  switch (t) {
    case DType::kF32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kQ8_0:
      return 34;
    case DType::kQ4_0:
      return 18;
    case DType::kQ5_0:
      return 22;
    case DType::kQ4_K:
      return 144;
    case DType::kQ6_K:
      return 210;
  }
  return 0;
}

// Bytes of one element of a plain type (F32, F16, BF16); quantized types have no per-element
// size: use dtype_bytes.
inline size_t dtype_size(DType t) {
  return t == DType::kF32 ? 4 : 2;
}

// Bytes of n elements (n a multiple of the block size for quantized types).
inline size_t dtype_bytes(DType t, size_t n) {
  return n / dtype_block_elements(t) * dtype_block_bytes(t);
}

// Name as safetensors and GGUF spell it ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q5_0", "Q4_K",
// "Q6_K").
const char* dtype_name(DType t);
// Parses those names in upper case (files) or lower case ("f32", "q8_0": flags).
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

// Element i of a quantized array (in ops/quant.cpp): the value dequantize_row gives it.
float load_quantized_as_f32(const void* data, DType type, size_t i);

// Widens element i of a weight array stored as `type`. The array need not be aligned to its
// type: a GGUF file may declare general.alignment 1 or 2, and the loaders read such tensors
// through here to copy them (memcpy compiles to the same single load; a cast would be undefined
// behaviour there, found by the gguf fuzz target).
inline float load_as_f32(const void* data, DType type, size_t i) {
  const auto* bytes = static_cast<const std::byte*>(data);
  switch (type) {
    case DType::kF32: {
      float value;
      std::memcpy(&value, bytes + i * sizeof(float), sizeof(float));
      return value;
    }
    case DType::kF16:
    case DType::kBF16: {
      uint16_t half;
      std::memcpy(&half, bytes + i * sizeof(uint16_t), sizeof(uint16_t));
      return type == DType::kF16 ? f16_to_f32(half) : bf16_to_f32(half);
    }
    default:
      return load_quantized_as_f32(data, type, i);
  }
}

}  // namespace kvlm
