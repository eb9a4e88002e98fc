// Decode and prefill over F16 and BF16 weights, and F32 [n_in, n_out] ones, packed at load as
// column strips (ops/weight_strips.h): the row stream's register tiles (matmul_stream_tile-inl.h)
// read each strip as one contiguous stream, for up to 8 rows at a time. kInOut: a strip is 48
// columns of W, rows in order. kOutIn: a strip is 48 outputs, their elements grouped by lane
// class (i % 16), so each lane's chain of matmul.h's 16-lane order is a kInOut chain over that
// class, and the 16 lane sums are added by matmul.h's tree, 48 outputs at a time. Every output
// keeps its stated order, so the bits are those of the kernels that read the matrix as stored.
// Include in a file compiled per target, after hwy/foreach_target.h.
//
// Why (GPT-2 124M shape, F16, batch 8, 2 threads of a Sapphire Rapids VM, 2026-12-03): the layers'
// matrices took 7.6 ms a step as stored (register tiles over 96-byte pieces of rows kilobytes
// apart) and 6.8 ms as strips; the output head 4.4 ms through the dot tiles (their lane sums and
// a weight widened once per 4 rows) and 3.4 ms as lane-class strips (kernels_bench in cache:
// 214-255 -> 289-307 GFLOP/s on the [O, I] layer shapes, 245-267 -> 341-348 on [I, O]).
// Batch 1 and 2 of [I, O] too (Zen 5, 2026-12-04): the stored matrix split by columns gives each
// thread 3 KB pieces of rows 6 KB apart, and this machine's prefetchers stream such gapped runs
// at half the rate of one contiguous run (a pure-read loop, 2 threads: 30 against 60 GB/s);
// kernels_bench's four layer shapes at batch 1 went from 30-34 to 56-77 GB/s.
// Prefill too (Zen 5, 2026-12-07, `kvlm bench`, strips against the stored kernels, interleaved):
// GPT-2's shape, prefill of 512, F16 1.06-1.19x, F32 1.06-1.28x, BF16 without vdpbf16ps 1.15-1.17x,
// F16 pinned to AVX2 1.06-1.09x; a SmolLM-135M-shaped Llama (576 wide) 0.96-1.20x. So once
// the strips are made, nothing reads the stored matrix but the embedding's rows.

// Per-target include guard: this file is included once per Highway target.
#if defined(KVLM_OPS_MATMUL_STRIPS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KVLM_OPS_MATMUL_STRIPS_INL_H_
#undef KVLM_OPS_MATMUL_STRIPS_INL_H_
#else
#define KVLM_OPS_MATMUL_STRIPS_INL_H_
#endif

#include <algorithm>
#include <tuple>
#include <vector>

#include "hwy/highway.h"
#include "ops/matmul_stream_tile-inl.h"
#include "ops/simd_weights-inl.h"
#include "ops/stealable_shares.h"
#include "ops/thread_team.h"
#include "ops/weight_strips.h"

