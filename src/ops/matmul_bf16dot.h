// BF16-weight matrix products on AVX-512 BF16 (vdpbf16ps): two bf16 products per fp32 lane
// per instruction, twice the fp32 fma rate of the same vector width, so prefill with BF16
// weights runs about twice as fast as the widening kernels of matmul_simd.cpp.
//
// When it runs: on a CPU with AVX512_BF16 while the kernels dispatch to an AVX-512 target
// (bf16_dot_active()), EVERY BF16 matmul goes through it, decode and prefill alike, whatever
// the row count. Cached == uncached and batch invariance need that: a kernel chosen by row
// count would give a token different bits in a prefill than in a decode step. Pinning a
// narrower target (pin_simd_target, tests) turns it off; other machines never use it. Where the
// CPU also has AMX, AMX takes every one of these matmuls instead, by the same rule
// (matmul_bf16amx.h; KVLM_AMX=0 brings them back here).
//
// Numerics (what the scalar reference matmul_bf16dot_reference computes, bit for bit):
//   * each x value is rounded to bf16 as VCVTNEPS2BF16 does: to nearest even, a denormal to a
//     zero of its sign, a NaN stays NaN (bf16_dot_round);
//   * dot2(acc, x0, x1, w0, w1) is one lane of vdpbf16ps: acc = fma(x1, w1, acc), then
//     acc = fma(x0, w0, acc), each rounded to nearest even, denormal inputs (acc and weights)
//     read as zero and a denormal result flushed to zero (measured equal to the instruction on
//     Zen 5 over 10^7 random lanes, denormal and overflowing ranges included; Intel's manual
//     states the same order). A bf16 product is exact in fp32, so away from denormals each
//     step is one fused multiply-add.
//   * kInOut (W [I, O]): per output o, acc = 0; for p in 0..ceil(I/2)-1:
//       acc = dot2(acc, x[2p], x[2p+1], W[2p][o], W[2p+1][o])   (x, W past I read as 0)
//     out = acc + bias[o].
//   * kOutIn (W [O, I]): 16 lanes, lane l a chain over chunks c = 0..ceil(I/32)-1 of
//       s[l] = dot2(s[l], x[32c+2l], x[32c+2l+1], W[o][32c+2l], W[o][32c+2l+1])   (past I: 0)
//     then t[l] = s[l] + s[l+8], u[l] = t[l] + t[l+4], (u[0] + u[2]) + (u[1] + u[3]);
//     out = that + bias[o].
// These orders depend only on I, never on the row count, the column block, the variant or the
// thread count: the exactness contract of ops/matmul.h holds with this order in place of the
// widening one. Against the fp32 product of the same bf16 weights, the only extra error is
// x's rounding to bf16 (at most 2^-8 relative per element): docs/performance.md gives the measured
// agreement.
#pragma once

#include <cstdint>

#include "ops/matmul_internal.h"

namespace kvlm {

// True when this CPU has AVX512_BF16 (and the OS saves AVX-512 state).
bool cpu_has_avx512_bf16();

// True when matmul_forward sends BF16 weights here: the CPU has AVX512_BF16, the kernels
// dispatch to an AVX-512 target now, and set_bf16_dot_enabled(false) was not called.
bool bf16_dot_active();

// Turns the path off (false) or back on for the whole process: BF16 weights then go through
// the widening kernels, whose fp32 activations agree with F32 more closely (docs/performance.md).
// `kvlm` calls it for KVLM_BF16_DOT=0. Not thread-safe: call it while no kernel is running.
void set_bf16_dot_enabled(bool enabled);

// out [T, O] = x [T, I] @ W + bias, W BF16 (either layout), in the order stated above.
// Requires cpu_has_avx512_bf16(). `path` picks the kInOut variant (kRowStream: few rows,
// weights read in place; kTiled: packed panels and 8-row register tiles; kAuto: by row count);
// every variant gives the same bits.
void matmul_bf16dot_forward(float* out, const float* x, const WeightMatrix& w, const float* bias,
                            int n_rows, const Parallel& par, MatmulPath path);

// The output head's pairs for batched decode (WeightMatrix::strips of a BF16 [n_out, n_in]
// matrix): strips of 16 outputs, and in each, lane class l's pairs chunk by chunk, so that lane
// l's chain above is one vdpbf16ps chain over 16 outputs at once:
//   strips[((s * 16 + l) * C + c) * 32 + 2n + e] = W[16 s + n][32 c + 2 l + e], C = ceil(n_in/32),
// 0 past the matrix. Strips split over n_threads threads.
size_t bf16dot_head_strips_size(const WeightMatrix& w);
void pack_bf16dot_head_strips(uint16_t* strips, const WeightMatrix& w, int n_threads);

// The scalar model of those numerics: bitwise what matmul_bf16dot_forward computes, on any CPU.
void matmul_bf16dot_reference(float* out, const float* x, const WeightMatrix& w, const float* bias,
                              int n_rows);

// x rounded to bf16 as VCVTNEPS2BF16 rounds it (the bits of the bf16 value).
uint16_t bf16_dot_round(float x);

// One lane of vdpbf16ps: acc + x1 * w1, then + x0 * w0 (arguments are bf16 bits).
float bf16_dot2(float acc, uint16_t x0, uint16_t x1, uint16_t w0, uint16_t w1);

// What the bf16 units (vdpbf16ps, AMX tiles) do with denormals, for the scalar models: read a
// denormal input as a zero of its sign, flush a denormal result to one.
float flush_denormal(float f);
// A bf16 value (its bits) as those units read it.
float bf16_unit_value(uint16_t h);

}  // namespace kvlm
