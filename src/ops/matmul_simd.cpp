// SIMD matmul kernels, compiled once per Highway target (foreach_target.h re-includes this
// file) and dispatched at run time. Every variant keeps the per-output reduction order that
// matmul.h states, so which variant runs, how many rows it takes at once and how the outputs
// are split over threads never change a bit of the result.
//
// kInOut ([I, O], GPT-2's Conv1D), two variants, each a chain acc = fma(x[i], W[i][o], acc)
// in increasing i, vectorised across o:
//   row stream: each thread owns a contiguous range of columns and reads the weight rows
//     W[i][range] in order, with the accumulators of up to 8 rows in an L1 buffer (from 3 rows
//     on, register tiles of them run 32 weight rows at a time). Every weight byte crosses the
//     memory bus once: the decode kernel.
//   tiled: register tiles of 4 rows x 3 vectors (8 rows on 32-register targets) over packed
//     cache blocks, each weight vector feeding 4 (8) rows: the prefill kernel.
// kOutIn ([O, I], the output head and nn.Linear), two variants in the 16-lane order:
//   dot tiles (matmul_outin-inl.h): 16-lane dot products over contiguous rows, several outputs
//     (and rows) per tile so that independent chains hide the fma latency: the decode kernel.
//   lane-class register tiles (matmul_outin_tiled-inl.h): each lane's chains as a matrix product
//     on the tile kernel above, the 16 lanes added by the same tree at the end: the prefill
//     kernel (GPT-2 124M shapes at 128 rows, AVX2: 1.2-2.7x faster than the dot tiles; over the
//     four layer shapes as fast as kInOut's tiled kernel, 0.97-0.99x the time).
// Weights packed at load as column strips (ops/weight_strips.h): decode and prefill run the row
// stream's register tiles over them (matmul_strips-inl.h: 8 rows at a time).
//
// A run_team job here (a lambda) only calls a HWY_NOINLINE function of this target: clang
// (14 at least) compiles a lambda's body without the target attributes Highway puts on this
// namespace, as it did OpenMP's outlined regions, so SIMD code written inside one would be built
// for baseline x86-64 (F16 widening became one libcall, __gnu_h2f_ieee, per element, and clang
// builds failed to link).
#include <algorithm>
#include <type_traits>

#include "ops/matmul_internal.h"
#include "ops/prefetch.h"

// Highway: simd_targets.h before any hwy header, then foreach_target.h re-includes this
// file once per target (HWY_TARGET_INCLUDE).
// clang-format off
#include "ops/simd_targets.h"
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/matmul_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format on
#include "hwy/cache_control.h"
#include "ops/matmul_bf16amx.h"
#include "ops/matmul_bf16dot.h"
#include "ops/matmul_outin-inl.h"
#include "ops/matmul_outin_tiled-inl.h"
#include "ops/matmul_register_tile-inl.h"
#include "ops/matmul_stream_tile-inl.h"
#include "ops/matmul_strips-inl.h"
#include "ops/simd_weights-inl.h"
#include "ops/thread_team.h"

