// kOutIn prefill ([O, I] weights, many rows) with register tiles, in the 16-lane order of
// matmul.h, so its bits are those of matmul_outin-inl.h's dot-product tiles (the decode kernel).
//
// That order is 16 independent chains per output, lane l taking the inputs i = l, l + 16, ...,
// then a fixed tree over the 16 lanes. The dot tiles run the 16 chains side by side across one
// vector; here they run one lane class at a time: the class-l chains of a tile of rows x outputs
// are an ordinary matrix product over the steps j (x[r][16j + l] times W[o][16j + l]), which the
// register tile of matmul_register_tile-inl.h runs with the outputs across the vector and x
// broadcast, each weight vector feeding kTileRows rows. The tile stores each class's sums
// apart, and the tree then adds the 16 classes of each output as SumLanes16 adds its lanes.
// So prefill gets a register tile's reuse of each weight (the dot tiles reload each weight for
// every 3 rows and add 16 lanes per output) without leaving the decode kernel's bits.
//
// Per thread (a contiguous range of strips of kTileCols outputs), per block of kBlockRows rows:
//   x is packed class-major, a[l][tile][j][row] (zero past n_in and past the last row), once;
//   for each strip, the weights are packed (and widened) class-major, p[l][j][c], zero past
//   n_in and past n_out; then class by class, every row tile runs its chains while that class's
//   panel (steps x kTileCols, 18 KB at n_in 3,072 in fp32) stays in L1; the classes' sums wait
//   in an L2 buffer (16 x kBlockRows x kTileCols floats) until the tree adds them up.
// Include in a file compiled per target, after hwy/foreach_target.h.

// Per-target include guard: this file is included once per Highway target.
#if defined(KVLM_OPS_MATMUL_OUTIN_TILED_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KVLM_OPS_MATMUL_OUTIN_TILED_INL_H_
#undef KVLM_OPS_MATMUL_OUTIN_TILED_INL_H_
#else
#define KVLM_OPS_MATMUL_OUTIN_TILED_INL_H_
#endif

#include <algorithm>

#include "hwy/aligned_allocator.h"
#include "hwy/highway.h"
#include "ops/matmul_register_tile-inl.h"
#include "ops/simd_weights-inl.h"
#include "ops/thread_team.h"

