// The register tile of the tiled (prefill) kernels: kTileRows rows x kTileVecs vectors of
// outputs, each accumulator one output's fma chain, x broadcast from a packed block and the
// weights from a packed panel (or the matrix itself). matmul_simd.cpp's kInOut tiled kernel and
// matmul_outin_tiled-inl.h's kOutIn one both run it. Include in a file compiled per target,
// after hwy/foreach_target.h.

// Per-target include guard: this file is included once per Highway target.
#if defined(KVLM_OPS_MATMUL_REGISTER_TILE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KVLM_OPS_MATMUL_REGISTER_TILE_INL_H_
#undef KVLM_OPS_MATMUL_REGISTER_TILE_INL_H_
#else
#define KVLM_OPS_MATMUL_REGISTER_TILE_INL_H_
#endif

#include <algorithm>

#include "hwy/highway.h"
#include "ops/matmul_outin-inl.h"
#include "ops/simd_weights-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kvlm {
namespace HWY_NAMESPACE {
namespace {

constexpr int kTileRows = kVecRegs == 32 ? 8 : 4;
constexpr int kTileVecs = 3;
constexpr size_t kTileCols = kTileVecs * kN;

// out[0, rows) x [col, col + n_cols), kc more steps of each chain. `first`: the chains start
// at zero (else they continue from out); `last`: bias is added as they are stored.
// The weights come from p[k * p_stride + c]: the packed panel (fp32, stride kTileCols) or, for
// few rows, the matrix itself (stride n_out), widened here.
template <typename WT>
HWY_INLINE void TileKernel(float* HWY_RESTRICT out, size_t n_out, const float* HWY_RESTRICT a,
                           const WT* HWY_RESTRICT p, size_t p_stride, size_t kc,
                           const float* HWY_RESTRICT bias, bool first, bool last, size_t rows,
                           size_t col, size_t n_cols) {
  const DF df;
  const bool full = rows == kTileRows && n_cols == kTileCols;
  VF acc[kTileRows][kTileVecs];
  for (int r = 0; r < kTileRows; ++r)
    for (int v = 0; v < kTileVecs; ++v) {
      const size_t c = v * kN;
      const float* o = out + r * n_out + col + c;
      if (first || static_cast<size_t>(r) >= rows || c >= n_cols) {
        acc[r][v] = hn::Zero(df);
      } else {
        acc[r][v] = full || c + kN <= n_cols ? hn::LoadU(df, o) : LoadWeightsN(df, o, n_cols - c);
      }
    }
  for (size_t k = 0; k < kc; ++k) {
    VF wv[kTileVecs];
    for (int v = 0; v < kTileVecs; ++v) wv[v] = LoadWeights(df, p + k * p_stride + v * kN);
    for (int r = 0; r < kTileRows; ++r) {
      const VF xr = hn::Set(df, a[k * kTileRows + r]);
      for (int v = 0; v < kTileVecs; ++v) acc[r][v] = hn::MulAdd(xr, wv[v], acc[r][v]);
    }
  }
  for (int r = 0; r < kTileRows && static_cast<size_t>(r) < rows; ++r)
    for (int v = 0; v < kTileVecs; ++v) {
      const size_t c = v * kN;
      if (c >= n_cols) break;
      const size_t n = std::min(kN, n_cols - c);
      StoreOutputs(df, acc[r][v], last && bias ? bias + col + c : nullptr,
                   out + r * n_out + col + c, n);
    }
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace kvlm
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
