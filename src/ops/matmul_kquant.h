// Matmul kernels for the block formats (Q4_0, Q5_0, Q4_K, Q6_K, Q8_0) on fp32 activations: SIMD,
// compiled once per Highway target (matmul_kquant_simd.cpp) and dispatched at run time; not part
// of the ops API. Every one of these types now runs on 8-bit activations (matmul_q8act.h), so
// matmul_forward no longer comes here: these decoders are reached only through
// matmul_kquant_forward itself (its tests) and matmul_quant_forward's fallback for other types.
//
// Numerics: each weight is dequantized to fp32 in registers with ggml's formulas (the fp32
// operations of ops/quant.h's dequantize_block_*, in the same order, no fma contraction), and
// the products are reduced in matmul.h's kOutIn 16-lane order. So the result is exactly the
// F32 kOutIn kernel's on the dequantized matrix, whatever the row count, the tile shape or the
// thread count: the exactness contract of matmul.h holds unchanged.
#pragma once

#include "ops/matmul.h"

namespace kvlm {

// Rows from which the panel kernel runs (the fused one below): there the fused tiles would
// dequantize each weight once per 3 or 4 rows, the panel once per call.
constexpr int kKQuantPanelMinRows = 8;

// Two kernels behind one entry point, chosen by the row count; they give the same bits.
enum class KQuantPath {
  kAuto,   // fused for few rows, dequantized panel for many (what matmul_forward does)
  kFused,  // decode: each weight dequantized in registers and used at once, per row tile
  kPanel,  // prefill: a tile of weight rows dequantized once into an fp32 panel (L1/L2), then
           // the F32 kOutIn tiles run over every activation row against it
};

// out [T, O] = x [T, I] @ W + bias, W of type Q4_0, Q5_0, Q4_K, Q6_K or Q8_0, kOutIn, I a whole
// number of blocks. Other types: nothing is written (the caller dispatches).
void matmul_kquant_forward(float* out, const float* x, const WeightMatrix& w, const float* bias,
                           int n_rows, const Parallel& par, KQuantPath path = KQuantPath::kAuto);

// Whether these kernels take `type` with `n_rows` rows (kAuto): Q4_0, Q5_0, Q4_K and Q6_K always,
// Q8_0 from kKQuantPanelMinRows rows (its decode used to be a separate fused kernel).
bool kquant_kernel_handles(DType type, int n_rows);

}  // namespace kvlm
