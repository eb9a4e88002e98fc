// Matrix products: out = x @ W (+ bias), for prefill (many rows) and decode (one row per
// sequence) alike. SIMD kernels (src/ops/matmul_simd.cpp) are compiled for every Highway
// target and the best one for this CPU is picked at run time; 16-bit weights are widened to
// fp32 inside the kernels, so they cross the memory bus at half the bytes.
//
// Exactness contract (the engine's bitwise guarantees rest on it): each output element is
// reduced over n_in in an order that depends only on n_in, the weight layout and the SIMD
// target, never on n_rows, on which row of the batch it is, on the column block, on which
// kernel variant ran, or on the thread count. So a token's logits are the same whether it is
// computed in a prefill of 500 rows, in a decode step of one, or next to other sequences.
//
// Order per output element (fma = one fused multiply-add, rounded once, on targets that have
// it: AVX2, AVX-512, NEON; SSSE3, SSE4 and EMU128 round the product and the sum separately):
//   kInOut: acc = 0; for i in 0..I-1: acc = fma(x[i], W[i][o], acc); out = acc + bias[o]
//   kOutIn: 16 partial sums, element i going to lane i % 16, each a chain of fmas in
//           increasing i (the last n_in % 16 lanes padded with x = w = 0); then
//           t[l] = s[l] + s[l+8], u[l] = t[l] + t[l+4], v[l] = u[l] + u[l+2], v[0] + v[1];
//           out = that + bias[o]
// On the fma targets these orders do not depend on the vector width, so AVX2, AVX-512 and
// NEON give the same bits.
//
// Block-quantized weights (always kOutIn): Q8_0, Q5_0, Q4_0, Q4_K and Q6_K run on 8-bit
// activations with integer dot products, in the order matmul_q8act.h fixes (not the bits of
// the F32 matmul on the dequantized matrix: the activations are rounded to int8 per block).
//
// Dimension letters: T rows (tokens), I = n_in, O = n_out.
#pragma once

#include "ops/parallel.h"
#include "ops/weight_matrix.h"

namespace kvlm {

// out [T, O] = x [T, I] @ W + bias [O] (bias may be null). Dispatches to the fastest kernel
// for this machine and spreads the outputs over par.n_threads threads.
void matmul_forward(float* out, const float* x, const WeightMatrix& w, const float* bias,
                    int n_rows, const Parallel& par);

// Scalar reference: the plain definition in double precision, used to check the fast kernels
// (which agree with it to rounding, not bitwise).
void matmul_reference(float* out, const float* x, const WeightMatrix& w, const float* bias,
                      int n_rows);

}  // namespace kvlm
