// Random BF16 weight matrices for the BF16 matmul kernels' tests (vdpbf16ps, AMX), in either
// layout and at any misalignment of their storage.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/dtype.h"
#include "ops/weight_matrix.h"

namespace kvlm::test {

struct Bf16Matrix {
  std::vector<uint16_t> storage;
  WeightMatrix view;  // n_in x n_out, `offset` elements into `storage`
};

// Each weight is `value()` rounded to bf16, drawn in storage order (the caller's generator
// decides the distribution, so a test's values follow from its seed).
template <class Value>
Bf16Matrix random_bf16_matrix(int n_in, int n_out, WeightLayout layout, int offset, Value value) {
  Bf16Matrix m;
  m.storage.resize(static_cast<size_t>(n_in) * n_out + offset + 1);
  for (uint16_t& h : m.storage) h = f32_to_bf16(value());
  m.view = WeightMatrix{m.storage.data() + offset, DType::kBF16, layout, n_in, n_out};
  return m;
}

inline const char* layout_name(WeightLayout l) {
  return l == WeightLayout::kInOut ? "kInOut" : "kOutIn";
}

}  // namespace kvlm::test
