// BF16-weight matrix products on Intel AMX (TDPBF16PS): a 16 x 16 fp32 tile takes 16 x 16 x 32
// bf16 products per instruction, 8x the multiply-adds per cycle of vdpbf16ps, so prefill with BF16
// weights is bound by everything but the matrix products.
//
// When it runs: where bf16_dot_active() (ops/matmul_bf16dot.h) holds and the CPU has AMX-TILE
// and AMX-BF16 and Linux granted the process the tile state, EVERY BF16 matmul goes through it,
// decode and prefill alike, whatever the row count; set_bf16_amx_enabled(false) (`kvlm`:
// KVLM_AMX=0) sends them back to vdpbf16ps. AMX rounds differently from the vdpbf16ps chain, so a
// choice by row count would break cached == uncached; the choice is by machine and switch only.
//
// Numerics (what matmul_bf16amx_reference computes):
//   * x rounded to bf16 as vdpbf16ps's path does (bf16_dot_round: nearest even, denormals to
//     zero); x and W past n_in read as +0;
//   * per output, C = +0, then for each 32-element chunk c = 0..ceil(I/32)-1 in increasing order:
//       C = C + fl(sum over the chunk's 32 products x[k] * W[k])
//     where the chunk's sum is formed exactly and rounded once to fp32 (nearest even), and the add
//     is one fp32 add (nearest even); denormal inputs read as zero, denormal results flush to
//     zero; out = C + bias[o].
//   That is the hardware bit for bit where the values' exponents stay close (measured on a
//   Sapphire Rapids class Xeon: every output of ~10^5 with |x|, |w| in [0.5, 2), any size; the
//   tests repeat it). Where they spread (normal values, sd 0.5) about 0.5% of single-chunk outputs
//   differ from it by one ulp: the unit does not form the chunk's sum exactly (nor in fp32 order,
//   nor as fp32 pairs; measured). Exactness does not rest on the model: each output is a function
//   of its own row of x, its column of W and I only (not of the row count, the tile it sits in or
//   the thread count), because every variant runs the same chunks in the same order from zero and
//   the unit computes each tile element independently (tested bitwise on normal values).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/matmul_internal.h"

namespace kvlm {

// True when this CPU has AMX-TILE and AMX-BF16, the OS enables the tile state and Linux granted
// this process permission to use it (asked once, on the first call).
bool cpu_has_amx_bf16();

// True when matmul_forward sends BF16 weights here: bf16_dot_active(), cpu_has_amx_bf16() and
// not switched off.
bool bf16_amx_active();

// Turns AMX off (false: BF16 goes back to vdpbf16ps) or on for the whole process. `kvlm` calls
// it for KVLM_AMX=0. Not thread-safe: call it while no kernel is running.
void set_bf16_amx_enabled(bool enabled);

// out [T, O] = x [T, I] @ W + bias, W BF16 (either layout), numerics as stated above. Requires
// cpu_has_amx_bf16().
void matmul_bf16amx_forward(float* out, const float* x, const WeightMatrix& w, const float* bias,
                            int n_rows, const Parallel& par);

// The weight tiles of a BF16 kInOut matrix, for WeightMatrix::amx_tiles: 16-column strips
// s = 0..ceil(O/16)-1, each the tiles of its 32-row chunks q = 0..ceil(I/32)-1 in order, tile
// (s, q) the 512 values at ((s * ceil(I/32) + q) * 16 + kk) * 32 + 2n + e = W[32q + 2kk + e]
// [16s + n] (0 past the matrix). One strip's tiles are one contiguous stream, which is how decode
// reads them. `tiles` holds bf16amx_tiles_size(w) values; rows of strips split over threads.
size_t bf16amx_tiles_size(const WeightMatrix& w);
void pack_bf16amx_tiles(uint16_t* tiles, const WeightMatrix& w, int n_threads);

// The scalar model of those numerics (bitwise the hardware on ordinary exponent ranges).
void matmul_bf16amx_reference(float* out, const float* x, const WeightMatrix& w, const float* bias,
                              int n_rows);

}  // namespace kvlm
