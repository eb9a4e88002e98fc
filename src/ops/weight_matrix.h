// WeightMatrix: a view of a 2-D weight as the checkpoint stores it (no copy), with the
// storage type and which dimension is contiguous. Kernels widen each element to fp32.
#pragma once

#include <cstdint>

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
  // When set: the same BF16 kInOut weights in the order AMX reads them (pack_bf16amx_tiles,
  // ops/matmul_bf16amx.h), made once at load; the AMX kernels then read tiles in place instead
  // of pairing rows up on every call, and vdpbf16ps's batched decode reads their pairs (the same
  // bits either way).
  const uint16_t* amx_tiles = nullptr;
  // When set: the same weights re-laid for decode, made once at load, read by its kernels as one
  // sequential stream per strip (the same bits either way): F16 and BF16 (either layout) and F32
  // [n_in, n_out] as column strips of their own type (pack_weight_strips, ops/weight_strips.h).
  const void* strips = nullptr;
  // When set: a BF16 [n_out, n_in] head as vdpbf16ps's pairs by lane class, for its batched
  // decode (pack_bf16dot_head_strips, ops/matmul_bf16dot.h). Its own field, not `strips`: which
  // kernels run is decided per call (bf16_dot_active()), so each must find its own layout.
  const uint16_t* bf16dot_pairs = nullptr;

  size_t n_bytes() const { return dtype_bytes(dtype, static_cast<size_t>(n_in) * n_out); }
};

}  // namespace kvlm