HWY_BEFORE_NAMESPACE();
namespace kvlm {
namespace HWY_NAMESPACE {
namespace {

// ---------------------------------------------------------------------------------------------
// kInOut, tiled (prefill): blocks of rows x columns x reduction sized for the caches, with the
// x rows and the weight panel packed (and widened) into contiguous buffers, and a register tile
// of kTileRows x kTileVecs vectors that continues each output's fma chain block after block
// (a chain stored to `out` and loaded back is the same chain).

// Block sizes, tuned on GPT-2 124M's prefill (Zen 3, AVX2): the packed x block (rows x steps,
// 216 KB) stays in L2, the weight panel (steps x kTileCols, 36 KB) in L1 and L2. Both live on
// the thread's stack (run_team's workers get the default thread stack, 8 MB on Linux).
constexpr size_t kBlockK = 384;     // reduction steps per block
constexpr size_t kBlockRows = 144;  // rows per block
static_assert(kBlockRows % kTileRows == 0, "row blocks are whole tiles");
constexpr size_t kDirectRows = 16;  // up to this many rows, tiles read the weights in place

// a [n_tiles][kc][kTileRows] = x[r0 + row][k0 + k], rows past `rows` zero.
void PackRows(float* HWY_RESTRICT a, const float* HWY_RESTRICT x, size_t n_in, size_t rows,
              size_t k0, size_t kc) {
  for (size_t t = 0; t * kTileRows < rows; ++t) {
    float* tile = a + t * kc * kTileRows;
    for (size_t r = 0; r < kTileRows; ++r) {
      const size_t row = t * kTileRows + r;
      const float* src = x + row * n_in + k0;
      if (row < rows) {
        for (size_t k = 0; k < kc; ++k) tile[k * kTileRows + r] = src[k];
      } else {
        for (size_t k = 0; k < kc; ++k) tile[k * kTileRows + r] = 0.0f;
      }
    }
  }
}

// p [kc][kTileCols] = W[k0 + k][col + c] widened to fp32, columns past n_cols zero.
template <typename WT>
void PackPanel(float* HWY_RESTRICT p, const WT* HWY_RESTRICT w, size_t n_out, size_t k0, size_t kc,
               size_t col, size_t n_cols) {
  const DF df;
  for (size_t k = 0; k < kc; ++k) {
    const WT* src = w + (k0 + k) * n_out + col;
    float* dst = p + k * kTileCols;
    // The next strip's part of this weight row: fetched now, packed after this strip's tiles.
    hwy::Prefetch(src + kTileCols);
    for (size_t v = 0; v < kTileVecs; ++v) {
      const size_t c = v * kN;
      const VF wv = c + kN <= n_cols ? LoadWeights(df, src + c)
                    : c < n_cols     ? LoadWeightsN(df, src + c, n_cols - c)
                                     : hn::Zero(df);
      hn::Store(wv, df, dst + c);
    }
  }
}

// Thread t of nt: a contiguous range of column strips, the whole loop nest on its own.
template <typename WT>
HWY_NOINLINE void InOutTiledThread(float* out, const float* x, const WT* w, const float* bias,
                                   size_t n_rows, size_t n_in, size_t n_out, size_t t, size_t nt) {
  const size_t n_strips = (n_out + kTileCols - 1) / kTileCols;
  {
    const size_t s0 = n_strips * t / nt, s1 = n_strips * (t + 1) / nt;
    HWY_ALIGN float a[kBlockRows * kBlockK];
    HWY_ALIGN float p[kBlockK * kTileCols];
    for (size_t r0 = 0; r0 < n_rows && s0 < s1; r0 += kBlockRows) {
      const size_t rows = std::min(kBlockRows, n_rows - r0);
      // n_in == 0 still takes one (empty) block, which stores the bias.
      for (size_t k0 = 0; k0 < n_in || k0 == 0; k0 += kBlockK) {
        const size_t kc = std::min(kBlockK, n_in - k0);
        const bool first = k0 == 0, last = k0 + kBlockK >= n_in;
        PackRows(a, x + r0 * n_in, n_in, rows, k0, kc);
        for (size_t s = s0; s < s1; ++s) {
          const size_t col = s * kTileCols, n_cols = std::min(kTileCols, n_out - col);
          // With few rows each weight feeds too few fmas to pay for packing it.
          const bool direct = n_rows <= kDirectRows && n_cols == kTileCols;
          if (!direct) PackPanel(p, w, n_out, k0, kc, col, n_cols);
          for (size_t tr = 0; tr < rows; tr += kTileRows) {
            float* o = out + (r0 + tr) * n_out;
            const size_t tile_rows = std::min<size_t>(kTileRows, rows - tr);
            if (direct) {
              TileKernel(o, n_out, a + tr * kc, w + k0 * n_out + col, n_out, kc, bias, first, last,
                         tile_rows, col, n_cols);
            } else {
              TileKernel(o, n_out, a + tr * kc, p, kTileCols, kc, bias, first, last, tile_rows, col,
                         n_cols);
            }
          }
        }
        if (n_in == 0) break;
      }
    }
  }
}

template <typename WT>
void InOutTiled(float* out, const float* x, const WT* w, const float* bias, size_t n_rows,
                size_t n_in, size_t n_out, int n_threads) {
  run_team(n_threads,
           [&](int t, int nt) { InOutTiledThread(out, x, w, bias, n_rows, n_in, n_out, t, nt); });
}

// ---------------------------------------------------------------------------------------------
// kInOut, row stream: columns [c0, c1) of R rows, in chunks whose accumulators fit in L1.

constexpr size_t kStreamAccFloats = 2048;  // 8 KB of accumulators
constexpr int kStreamMaxRows = 8;

constexpr size_t kStreamBlockI = 256;  // x values packed per block: [kStreamBlockI][R]

// Few rows: the R x kIU broadcasts of x live in registers. More rows of 16-bit weights: x is
// packed already broadcast, one whole vector per value, and each fma takes its x vector from
// L1. (Broadcast at each use instead, compilers kept the values in xmm registers and spent a
// shuffle on every broadcast: F16 batch-8 decode went 25.4 -> 22.6 ms a step on one thread
// with the packing.) fp32 weights keep the broadcast at each use: their loads already fill the
// load ports, and the packing made F32 batch 8 5% slower (29.9 -> 31.5 ms).
template <int R, int kIU>
constexpr bool kStreamHoistX = R* kIU <= 8;
template <int R, int kIU, typename WT>
constexpr size_t kStreamXStride = kStreamHoistX<R, kIU> || sizeof(WT) == 4 ? 1 : kN;

// One step of the reduction over kIU consecutive weight rows for `nv` full vectors and, when
// n_tail > 0, one partial vector after them. The kIU fmas into an accumulator run in i order.
// x is packed [k][R] (kXStride 1) or [k][R][kN] broadcast (kXStride kN): rows of x sit a
// multiple of 4 KB apart for common widths and would fight over the same L1 sets.
template <int R, int kIU, size_t kXStride, typename WT>
HWY_INLINE void InOutStreamStep(float* acc, size_t acc_stride, const float* x,
                                const WT* HWY_RESTRICT wrow, size_t n_out, size_t nv,
                                size_t n_tail) {
  const DF df;
  constexpr bool kHoist = kStreamHoistX<R, kIU>;
  VF xb[kHoist ? R : 1][kIU];
  if constexpr (kHoist) {
    for (int r = 0; r < R; ++r)
      for (int k = 0; k < kIU; ++k) xb[r][k] = hn::Set(df, x[(k * R + r) * kXStride]);
  }
  auto update = [&](size_t v, const VF(&wv)[kIU]) HWY_ATTR {
    for (int r = 0; r < R; ++r) {
      float* a = acc + r * acc_stride + v * kN;
      VF sum = hn::Load(df, a);
      for (int k = 0; k < kIU; ++k) {
        const VF xv = kHoist          ? xb[kHoist ? r : 0][k]
                      : kXStride == 1 ? hn::Set(df, x[k * R + r])
                                      : hn::Load(df, x + (k * R + r) * kXStride);
        sum = hn::MulAdd(xv, wv[k], sum);
      }
      hn::Store(sum, df, a);
    }
  };
  // Weight rows two steps ahead are fetched now, one prefetch per cache line.
  constexpr size_t kVecsPerLine = std::max<size_t>(1, 64 / (kN * sizeof(WT)));
  for (size_t v = 0; v < nv; ++v) {
    if (v % kVecsPerLine == 0)
      for (int k = 0; k < kIU; ++k) PrefetchToL2(wrow + (2 * kIU + k) * n_out + v * kN);
    VF wv[kIU];
    for (int k = 0; k < kIU; ++k) wv[k] = LoadWeights(df, wrow + k * n_out + v * kN);
    update(v, wv);
  }
  if (n_tail) {
    VF wv[kIU];
    for (int k = 0; k < kIU; ++k) wv[k] = LoadWeightsN(df, wrow + k * n_out + nv * kN, n_tail);
    update(nv, wv);
  }
}

template <int R, typename WT>
void InOutStreamRange(float* out, const float* x, const WT* w, const float* bias, size_t n_in,
                      size_t n_out, size_t c0, size_t c1) {
  // Four weight rows per pass: a quarter of the accumulator loads and stores.
  constexpr int kIU = 4;
  // x packed broadcast takes kN floats a value: fewer values per block (16 KB at 8 rows).
  constexpr size_t kXStride = kStreamXStride<R, kIU, WT>;
  constexpr size_t kBlockI = kXStride == 1 ? kStreamBlockI : 32;
  const DF df;
  HWY_ALIGN float acc[kStreamAccFloats];
  HWY_ALIGN float xp[kBlockI * R * kXStride];
  const size_t chunk = std::max(kN, kStreamAccFloats / R / kN * kN);
  for (size_t cb = c0; cb < c1; cb += chunk) {
    const size_t nc = std::min(chunk, c1 - cb);
    const size_t nv = nc / kN, n_tail = nc % kN;
    const size_t stride = (nv + (n_tail ? 1 : 0)) * kN;
    for (size_t k = 0; k < R * stride; k += kN) hn::Store(hn::Zero(df), df, acc + k);
    for (size_t i0 = 0; i0 < n_in; i0 += kBlockI) {
      const size_t ib = std::min(kBlockI, n_in - i0);
      for (size_t k = 0; k < ib; ++k) {
        for (int r = 0; r < R; ++r) {
          float* to = xp + (k * R + r) * kXStride;
          if constexpr (kXStride == 1) {
            *to = x[r * n_in + i0 + k];
          } else {
            hn::Store(hn::Set(df, x[r * n_in + i0 + k]), df, to);
          }
        }
      }
      size_t k = 0;
      for (; k + kIU <= ib; k += kIU)
        InOutStreamStep<R, kIU, kXStride>(acc, stride, xp + k * R * kXStride,
                                          w + (i0 + k) * n_out + cb, n_out, nv, n_tail);
      for (; k < ib; ++k)
        InOutStreamStep<R, 1, kXStride>(acc, stride, xp + k * R * kXStride,
                                        w + (i0 + k) * n_out + cb, n_out, nv, n_tail);
    }
    for (int r = 0; r < R; ++r) {
      for (size_t v = 0; v * kN < nc; ++v) {
        const size_t col = cb + v * kN;
        const size_t n = std::min(kN, c1 - col);
        StoreOutputs(df, hn::Load(df, acc + r * stride + v * kN), bias ? bias + col : nullptr,
                     out + r * n_out + col, n);
      }
    }
  }
}

// Row stream with register tiles (3..8 rows): InOutRegTile (matmul_stream_tile-inl.h) over each
// chunk of columns, rows of the matrix as stored.
// Rows [0, RP) over a chunk of nv full vectors and n_tail more lanes: tiles of NV vectors, then
// single vectors for what is left.
template <int RP, int NV, int R, typename WT>
HWY_INLINE void InOutRegPass(float* acc, size_t acc_stride, const float* xp, const WT* w,
                             size_t n_out, size_t kb, size_t nv, size_t n_tail, const WT* ahead) {
  size_t v = 0;
  for (; v + NV <= nv; v += NV)
    InOutRegTile<RP, NV, R>(acc + v * kN, acc_stride, xp, w + v * kN, n_out, kb, kN,
                            ahead ? ahead + v * kN : static_cast<const WT*>(nullptr));
  for (; v < nv; ++v)
    InOutRegTile<RP, 1, R>(acc + v * kN, acc_stride, xp, w + v * kN, n_out, kb, kN,
                           ahead ? ahead + v * kN : static_cast<const WT*>(nullptr));
  if (n_tail)
    InOutRegTile<RP, 1, R>(acc + nv * kN, acc_stride, xp, w + nv * kN, n_out, kb, n_tail,
                           ahead ? ahead + nv * kN : static_cast<const WT*>(nullptr));
}

template <int R, typename WT>
void InOutStreamRegRange(float* out, const float* x, const WT* w, const float* bias, size_t n_in,
                         size_t n_out, size_t c0, size_t c1) {
  constexpr int RP = kRegPassRows<R>, NV = kRegTileVecs<R>;
  const DF df;
  HWY_ALIGN float acc[kStreamAccFloats];
  HWY_ALIGN float xp[kStreamBlockI * R];
  // Whole tiles of NV vectors per chunk where the accumulators allow.
  const size_t chunk = std::max(NV * kN, kStreamAccFloats / R / (NV * kN) * (NV * kN));
  for (size_t cb = c0; cb < c1; cb += chunk) {
    const size_t nc = std::min(chunk, c1 - cb);
    const size_t nv = nc / kN, n_tail = nc % kN;
    const size_t stride = (nv + (n_tail ? 1 : 0)) * kN;
    for (size_t k = 0; k < R * stride; k += kN) hn::Store(hn::Zero(df), df, acc + k);
    for (size_t i0 = 0; i0 < n_in; i0 += kStreamBlockI) {
      const size_t ib = std::min(kStreamBlockI, n_in - i0);
      for (size_t k = 0; k < ib; ++k)
        for (int r = 0; r < R; ++r) xp[k * R + r] = x[r * n_in + i0 + k];
      for (size_t k0 = 0; k0 < ib; k0 += kTileI) {
        const size_t kb = std::min(kTileI, ib - k0), i = i0 + k0;
        const WT* wt = w + i * n_out + cb;
        // The next tile's rows, or the next chunk's first rows after the last tile.
        const WT* ahead = i + kb < n_in     ? wt + kb * n_out
                          : cb + chunk < c1 ? w + cb + chunk
                                            : static_cast<const WT*>(nullptr);
        InOutRegPass<RP, NV, R>(acc, stride, xp + k0 * R, wt, n_out, kb, nv, n_tail, ahead);
        if constexpr (RP < R)
          InOutRegPass<R - RP, NV, R>(acc + RP * stride, stride, xp + k0 * R + RP, wt, n_out, kb,
                                      nv, n_tail, static_cast<const WT*>(nullptr));
      }
    }
    for (int r = 0; r < R; ++r) {
      for (size_t v = 0; v * kN < nc; ++v) {
        const size_t col = cb + v * kN;
        const size_t n = std::min(kN, c1 - col);
        StoreOutputs(df, hn::Load(df, acc + r * stride + v * kN), bias ? bias + col : nullptr,
                     out + r * n_out + col, n);
      }
    }
  }
}

// Which row-stream kernel a row count takes: register tiles from this many rows.
constexpr int kStreamRegMinRows = 3;

template <int R, typename WT>
HWY_INLINE void InOutStreamRows(float* out, const float* x, const WT* w, const float* bias,
                                size_t n_in, size_t n_out, size_t c0, size_t c1) {
  if constexpr (R >= kStreamRegMinRows) {
    InOutStreamRegRange<R>(out, x, w, bias, n_in, n_out, c0, c1);
  } else {
    InOutStreamRange<R>(out, x, w, bias, n_in, n_out, c0, c1);
  }
}

// Thread t of nt: one contiguous range of whole vectors, so its weight reads are sequential.
template <typename WT>
HWY_NOINLINE void InOutStreamThread(float* out, const float* x, const WT* w, const float* bias,
                                    size_t n_rows, size_t n_in, size_t n_out, size_t t, size_t nt) {
  const size_t n_vecs = (n_out + kN - 1) / kN;
  {
    const size_t c0 = n_vecs * t / nt * kN;
    const size_t c1 = std::min(n_out, n_vecs * (t + 1) / nt * kN);
    for (size_t r = 0; r < n_rows && c0 < c1; r += kStreamMaxRows) {
      float* o = out + r * n_out;
      const float* xr = x + r * n_in;
      switch (std::min<size_t>(kStreamMaxRows, n_rows - r)) {
        case 1:
          InOutStreamRows<1>(o, xr, w, bias, n_in, n_out, c0, c1);
          break;
        case 2:
          InOutStreamRows<2>(o, xr, w, bias, n_in, n_out, c0, c1);
          break;
        case 3:
          InOutStreamRows<3>(o, xr, w, bias, n_in, n_out, c0, c1);
          break;
        case 4:
          InOutStreamRows<4>(o, xr, w, bias, n_in, n_out, c0, c1);
          break;
        case 5:
          InOutStreamRows<5>(o, xr, w, bias, n_in, n_out, c0, c1);
          break;
        case 6:
          InOutStreamRows<6>(o, xr, w, bias, n_in, n_out, c0, c1);
          break;
        case 7:
          InOutStreamRows<7>(o, xr, w, bias, n_in, n_out, c0, c1);
          break;
        default:
          InOutStreamRows<8>(o, xr, w, bias, n_in, n_out, c0, c1);
          break;
      }
    }
  }
}

template <typename WT>
void InOutStream(float* out, const float* x, const WT* w, const float* bias, size_t n_rows,
                 size_t n_in, size_t n_out, int n_threads) {
  run_team(n_threads,
           [&](int t, int nt) { InOutStreamThread(out, x, w, bias, n_rows, n_in, n_out, t, nt); });
}
static_assert(kStreamMaxRows == 8, "InOutStream's switch covers 1..8 rows");

// ---------------------------------------------------------------------------------------------
// kOutIn: the 16-lane dot-product tiles of matmul_outin-inl.h.

// Several rows (batched decode's output head, nn.Linear prefill): on 32-register targets with
// one vector per 16 lanes, tiles of 4 outputs x 4 rows (16 accumulators) where
// matmul_outin-inl.h's kDotOutsN gives 2 x 4: per 16-element step 8 loads for 16 fmas instead
// of 6 for 8, each F16 weight vector widened once for 4 rows. GPT-2 124M shape, batch-8 decode
// at 2 threads, interleaved rounds in one process: 0.88x the step time (F16), 0.85x (F32);
// 6 x 4 and 4 x 6 tiles were no better, 2 x 8 no faster than 2 x 4. The tile shape never
// changes an output's chain, so the bits are the same.
// On AVX2 (16 registers, two vectors per 16 lanes) 16-bit weights take 3 outputs x 2 rows:
// kDotOutsN x kDotRowsN's 2 x 3 holds 12 accumulators, 3 x vectors and a widened weight, all 16
// registers, and the compiler then folded the x loads into the fmas (perf annotate: 16 loads
// for 12 fmas); 3 x 2 leaves a register free and loads 10. The 50,257 x 768 head, F16, 8 rows,
// 2 threads (kernels_bench BM_Matmul/4/8/1/2/0, 6 interleaved pairs): 7.0-10.4 ms -> 6.4-7.7 ms.
// F32 weights, which the fmas read straight from memory, stay at 2 x 3 (3 x 2 was 5-33% slower).
template <typename WT>
constexpr bool kOutInAvx2Narrow = kVecRegs == 16 && kDotVecs == 2 && sizeof(WT) == 2;
template <typename WT>
constexpr int kOutInOutsN = kVecRegs == 32 && kDotVecs == 1 ? 4
                            : kOutInAvx2Narrow<WT>          ? 3
                                                            : kDotOutsN;
template <typename WT>
constexpr int kOutInRowsN = kOutInAvx2Narrow<WT> ? 2 : kDotRowsN;

// Output tile t: outputs [t * RO, t * RO + RO) for all rows (fewer at the end).
template <int RO, int RR, typename WT>
HWY_NOINLINE void OutInOutputTile(float* out, const float* x, const WT* w, const float* bias,
                                  size_t n_rows, size_t n_in, size_t n_out, size_t t) {
  const size_t o0 = t * RO;
  if (o0 + RO <= n_out) {
    OutInOutputs<RO, RR>(out + o0, x, w + o0 * n_in, bias ? bias + o0 : nullptr, n_rows, n_in,
                         n_out);
    return;
  }
  for (size_t o = o0; o < n_out; ++o)
    OutInOutputs<1, RR>(out + o, x, w + o * n_in, bias ? bias + o : nullptr, n_rows, n_in, n_out);
}

// RR rows (x, out already offset to the first) against output tiles [t0, t1).
template <int RO, int RR, typename WT>
HWY_INLINE void OutInRowsOverTiles(float* out, const float* x, const WT* w, const float* bias,
                                   size_t n_in, size_t n_out, size_t t0, size_t t1) {
  for (size_t t = t0; t < t1; ++t) {
    const size_t o0 = t * RO;
    if (o0 + RO <= n_out) {
      OutInTile<RO, RR>(out + o0, x, w + o0 * n_in, bias ? bias + o0 : nullptr, n_in, n_out);
      continue;
    }
    for (size_t o = o0; o < n_out; ++o)
      OutInTile<1, RR>(out + o, x, w + o * n_in, bias ? bias + o : nullptr, n_in, n_out);
  }
}

// Many rows through the dot tiles (MatmulPath::kRowStream forced; kAuto takes the lane-class
// tiles): output tiles [t0, t1), whose weights stay in L2, for all rows, each group of RR
// rows passing over every tile of the block while its activations sit in L1. Tile by tile
// over all rows (OutInOutputTile) streams the whole activation matrix once per 4 outputs, from
// L3 or memory once it outgrows L2 (512 rows of GPT-2's 3,072-wide MLP input: 6 MB, 192 times
// for one matrix). Each output's chain is the same whichever rows and tiles go together.
template <int RO, int RR, typename WT>
HWY_NOINLINE void OutInOutputBlock(float* out, const float* x, const WT* w, const float* bias,
                                   size_t n_rows, size_t n_in, size_t n_out, size_t t0, size_t t1) {
  size_t r = 0;
  for (; r + RR <= n_rows; r += RR)
    OutInRowsOverTiles<RO, RR>(out + r * n_out, x + r * n_in, w, bias, n_in, n_out, t0, t1);
  for (; r < n_rows; ++r)
    OutInRowsOverTiles<RO, 1>(out + r * n_out, x + r * n_in, w, bias, n_in, n_out, t0, t1);
}

template <int RO, int RR, typename WT>
void OutInAll(float* out, const float* x, const WT* w, const float* bias, size_t n_rows,
              size_t n_in, size_t n_out, int n_threads) {
  const size_t n_tiles = (n_out + RO - 1) / RO;
  if (n_rows <= kStreamMaxRows) {  // decode: each tile's weights from memory once, all rows
    parallel_for(n_threads, size_t{n_tiles}, [&](size_t t) {
      OutInOutputTile<RO, RR>(out, x, w, bias, n_rows, n_in, n_out, t);
    });
    return;
  }
  constexpr size_t kBlockBytes = size_t{256} << 10;  // within L2 on every x86 and Arm core here
  const size_t tiles_per_block = std::max<size_t>(1, kBlockBytes / (RO * n_in * sizeof(WT)));
  const size_t n_blocks = (n_tiles + tiles_per_block - 1) / tiles_per_block;
  parallel_for(n_threads, size_t{n_blocks}, [&](size_t b) {
    OutInOutputBlock<RO, RR>(out, x, w, bias, n_rows, n_in, n_out, b * tiles_per_block,
                             std::min(n_tiles, (b + 1) * tiles_per_block));
  });
}

}  // namespace

void MatmulImpl(float* out, const float* x, const WeightMatrix& w, const float* bias, int n_rows,
                int n_threads, MatmulPath path) {
  if (n_rows <= 0 || w.n_out <= 0) return;
  n_threads = std::max(n_threads, 1);
  const size_t T = n_rows, I = w.n_in, O = w.n_out;
  // Strips packed at load: decode and prefill read them (the same bits as the kernels below,
  // which a caller naming the tiled path, as the kernels' tests do, still gets for prefill).
  const bool decode =
      path == MatmulPath::kRowStream || (path == MatmulPath::kAuto && T <= kStreamMaxRows);
  if (HasStrips(w) && (path == MatmulPath::kAuto || (decode && StripsTake(T))))
    return StripsForward(out, x, w, bias, T, n_threads);
  VisitWeights(w.data, w.dtype, [&](const auto* wt) {
    if (w.layout == WeightLayout::kOutIn) {
      if (path == MatmulPath::kTiled || (path == MatmulPath::kAuto && T > kStreamMaxRows)) {
        OutInTiled(out, x, wt, bias, T, I, O, n_threads);
      } else if (T == 1) {
        OutInAll<kDotOuts1, 1>(out, x, wt, bias, T, I, O, n_threads);
      } else {
        using WT = std::remove_cv_t<std::remove_pointer_t<decltype(wt)>>;
        OutInAll<kOutInOutsN<WT>, kOutInRowsN<WT>>(out, x, wt, bias, T, I, O, n_threads);
      }
      return;
    }
    if (path == MatmulPath::kAuto)
      path = T <= kStreamMaxRows ? MatmulPath::kRowStream : MatmulPath::kTiled;
    if (path == MatmulPath::kRowStream) {
      InOutStream(out, x, wt, bias, T, I, O, n_threads);
    } else {
      InOutTiled(out, x, wt, bias, T, I, O, n_threads);
    }
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace kvlm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvlm {

HWY_EXPORT(MatmulImpl);

void matmul_forward_path(float* out, const float* x, const WeightMatrix& w, const float* bias,
                         int n_rows, const Parallel& par, MatmulPath path) {
  if (dtype_is_quantized(w.dtype)) return matmul_quant_forward(out, x, w, bias, n_rows, par);
  // BF16 on AVX-512 BF16 machines: every row count, so decode and prefill agree bitwise.
  // AMX where the CPU has it, by the same rule (matmul_bf16amx.h).
  if (w.dtype == DType::kBF16 && bf16_dot_active()) {
    if (bf16_amx_active()) return matmul_bf16amx_forward(out, x, w, bias, n_rows, par);
    return matmul_bf16dot_forward(out, x, w, bias, n_rows, par, path);
  }
  HWY_DYNAMIC_DISPATCH(MatmulImpl)(out, x, w, bias, n_rows, par.n_threads, path);
}

void matmul_forward(float* out, const float* x, const WeightMatrix& w, const float* bias,
                    int n_rows, const Parallel& par) {
  matmul_forward_path(out, x, w, bias, n_rows, par, MatmulPath::kAuto);
}

}  // namespace kvlm
#endif  // HWY_ONCE
