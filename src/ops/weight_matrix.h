// WeightMatrix: a view of a 2-D weight as the checkpoint stores it (no copy), with the
// storage type and which dimension is contiguous. Kernels widen each element to fp32.
#pragma once

#include "ops/dtype.h"

namespace kvlm {

enum class WeightLayout {
  kInOut,  // [n_in, n_out] row-major: GPT-2's Conv1D (x @ W)
  kOutIn,  // [n_out, n_in] row-major: nn.Linear and the tied embedding used as output head
};

struct WeightMatrix {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  WeightLayout layout = WeightLayout::kInOut;
  int n_in = 0;
  int n_out = 0;

  size_t n_bytes() const { return dtype_bytes(dtype, static_cast<size_t>(n_in) * n_out); }
};

}  // namespace kvlm