HWY_BEFORE_NAMESPACE();
namespace kvlm {
namespace HWY_NAMESPACE {
namespace {

constexpr size_t kLaneClasses = 16;      // matmul.h's 16 lanes
constexpr size_t kClassBlockRows = 144;  // rows per block: each packed weight feeds this many
static_assert(kClassBlockRows % kTileRows == 0, "row blocks are whole tiles");

// A per-thread buffer that keeps its memory between calls (prefill calls this for every layer;
// fresh megabytes each time would fault their pages in on every call).
HWY_INLINE float* ClassScratch(hwy::AlignedFreeUniquePtr<float[]>& buffer, size_t& capacity,
                               size_t n) {
  if (n > capacity) {
    buffer = hwy::AllocateAligned<float>(n);
    capacity = n;
  }
  return buffer.get();
}

// Transposes n x n floats held in n vectors of n lanes (n = 4 or 8): v[k] holds element k of
// every row afterwards. Pairs of rows interleave, then pairs of pairs (as 64-bit lanes); with
// 8 lanes each 128-bit block now holds one 4 x 4 quarter, and the halves are swapped last.
#if HWY_TARGET != HWY_SCALAR
template <class D>
HWY_INLINE void TransposeSquareBlocks(D d, hn::Vec<D>* v) {
  constexpr size_t n = hn::MaxLanes(D());
  const hn::Repartition<double, D> d64;
  hn::Vec<D> u[n];
  for (size_t g = 0; g < n; g += 4) {
    const auto t0 = hn::BitCast(d64, hn::InterleaveLower(d, v[g], v[g + 1]));
    const auto t1 = hn::BitCast(d64, hn::InterleaveUpper(d, v[g], v[g + 1]));
    const auto t2 = hn::BitCast(d64, hn::InterleaveLower(d, v[g + 2], v[g + 3]));
    const auto t3 = hn::BitCast(d64, hn::InterleaveUpper(d, v[g + 2], v[g + 3]));
    u[g] = hn::BitCast(d, hn::InterleaveLower(d64, t0, t2));
    u[g + 1] = hn::BitCast(d, hn::InterleaveUpper(d64, t0, t2));
    u[g + 2] = hn::BitCast(d, hn::InterleaveLower(d64, t1, t3));
    u[g + 3] = hn::BitCast(d, hn::InterleaveUpper(d64, t1, t3));
  }
  if constexpr (n == 4) {
    for (size_t k = 0; k < 4; ++k) v[k] = u[k];
  } else {
    for (size_t k = 0; k < 4; ++k) {
      v[k] = hn::ConcatLowerLower(d, u[k + 4], u[k]);
      v[k + 4] = hn::ConcatUpperUpper(d, u[k + 4], u[k]);
    }
  }
}

#endif

// (One lane, HWY_SCALAR: nothing to do.)
template <class D>
HWY_INLINE void TransposeSquare(D d, hn::Vec<D>* v) {
  constexpr size_t n = hn::MaxLanes(D());
  static_assert(n == 1 || n == 4 || n == 8, "1 x 1, 4 x 4 or 8 x 8 blocks");
#if HWY_TARGET != HWY_SCALAR
  TransposeSquareBlocks(d, v);
#else
  (void)d, (void)v;
#endif
}

// Elements [i0, i0 + n) of a row widened to fp32, zero past n_in (and all zero when the row is
// past the matrix: row == nullptr).
template <class D, typename T>
HWY_INLINE hn::Vec<D> LoadRowPart(D d, const T* row, size_t i0, size_t n_in) {
  constexpr size_t n = hn::MaxLanes(D());
  if (row == nullptr || i0 >= n_in) return hn::Zero(d);
  return i0 + n <= n_in ? LoadWeights(d, row + i0) : LoadWeightsN(d, row + i0, n_in - i0);
}

// Transposing blocks for packing: 8 x 8 where the target has 256-bit vectors, else 4 x 4; the
// rows of x go kXBlock at a time (a tile of 4 rows takes 4 x 4 blocks).
using DPanel = hn::CappedTag<float, 8>;
constexpr size_t kPanelBlock = hn::MaxLanes(DPanel());
constexpr size_t kXBlock = std::min<size_t>(kTileRows, kPanelBlock);
using DX = hn::CappedTag<float, kXBlock>;
static_assert(kTileCols % kPanelBlock == 0 && kTileRows % kXBlock == 0, "whole blocks");

// a[l][t][j][r] = x[t * kTileRows + r][16 j + l], zero past n_in and past `rows`.
HWY_INLINE void PackRowsByClass(float* HWY_RESTRICT a, const float* HWY_RESTRICT x, size_t n_in,
                                size_t rows, size_t n_tiles, size_t n_steps) {
  const DX d;
  const size_t n_padded = n_steps * 16;
  for (size_t t = 0; t < n_tiles; ++t)
    for (size_t r0 = 0; r0 < kTileRows; r0 += kXBlock)
      for (size_t i0 = 0; i0 < n_padded; i0 += kXBlock) {
        hn::Vec<DX> v[kXBlock];
        for (size_t k = 0; k < kXBlock; ++k) {
          const size_t row = t * kTileRows + r0 + k;
          v[k] = LoadRowPart(d, row < rows ? x + row * n_in : nullptr, i0, n_in);
        }
        TransposeSquare(d, v);
        for (size_t k = 0; k < kXBlock; ++k) {
          const size_t i = i0 + k;
          hn::StoreU(v[k], d, a + (((i % 16) * n_tiles + t) * n_steps + i / 16) * kTileRows + r0);
        }
      }
}

// p[l][j][c] = W[col + c][16 j + l] widened to fp32, zero past n_in and past n_cols.
template <typename WT>
HWY_INLINE void PackPanelByClass(float* HWY_RESTRICT p, const WT* HWY_RESTRICT w, size_t n_in,
                                 size_t col, size_t n_cols, size_t n_steps) {
  const DPanel d;
  const size_t class_floats = n_steps * kTileCols;
  const size_t n_padded = n_steps * 16;
  for (size_t c0 = 0; c0 < kTileCols; c0 += kPanelBlock)
    for (size_t i0 = 0; i0 < n_padded; i0 += kPanelBlock) {
      hn::Vec<DPanel> v[kPanelBlock];
      for (size_t k = 0; k < kPanelBlock; ++k) {
        const size_t c = c0 + k;
        v[k] = LoadRowPart(d, c < n_cols ? w + (col + c) * n_in : nullptr, i0, n_in);
      }
      TransposeSquare(d, v);
      for (size_t k = 0; k < kPanelBlock; ++k) {
        const size_t i = i0 + k;
        hn::StoreU(v[k], d, p + (i % 16) * class_floats + (i / 16) * kTileCols + c0);
      }
    }
}

// out[rows of the block][col, col + n_cols) from the classes' sums s[l][t][r][c] (the tree of
// SumLanes16, one vector of outputs at a time), plus bias.
HWY_INLINE void AddClasses(float* out, size_t n_out, const float* HWY_RESTRICT sums,
                           const float* bias, size_t rows, size_t n_tiles, size_t col,
                           size_t n_cols) {
  const DF df;
  const size_t tile_floats = kTileRows * kTileCols;
  const size_t class_floats = n_tiles * tile_floats;
  for (size_t row = 0; row < rows; ++row) {
    const float* s0 = sums + (row / kTileRows) * tile_floats + (row % kTileRows) * kTileCols;
    for (size_t c = 0; c < n_cols; c += kN) {
      VF s[16];
      for (size_t l = 0; l < 16; ++l) s[l] = hn::Load(df, s0 + l * class_floats + c);
      VF t[8], u[4];
      for (int l = 0; l < 8; ++l) t[l] = hn::Add(s[l], s[l + 8]);
      for (int l = 0; l < 4; ++l) u[l] = hn::Add(t[l], t[l + 4]);
      StoreOutputs(df, hn::Add(hn::Add(u[0], u[2]), hn::Add(u[1], u[3])),
                   bias ? bias + col + c : nullptr, out + row * n_out + col + c,
                   std::min(kN, n_cols - c));
    }
  }
}

// Thread t of nt: a contiguous range of strips of kTileCols outputs, all rows.
template <typename WT>
HWY_NOINLINE void OutInTiledThread(float* out, const float* x, const WT* w, const float* bias,
                                   size_t n_rows, size_t n_in, size_t n_out, size_t t, size_t nt) {
  const size_t n_strips = (n_out + kTileCols - 1) / kTileCols;
  const size_t s0 = n_strips * t / nt, s1 = n_strips * (t + 1) / nt;
  if (s0 >= s1) return;
  const size_t n_steps = (n_in + 15) / 16;  // per class; the last step zero-padded
  const size_t block_tiles = kClassBlockRows / kTileRows;
  thread_local hwy::AlignedFreeUniquePtr<float[]> a_buf, p_buf, s_buf;
  thread_local size_t a_cap = 0, p_cap = 0, s_cap = 0;
  float* a =
      ClassScratch(a_buf, a_cap, kLaneClasses * kClassBlockRows * std::max<size_t>(n_steps, 1));
  float* p = ClassScratch(p_buf, p_cap, kLaneClasses * kTileCols * std::max<size_t>(n_steps, 1));
  float* sums = ClassScratch(s_buf, s_cap, kLaneClasses * block_tiles * kTileRows * kTileCols);
  for (size_t r0 = 0; r0 < n_rows; r0 += kClassBlockRows) {
    const size_t rows = std::min(kClassBlockRows, n_rows - r0);
    const size_t n_tiles = (rows + kTileRows - 1) / kTileRows;
    PackRowsByClass(a, x + r0 * n_in, n_in, rows, n_tiles, n_steps);
    for (size_t s = s0; s < s1; ++s) {
      const size_t col = s * kTileCols, n_cols = std::min(kTileCols, n_out - col);
      PackPanelByClass(p, w, n_in, col, n_cols, n_steps);
      for (size_t l = 0; l < kLaneClasses; ++l) {
        const float* pl = p + l * n_steps * kTileCols;
        for (size_t tile = 0; tile < n_tiles; ++tile) {
          const size_t k = l * n_tiles + tile;
          TileKernel(sums + k * kTileRows * kTileCols, kTileCols, a + k * n_steps * kTileRows, pl,
                     kTileCols, n_steps, nullptr, /*first=*/true, /*last=*/true, kTileRows, 0,
                     kTileCols);
        }
      }
      AddClasses(out + r0 * n_out, n_out, sums, bias, rows, n_tiles, col, n_cols);
    }
  }
}

template <typename WT>
void OutInTiled(float* out, const float* x, const WT* w, const float* bias, size_t n_rows,
                size_t n_in, size_t n_out, int n_threads) {
  run_team(n_threads,
           [&](int t, int nt) { OutInTiledThread(out, x, w, bias, n_rows, n_in, n_out, t, nt); });
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace kvlm
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
