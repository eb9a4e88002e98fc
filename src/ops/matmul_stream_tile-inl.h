// The row stream's register tile (kInOut decode, 3..8 rows): RP rows x NV vectors of outputs in
// registers for up to kTileI weight rows, x broadcast from a packed block. matmul_simd.cpp's row
// stream runs it over the matrix as stored, matmul_strips-inl.h over the column strips packed at
// load. Include in a file compiled per target, after hwy/foreach_target.h.

// Per-target include guard: this file is included once per Highway target.
#if defined(KVLM_OPS_MATMUL_STREAM_TILE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KVLM_OPS_MATMUL_STREAM_TILE_INL_H_
#undef KVLM_OPS_MATMUL_STREAM_TILE_INL_H_
#else
#define KVLM_OPS_MATMUL_STREAM_TILE_INL_H_
#endif

#include <algorithm>

#include "hwy/highway.h"
#include "ops/matmul_outin-inl.h"  // kVecRegs
#include "ops/prefetch.h"
#include "ops/simd_weights-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kvlm {
namespace HWY_NAMESPACE {
namespace {

// Row stream with register tiles (3..8 rows): the accumulators of RP rows x NV vectors stay in
// registers for kTileI weight rows at a time, each weight vector loaded feeding RP fmas with x
// broadcast straight from the packed block, where InOutStreamRange loads and stores every
// accumulator every four weight rows (its batch-8 decode ran at the load ports' rate). The
// chunk's accumulators go back to L1 between tiles: the same chains, so the same bits. Weights
// are read row segment by row segment within a chunk, the next tile's rows fetched (T0) while
// this one runs: without that fetch the kernel took 2.2x as long; two tiles ahead, T1 hints,
// 16 or 64 rows per tile: within the noise or worse (perf samples, F16 batch-8 decode).
constexpr int kStreamAccRegs = kVecRegs == 32 ? 24 : 12;  // accumulators a register tile holds
constexpr size_t kTileI = 32;                             // weight rows per register pass

template <int R>
constexpr int kRegPassRows = kVecRegs == 32 || R <= 4 ? R : (R + 1) / 2;
template <int R>
constexpr int kRegTileVecs = std::max(1, kStreamAccRegs / kRegPassRows<R>);

// Rows [0, RP) of the packed x block (stride R a step), NV vectors of columns (the last one n_last
// lanes wide when n_last < kN): kb more steps of each chain, accumulators loaded from and stored
// to acc (row stride acc_stride). ahead: where the next tile's weights for these columns start.
template <int RP, int NV, int R, typename WT>
HWY_INLINE void InOutRegTile(float* HWY_RESTRICT acc, size_t acc_stride,
                             const float* HWY_RESTRICT xp, const WT* HWY_RESTRICT w, size_t n_out,
                             size_t kb, size_t n_last, const WT* ahead) {
  const DF df;
  VF a[RP][NV];
  for (int r = 0; r < RP; ++r)
    for (int v = 0; v < NV; ++v) a[r][v] = hn::Load(df, acc + r * acc_stride + v * kN);
  constexpr size_t kBytes = NV * kN * sizeof(WT);
  for (size_t k = 0; k < kb; ++k) {
    if (ahead) {
      const char* next = reinterpret_cast<const char*>(ahead + k * n_out);
      for (size_t b = 0; b < kBytes; b += 64) PrefetchToL2(next + b);
      PrefetchToL2(next + kBytes - 1);
    }
    const WT* wk = w + k * n_out;
    VF wv[NV];
    for (int v = 0; v < NV; ++v)
      wv[v] = v == NV - 1 && n_last < kN ? LoadWeightsN(df, wk + v * kN, n_last)
                                         : LoadWeights(df, wk + v * kN);
    for (int r = 0; r < RP; ++r) {
      const VF xv = hn::Set(df, xp[k * R + r]);
      for (int v = 0; v < NV; ++v) a[r][v] = hn::MulAdd(xv, wv[v], a[r][v]);
    }
  }
  for (int r = 0; r < RP; ++r)
    for (int v = 0; v < NV; ++v) hn::Store(a[r][v], df, acc + r * acc_stride + v * kN);
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace kvlm
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
