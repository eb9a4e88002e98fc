// The SIMD kernels behind matmul_q8act_forward (matmul_q8act_x86.cpp), one per instruction set
// and weight type; each gives matmul_q8act_reference's bits (numerics: matmul_q8act.h).
// Internal to ops/matmul_q8act*.cpp.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/matmul_q8act.h"

namespace kvlm::q8act {

// out [T, O] (row stride n_out) for weight rows [o_begin, o_end) of w (row_bytes apart).
using Kernel = void (*)(float* out, const Q8Rows& x, const uint8_t* w, size_t row_bytes,
                        const float* bias, size_t n_rows, size_t n_out, size_t o_begin,
                        size_t o_end);

// Null where this build has no such kernel (not x86-64).
Kernel avx512_vnni_kernel(DType type);
Kernel avx2_kernel(DType type);

// One activation row x [n] quantized in blocks of `block` (matmul_q8act.h's numerics): q [n],
// d [n / block], off4 [n / 4] = -offset * (sum of each 4 q) when offset != 0, sum32 [n / 32] when
// not null. Every one gives the scalar quantizer's bytes (matmul_q8act.cpp).
using RowQuantizer = void (*)(int8_t* q, float* d, int32_t* off4, int32_t* sum32, const float* x,
                              size_t n, size_t block, int32_t offset);

// Null where this build has none (not x86-64); they run where cpu_has_* says.
RowQuantizer avx512_row_quantizer();
RowQuantizer avx2_row_quantizer();

// Whether this CPU (and OS) runs AVX512F/BW/VL with VNNI; AVX2 with FMA.
bool cpu_has_avx512_vnni();
bool cpu_has_avx2();

}  // namespace kvlm::q8act
