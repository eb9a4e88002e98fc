#include "support/quant_matrix.h"

#include <cstring>

#include "ops/quant.h"

namespace kvlm::test {

QuantMatrix random_quant_matrix(DType type, int n_in, int n_out, int offset, std::mt19937& rng,
                                ScaleSigns signs) {
  QuantMatrix m;
  const size_t row_bytes = dtype_bytes(type, n_in);
  m.bytes.assign(offset + row_bytes * n_out, 0);
  uint8_t* base = m.bytes.data() + offset;
  std::normal_distribution<float> normal(0.0f, 0.5f);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int o = 0; o < n_out; ++o) {
    uint8_t* row = base + o * row_bytes;
    if (dtype_block_elements(type) == 32) {
      std::vector<float> v(n_in);
      for (float& f : v) f = normal(rng);
      quantize_row(row, v.data(), type, n_in);
      continue;
    }
    for (size_t k = 0; k < row_bytes; ++k) row[k] = static_cast<uint8_t>(byte(rng));
    for (int b = 0; b < n_in / 256; ++b) {
      uint8_t* block = row + b * dtype_block_bytes(type);
      uint16_t d = static_cast<uint16_t>(0x1400 + byte(rng) * 16);
      if (signs == ScaleSigns::kEither) d = static_cast<uint16_t>(d + (byte(rng) & 1) * 0x8000);
      const uint16_t dmin = static_cast<uint16_t>(0x1000 + byte(rng) * 16);
      if (type == DType::kQ4_K) {
        std::memcpy(block, &d, 2);
        std::memcpy(block + 2, &dmin, 2);
      } else {
        std::memcpy(block + 208, &d, 2);
      }
    }
  }
  m.view = WeightMatrix{base, type, WeightLayout::kOutIn, n_in, n_out};
  m.values.resize(static_cast<size_t>(n_in) * n_out);
  for (int o = 0; o < n_out; ++o)
    dequantize_row(m.values.data() + static_cast<size_t>(o) * n_in, base + o * row_bytes, type,
                   n_in);
  m.f32 = WeightMatrix{m.values.data(), DType::kF32, WeightLayout::kOutIn, n_in, n_out};
  return m;
}

}  // namespace kvlm::test