HWY_BEFORE_NAMESPACE();
namespace kvlm {
namespace HWY_NAMESPACE {
namespace {

constexpr int kStripMaxRows = 8;
constexpr size_t kStripVecs = kStripCols / kN;
static_assert(kStripCols % kN == 0, "a strip is whole vectors on every target");

// Vectors per register tile over a strip: the most that divide the strip and fit the tile.
template <int R>
constexpr int StripTileVecs() {
  int nv = std::min<int>(kRegTileVecs<R>, kStripVecs);
  while (kStripVecs % nv != 0) --nv;
  return nv;
}

// How far ahead of its step a register tile over strips fetches: on 32-register targets 12 KB,
// 128 steps of F16, elsewhere kTileI steps (3 KB of F16), what the row stream over the stored
// matrix fetches. The strip is one contiguous run, so these are the next bytes of the same
// stream. At 4..8 rows a thread reads one strip at a time; Zen 5 then streams 12 KB ahead faster
// than 3 KB: GPT-2's shapes, F16, 8 rows, 2 threads, interleaved in one process, c_fc /
// mlp.c_proj / the head 1.06x / 1.07x / 1.08x the GB/s, 24 KB no faster; F32 strips level at 6,
// 12 and 24 KB. Pinned to AVX2 (8 rows in two passes of 4) 12 KB ran 0.97x whole steps at batch 8,
// so 16-register targets keep the shorter distance.
constexpr size_t kStripFetchBytes = 12 << 10;
template <typename WT>
constexpr size_t kStripFetchSteps = kVecRegs == 32 ? kStripFetchBytes / (kStripCols * sizeof(WT))
                                                   : kTileI;

// n_steps more steps of R rows' chains over one strip: acc [R][kStripCols] (chains continued),
// x packed xp[k * R + r], weights ws[k * kStripCols + c]; register tiles of `tile` steps, each
// step fetching the bytes kStripFetchSteps ahead of it (the strip is contiguous: they follow in
// memory, past its end into the next strip).
template <int R, typename WT>
HWY_INLINE void StripSteps(float* HWY_RESTRICT acc, const float* HWY_RESTRICT xp,
                           const WT* HWY_RESTRICT ws, size_t n_steps, size_t tile) {
  constexpr int RP = kRegPassRows<R>, NV = StripTileVecs<R>();
  for (size_t k0 = 0; k0 < n_steps; k0 += tile) {
    const size_t kb = std::min(tile, n_steps - k0);
    const WT* wt = ws + k0 * kStripCols;
    const WT* ahead = wt + kStripFetchSteps<WT> * kStripCols;  // a fetch never faults
    for (size_t v = 0; v < kStripVecs; v += NV) {
      InOutRegTile<RP, NV, R>(acc + v * kN, kStripCols, xp + k0 * R, wt + v * kN, kStripCols, kb,
                              kN, ahead + v * kN);
      if constexpr (RP < R)
        InOutRegTile<R - RP, NV, R>(acc + RP * kStripCols + v * kN, kStripCols, xp + k0 * R + RP,
                                    wt + v * kN, kStripCols, kb, kN,
                                    static_cast<const WT*>(nullptr));
    }
  }
}

// Strips read at once by 1..3 rows: as many as their accumulators fit a register tile, a power
// of two (AVX-512: 8 for one row, 4 for two, 2 for three; AVX2: 2 for one row). A strip at a time
// gives each thread one stream and a row's 3 chains to run; Zen 5 streams 8 (one per strip) faster
// (GPT-2's shape, F16, 2 threads, whole decode steps interleaved in one process: batch 1 at 128
// cached 1.05-1.27x the tokens/s as the bus was slower or faster, 900 cached 1.09-1.16x, batch 2
// 1.19x, batch 3 1.08x; pinned to AVX2 1.07x). Four rows over 2 strips ran 0.97x: from 4 rows on,
// one strip's register tiles already hold 12 chains.
constexpr size_t StripGroupFor(size_t rows) {
  if (rows > 3) return 1;
  size_t p = 1;
  while (2 * p * rows * kStripVecs <= static_cast<size_t>(kStreamAccRegs)) p *= 2;
  return p;
}
template <int R>
constexpr size_t StripGroup() {
  return StripGroupFor(R);
}

// n_steps steps of R rows' chains over P strips at once, each chain starting from zero in
// registers; their sums stored to strip p's acc + p * acc_stride ([r][kStripCols]). Weights at
// ws + p * w_stride ([k][kStripCols]), x packed xp[k * R + r]. The P strips are P streams the
// hardware prefetchers follow (a software fetch 8 or 32 steps ahead in each was no faster).
// Starting in registers rather than from zeroed accumulators in memory spares the [n_out, n_in]
// head zeroing and reloading 24 KB per group of strips (GPT-2's F16 head at 1 row, 2 threads,
// 1.06x the GB/s).
template <int R, size_t P, typename WT>
HWY_INLINE void StripGroupSteps(float* HWY_RESTRICT acc, size_t acc_stride,
                                const float* HWY_RESTRICT xp, const WT* HWY_RESTRICT ws,
                                size_t w_stride, size_t n_steps) {
  const DF df;
  VF a[P][R][kStripVecs];
  for (size_t p = 0; p < P; ++p)
    for (int r = 0; r < R; ++r)
      for (size_t v = 0; v < kStripVecs; ++v) a[p][r][v] = hn::Zero(df);
  for (size_t k = 0; k < n_steps; ++k) {
    VF xv[R];
    for (int r = 0; r < R; ++r) xv[r] = hn::Set(df, xp[k * R + r]);
    for (size_t p = 0; p < P; ++p)
      for (size_t v = 0; v < kStripVecs; ++v) {
        const VF wv = LoadWeights(df, ws + p * w_stride + k * kStripCols + v * kN);
        for (int r = 0; r < R; ++r) a[p][r][v] = hn::MulAdd(xv[r], wv, a[p][r][v]);
      }
  }
  for (size_t p = 0; p < P; ++p)
    for (int r = 0; r < R; ++r)
      for (size_t v = 0; v < kStripVecs; ++v)
        hn::Store(a[p][r][v], df, acc + p * acc_stride + r * kStripCols + v * kN);
}

// out[r][col, col + kStripCols) = sum + bias for the columns below n_out.
HWY_INLINE void StoreStripVector(VF sum, const float* bias, float* out_row, size_t col,
                                 size_t n_out) {
  StoreOutputs(DF(), sum, bias ? bias + col : nullptr, out_row + col, std::min(kN, n_out - col));
}

// Stores strip s's outputs for R rows from acc [r][kStripCols].
template <int R>
HWY_INLINE void StoreInOutStrip(const float* acc, const float* bias, float* out, size_t s,
                                size_t n_out) {
  const DF df;
  for (int r = 0; r < R; ++r)
    for (size_t v = 0; v < kStripVecs && s * kStripCols + v * kN < n_out; ++v)
      StoreStripVector(hn::Load(df, acc + r * kStripCols + v * kN), bias, out + r * n_out,
                       s * kStripCols + v * kN, n_out);
}

// kInOut strips [s, s1), P at a time, then the rest P / 2 at a time, and so on.
template <int R, size_t P, typename WT>
void InOutStripGroups(float* out, const float* xp, const WT* strips, const float* bias, size_t n_in,
                      size_t n_out, size_t s, size_t s1) {
  HWY_ALIGN float acc[P * R * kStripCols];  // [p][r][c]
  for (; s + P <= s1; s += P) {
    StripGroupSteps<R, P>(acc, R * kStripCols, xp, strips + s * n_in * kStripCols,
                          n_in * kStripCols, n_in);
    for (size_t p = 0; p < P; ++p)
      StoreInOutStrip<R>(acc + p * R * kStripCols, bias, out, s + p, n_out);
  }
  if constexpr (P > 1)
    if (s < s1) InOutStripGroups<R, P / 2>(out, xp, strips, bias, n_in, n_out, s, s1);
}

// x's R rows as kInOut strips read them: xp[i * R + r] = x[r][i], a weight row's R values side
// by side.
template <int R>
void PackInOutRows(float* HWY_RESTRICT xp, const float* HWY_RESTRICT x, size_t n_in) {
  for (size_t i = 0; i < n_in; ++i)
    for (int r = 0; r < R; ++r) xp[i * R + r] = x[r * n_in + i];
}

// kInOut strips [s0, s1) for R rows, x packed by PackInOutRows: each output's chain x[i] * W[i][o]
// fused in increasing i from zero, then the bias (matmul.h).
template <int R, typename WT>
void InOutStripsRange(float* out, const float* xp, const WT* strips, const float* bias, size_t n_in,
                      size_t n_out, size_t s0, size_t s1) {
  const DF df;
  if constexpr (StripGroup<R>() > 1) {
    InOutStripGroups<R, StripGroup<R>()>(out, xp, strips, bias, n_in, n_out, s0, s1);
  } else {
    HWY_ALIGN float acc[R * kStripCols];
    for (size_t s = s0; s < s1; ++s) {
      for (size_t k = 0; k < R * kStripCols; k += kN) hn::Store(hn::Zero(df), df, acc + k);
      StripSteps<R>(acc, xp, strips + s * n_in * kStripCols, n_in, kTileI);
      StoreInOutStrip<R>(acc, bias, out, s, n_out);
    }
  }
}

// Stores strip s's outputs for R rows from its lane classes' sums acc [l][r][kStripCols]:
// matmul.h's tree t = s[l] + s[l + 8], u = t[l] + t[l + 4], (u0 + u2) + (u1 + u3), elementwise over
// the strip's outputs, then the bias.
template <int R>
HWY_INLINE void StoreOutInStrip(const float* acc, const float* bias, float* out, size_t s,
                                size_t n_out) {
  const DF df;
  for (int r = 0; r < R; ++r)
    for (size_t v = 0; v < kStripVecs && s * kStripCols + v * kN < n_out; ++v) {
      auto lane = [&](size_t l)
                      HWY_ATTR { return hn::Load(df, acc + (l * R + r) * kStripCols + v * kN); };
      VF t[8], u[4];
      for (size_t l = 0; l < 8; ++l) t[l] = hn::Add(lane(l), lane(l + 8));
      for (size_t l = 0; l < 4; ++l) u[l] = hn::Add(t[l], t[l + 4]);
      StoreStripVector(hn::Add(hn::Add(u[0], u[2]), hn::Add(u[1], u[3])), bias, out + r * n_out,
                       s * kStripCols + v * kN, n_out);
    }
}

// kOutIn strips [s, s1), P at a time (each lane class of the P strips together), then the rest
// P / 2 at a time, and so on. K: steps per lane class.
template <int R, size_t P, typename WT>
void OutInStripGroups(float* out, const float* xp, const WT* strips, const float* bias, size_t K,
                      size_t n_out, size_t s, size_t s1) {
  constexpr size_t kStripAcc = 16 * R * kStripCols;  // one strip's [l][r][c]
  HWY_ALIGN float acc[P * kStripAcc];
  const size_t strip_size = 16 * K * kStripCols;
  for (; s + P <= s1; s += P) {
    const WT* ws = strips + s * strip_size;
    for (size_t l = 0; l < 16; ++l)  // each lane class's chains start and end in one call
      StripGroupSteps<R, P>(acc + l * R * kStripCols, kStripAcc, xp + l * K * R,
                            ws + l * K * kStripCols, strip_size, K);
    for (size_t p = 0; p < P; ++p) StoreOutInStrip<R>(acc + p * kStripAcc, bias, out, s + p, n_out);
  }
  if constexpr (P > 1)
    if (s < s1) OutInStripGroups<R, P / 2>(out, xp, strips, bias, K, n_out, s, s1);
}

// x's R rows as kOutIn lane-class strips read them: xp[(l * K + k) * R + r] = x[r][16 k + l], 0
// past n_in (the padded lanes' fma(0, 0, s) of matmul.h), K = ceil(n_in / 16).
template <int R>
void PackOutInRows(float* HWY_RESTRICT xp, const float* HWY_RESTRICT x, size_t n_in) {
  const size_t K = (n_in + 15) / 16;
  for (size_t l = 0; l < 16; ++l)
    for (size_t k = 0; k < K; ++k)
      for (int r = 0; r < R; ++r) {
        const size_t i = 16 * k + l;
        xp[(l * K + k) * R + r] = i < n_in ? x[r * n_in + i] : 0.0f;
      }
}

// kOutIn lane-class strips [s0, s1) for R rows, x packed by PackOutInRows: lane l's partial sum of
// an output is the chain over its elements i = l, l + 16, ... in order, each class's chains run
// to their end in registers; then matmul.h's tree (StoreOutInStrip).
template <int R, typename WT>
void OutInStripsRange(float* out, const float* xp, const WT* strips, const float* bias, size_t n_in,
                      size_t n_out, size_t s0, size_t s1) {
  const DF df;
  const size_t K = (n_in + 15) / 16;  // steps per lane class
  if constexpr (StripGroup<R>() > 1) {
    OutInStripGroups<R, StripGroup<R>()>(out, xp, strips, bias, K, n_out, s0, s1);
  } else {
    HWY_ALIGN float acc[16 * R * kStripCols];  // [l][r][c]
    for (size_t s = s0; s < s1; ++s) {
      for (size_t k = 0; k < 16 * R * kStripCols; k += kN) hn::Store(hn::Zero(df), df, acc + k);
      const WT* ws = strips + s * 16 * K * kStripCols;
      for (size_t l = 0; l < 16; ++l)
        StripSteps<R>(acc + l * R * kStripCols, xp + l * K * R, ws + l * K * kStripCols, K, K);
      StoreOutInStrip<R>(acc, bias, out, s, n_out);
    }
  }
}

// Floats of x's packing per row (PackInOutRows / PackOutInRows).
HWY_INLINE size_t PackedRowFloats(bool out_in, size_t n_in) {
  return out_in ? (n_in + 15) / 16 * 16 : n_in;
}

#define KVLM_STRIPS_ROWS(KERNEL, rows, ...) \
  switch (rows) {                           \
    case 1:                                 \
      KERNEL<1>(__VA_ARGS__);               \
      break;                                \
    case 2:                                 \
      KERNEL<2>(__VA_ARGS__);               \
      break;                                \
    case 3:                                 \
      KERNEL<3>(__VA_ARGS__);               \
      break;                                \
    case 4:                                 \
      KERNEL<4>(__VA_ARGS__);               \
      break;                                \
    case 5:                                 \
      KERNEL<5>(__VA_ARGS__);               \
      break;                                \
    case 6:                                 \
      KERNEL<6>(__VA_ARGS__);               \
      break;                                \
    case 7:                                 \
      KERNEL<7>(__VA_ARGS__);               \
      break;                                \
    default:                                \
      KERNEL<8>(__VA_ARGS__);               \
      break;                                \
  }

// Packs rows [r, r + rows) of x (rows <= 8) for the layout's strips at xp.
HWY_INLINE void PackStripRows(bool out_in, float* xp, const float* x, size_t rows, size_t n_in) {
  if (out_in) {
    KVLM_STRIPS_ROWS(PackOutInRows, rows, xp, x, n_in)
  } else {
    KVLM_STRIPS_ROWS(PackInOutRows, rows, xp, x, n_in)
  }
}

// Strips [s0, s1) for `rows` rows (<= 8) packed at xp, out at their first row.
template <typename WT>
HWY_INLINE void StripRowsRange(bool out_in, float* out, const float* xp, const WT* strips,
                               const float* bias, size_t rows, size_t n_in, size_t n_out, size_t s0,
                               size_t s1) {
  if (out_in) {
    KVLM_STRIPS_ROWS(OutInStripsRange, rows, out, xp, strips, bias, n_in, n_out, s0, s1)
  } else {
    KVLM_STRIPS_ROWS(InOutStripsRange, rows, out, xp, strips, bias, n_in, n_out, s0, s1)
  }
}

// Rows of prefill packed at once: each strip is read from memory once per block and serves its
// 8-row groups from L2 (a strip of GPT-2's or a Llama's matrices is 74-541 KB of 16-bit values).
constexpr size_t kStripBlockRows = 64;

// Decode (<= 8 rows), member t: the rows' x packed, then pieces of strips claimed from `shares`
// (its own run of strips front to back, `grain` at a time, then halves taken over from a slower
// member: ops/stealable_shares.h), each streamed once. Grain: the strips a group reads at once,
// so a piece keeps its groups whole. GPT-2's shape, F16, whole decode steps interleaved in one
// process against halves fixed in advance (Zen 5, 2 threads, 16-24 rounds): batch 8 1.04x
// [0.96-1.10], batch 1 1.07x [0.73-1.15] (perf: the worker's time waiting at the end of a
// job 14% -> 7%).
template <typename WT>
HWY_NOINLINE void StripsDecodeThread(bool out_in, float* out, const float* x, const WT* strips,
                                     const float* bias, size_t n_rows, size_t n_in, size_t n_out,
                                     int t, StealableShares& shares) {
  thread_local std::vector<float> packed;
  packed.resize(n_rows * PackedRowFloats(out_in, n_in));
  PackStripRows(out_in, packed.data(), x, n_rows, n_in);
  const size_t grain = StripGroupFor(n_rows);
  for (auto [s0, s1] = shares.claim(t, grain); s0 < s1; std::tie(s0, s1) = shares.claim(t, grain))
    StripRowsRange(out_in, out, packed.data(), strips, bias, n_rows, n_in, n_out, s0, s1);
}

// Prefill (more than 8 rows), member t of nt: its static share of the strips, for blocks of
// kStripBlockRows rows, each packed whole, then each strip for every 8-row group of the block in
// turn. Each output's chain is the one its row gets alone (rows never share an fma), so the bits
// depend neither on the grouping nor on which member computes a strip.
template <typename WT>
HWY_NOINLINE void StripsPrefillThread(bool out_in, float* out, const float* x, const WT* strips,
                                      const float* bias, size_t n_rows, size_t n_in, size_t n_out,
                                      size_t t, size_t nt) {
  const size_t n_strips = (n_out + kStripCols - 1) / kStripCols;
  const size_t s0 = n_strips * t / nt, s1 = n_strips * (t + 1) / nt;
  const size_t row_floats = PackedRowFloats(out_in, n_in);
  thread_local std::vector<float> packed;
  for (size_t b = 0; b < n_rows && s0 < s1; b += kStripBlockRows) {
    const size_t block = std::min(kStripBlockRows, n_rows - b);
    packed.resize(block * row_floats);
    for (size_t r = 0; r < block; r += kStripMaxRows)
      PackStripRows(out_in, packed.data() + r * row_floats, x + (b + r) * n_in,
                    std::min<size_t>(kStripMaxRows, block - r), n_in);
    auto rows_range = [&](size_t r, size_t sa, size_t sb) {
      StripRowsRange(out_in, out + (b + r) * n_out, packed.data() + r * row_floats, strips, bias,
                     std::min<size_t>(kStripMaxRows, block - r), n_in, n_out, sa, sb);
    };
    if (block <= kStripMaxRows) {  // the last block's few rows: their strips as one range
      rows_range(0, s0, s1);
    } else {
      for (size_t s = s0; s < s1; ++s)
        for (size_t r = 0; r < block; r += kStripMaxRows) rows_range(r, s, s + 1);
    }
  }
}
#undef KVLM_STRIPS_ROWS

// Whether StripsForward takes n_rows rows: 1..8 of either layout. [n_out, n_in] at 1 and 2 rows
// too, though a lane class then feeds only 3 chains (6 on AVX2): the dot tiles over the stored
// rows read 8 rows' runs 1.5 KB apart at once, which Zen 5 streams slower than one strip (GPT-2's
// F16 head, batch 1 / 2, 2 threads, interleaved in one process: 1.06x / 1.19x the GB/s; whole
// decode steps at batch 2 1.06x, batch 1 at 900 cached 1.07x, batch 1 at 128 1.00-1.06x, pinned
// to AVX2 1.08x).
HWY_INLINE bool StripsTake(size_t n_rows) {
  return n_rows >= 1 && n_rows <= kStripMaxRows;
}

template <typename WT>
HWY_INLINE void StripsForwardAs(float* out, const float* x, const WeightMatrix& w,
                                const float* bias, size_t n_rows, int n_threads) {
  const auto* ws = static_cast<const WT*>(w.strips);
  const bool out_in = w.layout == WeightLayout::kOutIn;
  if (n_rows > kStripMaxRows) {
    run_team(n_threads, [&](int t, int nt) {
      StripsPrefillThread(out_in, out, x, ws, bias, n_rows, w.n_in, w.n_out, t, nt);
    });
    return;
  }
  StealableShares shares((w.n_out + kStripCols - 1) / kStripCols, std::max(n_threads, 1));
  run_team(n_threads, [&](int t, int) {
    StripsDecodeThread(out_in, out, x, ws, bias, n_rows, w.n_in, w.n_out, t, shares);
  });
}

// Whether w has strips these kernels read (ops/weight_strips.h: F16, BF16, F32 [n_in, n_out]).
HWY_INLINE bool HasStrips(const WeightMatrix& w) {
  return w.strips && (w.dtype == DType::kF16 || w.dtype == DType::kBF16 ||
                      (w.dtype == DType::kF32 && w.layout == WeightLayout::kInOut));
}

// out [T, O] = x @ W + bias for W's strips (HasStrips(w)), over n_threads threads.
HWY_INLINE void StripsForward(float* out, const float* x, const WeightMatrix& w, const float* bias,
                              size_t n_rows, int n_threads) {
  if (w.dtype == DType::kF32) return StripsForwardAs<float>(out, x, w, bias, n_rows, n_threads);
  if (w.dtype == DType::kBF16)
    return StripsForwardAs<hwy::bfloat16_t>(out, x, w, bias, n_rows, n_threads);
  StripsForwardAs<hwy::float16_t>(out, x, w, bias, n_rows, n_threads);
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace kvlm
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
