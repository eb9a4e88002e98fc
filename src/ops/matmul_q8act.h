// Matmul over block weights (Q8_0, Q5_0, Q4_0, Q6_K, Q4_K) with 8-bit activations and integer
// dot products, as llama.cpp runs them (its vec_dot with Q8_0 / Q8_K activations): each
// activation row is quantized to int8 per block, the weights stay in their blocks, and the
// products of a block are summed in int32 (vpdpbusd on AVX512-VNNI, maddubs + madd on AVX2,
// plain C++ in the scalar reference). matmul_quant_forward hands these types over; not part of
// the ops API.
//
// Numerics (every target gives the scalar reference's bits; integer sums are exact, so only
// the float combination has an order, and it is fixed here):
//
//   Activations, per row, per activation block of L values (L = 32 for Q8_0, Q4_0 and Q5_0,
//   256 for Q4_K and Q6_K, as ggml's Q8_0 and Q8_K): amax = max |x|, d = amax / 127,
//   id = d != 0 ? 1 / d : 0, q = round-to-nearest-even(x * id) in [-127, 127]. (ggml's
//   quantize_row_q8_0 with d kept in fp32 and ties to even; for 256 the same rule, where
//   ggml's Q8_K keeps the sign of the largest value in d.)
//
//   32-value blocks (weights w_i, scale dw per 32: Q8_0 w_i = the int8 q_i, -128..127; Q4_0
//   w_i = nibble_i - 8; Q5_0 w_i = (nibble_i | fifth bit_i << 4) - 16): block b of a row has
//   8 partial sums P_{b,p} = sum_{i = 4p .. 4p + 3} w_i * q_i (int32, exact); 16 float chains,
//   lane l = 8 * (b % 2) + p, each s_l = fma(fl(dw_b * d_b), float(P_{b,p}), s_l) over the
//   blocks in increasing b from +0; then t[l] = s[l] + s[l+8], u[l] = t[l] + t[l+4],
//   v[l] = u[l] + u[l+2], v[0] + v[1] (matmul.h's kOutIn reduction); out = that + bias.
//   So one zmm holds two blocks' 8 partials each, an AVX2 kernel two ymm chains (even and odd
//   blocks), and the reference 16 floats.
//
//   Q4_K and Q6_K (256-value blocks b, one activation scale d_b per block): a whole block is
//   summed in integers, 8 lanes k = 0..7 holding the values i of the block with (i / 4) % 8 = k:
//     I_{b,k} = sum of sc_i * w_i * q_i, exact in int32 (|I| < 2^24, so float(I) is exact too);
//     Q4_K: w_i = nibble (0..15), sc_i = the 6-bit scale of sub-block i / 32, and the mins
//           M_{b,k} = m_k * sum_{i in sub-block k} q_i (lane k = sub-block k);
//     Q6_K: w_i = q6_i - 32, sc_i = the int8 scale of values i / 16.
//   8 float chains from +0, over the blocks in increasing b:
//     s_k = fma(fl(dw_b * d_b), float(I_{b,k}), s_k), then for Q4_K
//     s_k = fma(-fl(dmin_b * d_b), float(M_{b,k}), s_k);
//   then u[k] = s[k] + s[k+4], v[k] = u[k] + u[k+2], v[0] + v[1] (the 8-lane tail of the
//   reduction above); out = that + bias. A zmm's 16 int32 lanes over 64 values fold onto the 8
//   (lane l and l + 8 hold the same k), an AVX2 ymm over 32 values is them directly.
//
// The order depends only on n_in: the same at any row count (prefill uses it too, so cached ==
// uncached), tile shape, batch position or thread count.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/matmul.h"

namespace kvlm {

// Whether matmul_forward runs `type` through these kernels.
bool q8act_kernel_handles(DType type);

// out [T, O] = x [T, I] @ W + bias, W kOutIn of a type q8act_kernel_handles, I whole blocks.
void matmul_q8act_forward(float* out, const float* x, const WeightMatrix& w, const float* bias,
                          int n_rows, const Parallel& par);

// The scalar reference of the numerics above (one thread, no SIMD), what the tests compare
// every target with bitwise.
void matmul_q8act_reference(float* out, const float* x, const WeightMatrix& w, const float* bias,
                            int n_rows);

// One activation row x [n] quantized for weight type `type` as matmul_q8act_forward does it on
// the active SIMD target: q [n], d [n / L], off4 [n / 4] (Q4_0, Q5_0, Q8_0, Q6_K), sum32
// [n / 32] (Q4_K). n whole activation blocks.
void quantize_activation_row(DType type, const float* x, size_t n, int8_t* q, float* d,
                             int32_t* off4, int32_t* sum32);
// The scalar definition of the same, whose bytes every target gives.
void quantize_activation_row_reference(DType type, const float* x, size_t n, int8_t* q, float* d,
                                       int32_t* off4, int32_t* sum32);

// x's rows quantized for a weight type (the activation block and the integer sums its kernel
// needs). The scalar definition every kernel reads.
struct Q8Rows {
  const int8_t* q = nullptr;       // [T, I]
  const float* d = nullptr;        // [T, I / L]: one scale per activation block
  const int32_t* off4 = nullptr;   // [T, I / 4]: -offset * (sum of 4 consecutive q): Q4_0's 8,
                                   // Q5_0's 16, Q6_K's 32, Q8_0's 128
  const int32_t* sum32 = nullptr;  // [T, I / 32]: sum of each 32 q (Q4_K's mins)
  size_t n_in = 0;
  size_t block = 0;  // L
};

}  // namespace kvlm
