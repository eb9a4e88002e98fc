// The AVX-512 BF16 kernels behind matmul_bf16dot_forward (numerics: matmul_bf16dot.h).
//
// Highway 1.0 (Debian 12) has no target with AVX512_BF16, so these functions carry the
// instruction set in a target attribute and run only where cpu_has_avx512_bf16() says so.
// vdpbf16ps multiplies PAIRS of bf16 along the reduction: lane o of the accumulator takes
// x[2p] * W[2p][o] and x[2p+1] * W[2p+1][o]. So
//   kInOut (W [I, O]): x is packed as 32-bit pairs (x[2p], x[2p+1]) and broadcast; the weight
//     rows 2p and 2p+1 are interleaved into (W[2p][o], W[2p+1][o]) pairs, either once per
//     cache block into a packed panel (tiled: prefill, 8 rows x 48 columns per register tile)
//     or in registers as they are read (row stream: few rows, the weight rows streamed in
//     order, accumulators in L1), or read already paired from the AMX tiles packed at load
//     (decode of 1..8 rows where a loader packed them: InOutTilesThread);
//   kOutIn (W [O, I]): a weight row already holds its pairs; x rows are rounded to bf16 one
//     32-element chunk at a time and each output is a 16-lane chain reduced at the end; or, for
//     batched decode of the output head, the pairs packed at load by lane class
//     (OutInStripsThread), each class's chain run for 16 outputs at once.
// Every variant runs each output's chain over the pairs in increasing order from zero (a chain
// stored to `out` between cache blocks and loaded back is the same chain), so the variant, the
// row count and the thread count never change a bit.
//
// run_team's jobs (lambdas) only call HWY_NOINLINE-style functions carrying the target
// attribute (a lambda's body would not get it).

#include <algorithm>
#include <cstring>
#include <tuple>
#include <vector>

#include "ops/matmul_bf16dot.h"
#include "ops/prefetch.h"
#include "ops/stealable_shares.h"
#include "ops/thread_team.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define KVLM_BF16DOT_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))
#define KVLM_BF16DOT_NOINLINE __attribute__((noinline)) KVLM_BF16DOT_TARGET
#define KVLM_BF16DOT_INLINE inline __attribute__((always_inline)) KVLM_BF16DOT_TARGET

namespace kvlm {
namespace {

constexpr size_t kLanes = 16;  // fp32 lanes of a zmm register, = bf16 pairs

// kInOut tiled (prefill). The packed x block (192 rows x 384 pairs, 288 KB) and the weight
// panel (384 pairs x 48 columns, 72 KB) stay in L2, on the thread's stack. Long reduction
// blocks keep the block of `out` a thread revisits small (GPT-2's 768-input matrices take one
// block, so each output is stored once); tall row blocks pack each weight panel (strided reads
// from memory, the costly part of packing) for more rows.
constexpr int kTileRows = 8;
constexpr int kTileVecs = 3;
constexpr size_t kTileCols = kTileVecs * kLanes;
constexpr size_t kBlockPairs = 384;
constexpr size_t kBlockRows = 192;
static_assert(kBlockRows % kTileRows == 0, "row blocks are whole tiles");

// kInOut row stream (few rows): x pairs packed per block of this many pairs.
constexpr size_t kStreamPairs = 1024;
constexpr int kStreamMaxRows = 8;

KVLM_BF16DOT_INLINE __mmask16 Mask16(size_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1);
}

KVLM_BF16DOT_INLINE __mmask32 Mask32(size_t n) {
  return n >= 32 ? static_cast<__mmask32>(0xffffffffu) : static_cast<__mmask32>((1u << n) - 1);
}

// Lane j of the result takes element j / 2 of the first (j even) or second (j odd) operand.
KVLM_BF16DOT_INLINE __m512i InterleaveIndex() {
  alignas(64) static const uint16_t kIndex[32] = {0,  32, 1,  33, 2,  34, 3,  35, 4,  36, 5,
                                                  37, 6,  38, 7,  39, 8,  40, 9,  41, 10, 42,
                                                  11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
  return _mm512_load_si512(kIndex);
}

// (r0[c], r1[c]) pairs for columns c < n (at most 16); r1 null (past the last row) reads 0.
KVLM_BF16DOT_INLINE __m512i PairUp(const uint16_t* r0, const uint16_t* r1, size_t n,
                                   __m512i index) {
  const __mmask32 m = Mask32(std::min<size_t>(n, kLanes));
  const __m512i a = _mm512_maskz_loadu_epi16(m, r0);
  const __m512i b = r1 ? _mm512_maskz_loadu_epi16(m, r1) : _mm512_setzero_si512();
  return _mm512_permutex2var_epi16(a, index, b);
}

// Lane k: (bf16(src[i + 2k]), bf16(src[i + 2k + 1])), rounded to nearest even; 0 past n_in.
KVLM_BF16DOT_INLINE __m512i RowPairs(const float* src, size_t n_in, size_t i) {
  const size_t n = std::min<size_t>(2 * kLanes, n_in - std::min(n_in, i));
  const __m512 lo = _mm512_maskz_loadu_ps(Mask16(n), src + i);
  const __m512 hi = _mm512_maskz_loadu_ps(Mask16(n > kLanes ? n - kLanes : 0), src + i + kLanes);
  return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
}

// a[(r / S) * pc * S + p * S + r % S] = (bf16(x[r][2(p0+p)]), bf16(x[r][2(p0+p)+1])): rows of
// x packed as bf16 pairs in tiles of S rows; rows `rows`..S*ceil(rows/S)-1 and x past n_in: 0.
KVLM_BF16DOT_NOINLINE void PackRowPairs(uint32_t* a, size_t S, const float* x, size_t n_in,
                                        size_t rows, size_t p0, size_t pc) {
  const size_t padded = (rows + S - 1) / S * S;
  alignas(64) uint32_t pairs[kLanes];
  for (size_t r = 0; r < padded; ++r) {
    uint32_t* dst = a + (r / S) * pc * S + r % S;
    if (r >= rows) {
      for (size_t p = 0; p < pc; ++p) dst[p * S] = 0;
      continue;
    }
    const float* src = x + r * n_in;
    for (size_t p = 0; p < pc; p += kLanes) {
      _mm512_store_si512(pairs, RowPairs(src, n_in, 2 * (p0 + p)));
      for (size_t k = 0; k < kLanes && p + k < pc; ++k) dst[(p + k) * S] = pairs[k];
    }
  }
}

// a[r * pc + p] = (bf16(x[r][2(p0+p)]), bf16(x[r][2(p0+p)+1])) for r < padded: each row's pairs
// contiguous (a vector store per 16 pairs, where PackRowPairs' tiles of rows scatter them one by
// one); rows `rows`..padded-1 and x past n_in: 0. The tiled prefill's layout: its tiles
// broadcast a row's pair from L1 either way.
KVLM_BF16DOT_NOINLINE void PackRowPairsByRow(uint32_t* a, const float* x, size_t n_in, size_t rows,
                                             size_t padded, size_t p0, size_t pc) {
  for (size_t r = 0; r < padded; ++r) {
    uint32_t* dst = a + r * pc;
    if (r >= rows) {
      std::fill(dst, dst + pc, 0u);
      continue;
    }
    const float* src = x + r * n_in;
    for (size_t p = 0; p < pc; p += kLanes) {
      _mm512_mask_storeu_epi32(dst + p, Mask16(pc - p), RowPairs(src, n_in, 2 * (p0 + p)));
    }
  }
}

// p[q][c] = (W[2(p0+q)][col+c], W[2(p0+q)+1][col+c]) for q < pc, c < kTileCols; 0 past the
// matrix.
KVLM_BF16DOT_NOINLINE void PackPanel(uint32_t* p, const uint16_t* w, size_t n_in, size_t n_out,
                                     size_t p0, size_t pc, size_t col, size_t n_cols) {
  const __m512i index = InterleaveIndex();
  for (size_t q = 0; q < pc; ++q) {
    const size_t i = 2 * (p0 + q);
    const uint16_t* r0 = w + i * n_out + col;
    const uint16_t* r1 = i + 1 < n_in ? r0 + n_out : nullptr;
    // The next strip's part of these rows: fetched now, packed after this strip's tiles.
    _mm_prefetch(reinterpret_cast<const char*>(r0 + kTileCols), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(r0 + kTileCols + 32), _MM_HINT_T0);
    if (r1) {
      _mm_prefetch(reinterpret_cast<const char*>(r1 + kTileCols), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(r1 + kTileCols + 32), _MM_HINT_T0);
    }
    for (int v = 0; v < kTileVecs; ++v) {
      const size_t c = v * kLanes;
      const size_t n = c < n_cols ? n_cols - c : 0;
      _mm512_store_si512(p + q * kTileCols + c, n ? PairUp(r0 + c, r1 ? r1 + c : nullptr, n, index)
                                                  : _mm512_setzero_si512());
    }
  }
}

// A tile's weight pairs: the packed panel.
struct PanelPairs {
  const uint32_t* p;
  KVLM_BF16DOT_INLINE __m512i operator()(size_t q, int v) const {
    return _mm512_load_si512(p + q * kTileCols + v * kLanes);
  }
};

// out[0, rows) x [col, col + n_cols): pc more pairs of each chain. a: [R][pc] x pairs.
// `first`: chains start at zero (else continue from out); `last`: bias added as they are stored.
template <int R, int V, typename Pairs>
KVLM_BF16DOT_INLINE void Tile(float* out, size_t n_out, const uint32_t* a, const Pairs& pairs,
                              size_t pc, const float* bias, bool first, bool last, size_t rows,
                              size_t col, size_t n_cols) {
  __m512 acc[R][V];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) {
      const size_t c = v * kLanes;
      acc[r][v] = first || static_cast<size_t>(r) >= rows || c >= n_cols
                      ? _mm512_setzero_ps()
                      : _mm512_maskz_loadu_ps(Mask16(n_cols - c), out + r * n_out + col + c);
    }
  for (size_t q = 0; q < pc; ++q) {
    __m512i wv[V];
    for (int v = 0; v < V; ++v) wv[v] = pairs(q, v);
    for (int r = 0; r < R; ++r) {
      const __m512bh xb = reinterpret_cast<__m512bh>(_mm512_set1_epi32(a[r * pc + q]));
      for (int v = 0; v < V; ++v)
        acc[r][v] = _mm512_dpbf16_ps(acc[r][v], xb, reinterpret_cast<__m512bh>(wv[v]));
    }
  }
  for (int r = 0; r < R && static_cast<size_t>(r) < rows; ++r)
    for (int v = 0; v < V; ++v) {
      const size_t c = v * kLanes;
      if (c >= n_cols) break;
      const __mmask16 m = Mask16(n_cols - c);
      __m512 sum = acc[r][v];
      if (last && bias) sum = _mm512_add_ps(sum, _mm512_maskz_loadu_ps(m, bias + col + c));
      _mm512_mask_storeu_ps(out + r * n_out + col + c, m, sum);
    }
}

// kInOut tiled, thread t of nt: a contiguous range of 48-column strips, all rows.
KVLM_BF16DOT_NOINLINE void InOutTiledThread(float* out, const float* x, const uint16_t* w,
                                            const float* bias, size_t n_rows, size_t n_in,
                                            size_t n_out, size_t t, size_t nt) {
  const size_t n_strips = (n_out + kTileCols - 1) / kTileCols;
  const size_t s0 = n_strips * t / nt, s1 = n_strips * (t + 1) / nt;
  if (s0 == s1) return;
  const size_t n_pairs = (n_in + 1) / 2;
  alignas(64) uint32_t a[kBlockRows * kBlockPairs];
  alignas(64) uint32_t p[kBlockPairs * kTileCols];
  for (size_t r0 = 0; r0 < n_rows; r0 += kBlockRows) {
    const size_t rows = std::min(kBlockRows, n_rows - r0);
    const size_t padded = (rows + kTileRows - 1) / kTileRows * kTileRows;
    // n_in == 0 still takes one (empty) block, which stores the bias.
    for (size_t p0 = 0; p0 < n_pairs || p0 == 0; p0 += kBlockPairs) {
      const size_t pc = std::min(kBlockPairs, n_pairs - p0);
      const bool first = p0 == 0, last = p0 + kBlockPairs >= n_pairs;
      PackRowPairsByRow(a, x + r0 * n_in, n_in, rows, padded, p0, pc);
      for (size_t s = s0; s < s1; ++s) {
        const size_t col = s * kTileCols, n_cols = std::min(kTileCols, n_out - col);
        PackPanel(p, w, n_in, n_out, p0, pc, col, n_cols);
        for (size_t tr = 0; tr < rows; tr += kTileRows)
          Tile<kTileRows, kTileVecs>(out + (r0 + tr) * n_out, n_out, a + tr * pc, PanelPairs{p}, pc,
                                     bias, first, last, std::min<size_t>(kTileRows, rows - tr), col,
                                     n_cols);
      }
      if (n_pairs == 0) break;
    }
  }
}

// kInOut row stream, thread t of nt, R rows: a contiguous range of 16-column vectors, in chunks
// whose accumulators (R x chunk fp32, 8 KB) stay in L1 while the weight rows are read in order,
// four pairs of rows per pass, each row's part of the chunk one sequential stretch: every weight
// byte crosses the memory bus once, in streams the prefetchers follow (decode is bound by them).
template <int R>
KVLM_BF16DOT_NOINLINE void InOutStreamThread(float* out, const float* x, const uint16_t* w,
                                             const float* bias, size_t n_in, size_t n_out, size_t t,
                                             size_t nt) {
  constexpr size_t kAccFloats = 2048;
  constexpr size_t kPassPairs = 4;  // pairs of weight rows per pass over the accumulators
  constexpr size_t kChunk = std::max<size_t>(kLanes, kAccFloats / R / kLanes * kLanes);
  const size_t n_vecs = (n_out + kLanes - 1) / kLanes;
  const size_t c0 = n_vecs * t / nt * kLanes;
  const size_t c1 = std::min(n_out, n_vecs * (t + 1) / nt * kLanes);
  if (c0 >= c1) return;
  const size_t n_pairs = (n_in + 1) / 2;
  const __m512i index = InterleaveIndex();
  alignas(64) float acc[kAccFloats];
  alignas(64) uint32_t a[R * kStreamPairs];
  for (size_t cb = c0; cb < c1; cb += kChunk) {
    const size_t nc = std::min(kChunk, c1 - cb), nv = (nc + kLanes - 1) / kLanes;
    const size_t stride = nv * kLanes;
    for (size_t k = 0; k < R * stride; k += kLanes) _mm512_store_ps(acc + k, _mm512_setzero_ps());
    for (size_t p0 = 0; p0 < n_pairs; p0 += kStreamPairs) {
      const size_t pc = std::min(kStreamPairs, n_pairs - p0);
      PackRowPairs(a, R, x, n_in, R, p0, pc);
      for (size_t q = 0; q < pc; q += kPassPairs) {
        const size_t np = std::min(kPassPairs, pc - q);  // pairs of rows in this pass
        const size_t i = 2 * (p0 + q);
        const uint16_t* r0 = w + i * n_out + cb;
        for (size_t v = 0; v < nv; ++v) {
          const size_t c = v * kLanes, n = std::min(kLanes, nc - c);
          if (v % 2 == 0 && i + 16 < n_in) {  // these rows' next cache line, two passes ahead
            const char* ahead = reinterpret_cast<const char*>(r0 + 16 * n_out + c);
            for (size_t k = 0; k < 2 * kPassPairs && i + 16 + k < n_in; ++k)
              PrefetchToL2(ahead + k * n_out * sizeof(uint16_t));
          }
          __m512bh wv[kPassPairs];
          for (size_t k = 0; k < kPassPairs; ++k) {
            const uint16_t* even = r0 + 2 * k * n_out + c;
            wv[k] = reinterpret_cast<__m512bh>(
                k < np ? PairUp(even, i + 2 * k + 1 < n_in ? even + n_out : nullptr, n, index)
                       : _mm512_setzero_si512());
          }
          for (int r = 0; r < R; ++r) {
            float* ar = acc + r * stride + c;
            __m512 sum = _mm512_load_ps(ar);
            for (size_t k = 0; k < kPassPairs; ++k)
              if (k < np)
                sum = _mm512_dpbf16_ps(
                    sum, reinterpret_cast<__m512bh>(_mm512_set1_epi32(a[(q + k) * R + r])), wv[k]);
            _mm512_store_ps(ar, sum);
          }
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (size_t v = 0; v < nv; ++v) {
        const size_t c = v * kLanes;
        const __mmask16 m = Mask16(nc - c);
        __m512 sum = _mm512_load_ps(acc + r * stride + c);
        if (bias) sum = _mm512_add_ps(sum, _mm512_maskz_loadu_ps(m, bias + cb + c));
        _mm512_mask_storeu_ps(out + r * n_out + cb + c, m, sum);
      }
  }
}

// The 16 bf16 columns at p, 32 bytes, never more: the permute that pairs them reads only the low
// 16 elements of each operand, so a full vector (kFull) is one 256-bit load with the upper half
// left undefined, a partial one a masked load that reads nothing past its columns. (A 512-bit
// load would read the next 16 columns too, past the end of the matrix at its last tile.)
template <bool kFull>
KVLM_BF16DOT_INLINE __m512i LoadColumns16(const uint16_t* p, __mmask32 mask) {
  if constexpr (kFull) {
    return _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  } else {
    return _mm512_maskz_loadu_epi16(mask, p);
  }
}

// One pass of the row stream's register tile: pairs [0, qb) of rows R x columns
// [col, col + n_cols) (n_cols <= V * 16; kFull: exactly V * 16), the chains continued from
// `out` (or from zero when `first`; bias added when `last`). w: weight row i at column col;
// odd_missing: the last pair has no odd row (odd n_in), its second half reads 0. The weight
// pairs are built in registers as they are read, each feeding R vdpbf16ps; the same columns of
// the rows at `ahead` (the next tile's) are fetched two rows per pair.
template <int R, int V, bool kFull>
KVLM_BF16DOT_INLINE void StreamRegTile(float* out, size_t n_out, const uint32_t* a,
                                       const uint16_t* w, size_t qb, bool odd_missing,
                                       const float* bias, bool first, bool last, size_t col,
                                       size_t n_cols, const uint16_t* ahead, __m512i index) {
  __mmask32 m[V];
  for (int v = 0; v < V; ++v)
    m[v] = kFull ? Mask32(kLanes)
                 : Mask32(std::min<size_t>(kLanes, n_cols - std::min(n_cols, v * kLanes)));
  __m512 acc[R][V];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v)
      acc[r][v] = first ? _mm512_setzero_ps()
                        : _mm512_maskz_loadu_ps(static_cast<__mmask16>(m[v]),
                                                out + r * n_out + col + v * kLanes);
  constexpr size_t kBytes = V * kLanes * sizeof(uint16_t);
  auto pass = [&](size_t q, bool with_odd) KVLM_BF16DOT_TARGET {
    if (ahead) {
      for (size_t k = 2 * q; k < 2 * q + 2; ++k) {
        const char* next = reinterpret_cast<const char*>(ahead + k * n_out);
        for (size_t b = 0; b < kBytes; b += 64) PrefetchToL2(next + b);
        PrefetchToL2(next + kBytes - 1);
      }
    }
    const uint16_t* even = w + 2 * q * n_out;
    __m512bh wv[V];
    for (int v = 0; v < V; ++v) {
      const __m512i e = LoadColumns16<kFull>(even + v * kLanes, m[v]);
      const __m512i o =
          with_odd ? LoadColumns16<kFull>(even + n_out + v * kLanes, m[v]) : _mm512_setzero_si512();
      wv[v] = reinterpret_cast<__m512bh>(_mm512_permutex2var_epi16(e, index, o));
    }
    for (int r = 0; r < R; ++r) {
      const __m512bh xb = reinterpret_cast<__m512bh>(_mm512_set1_epi32(a[q * R + r]));
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], xb, wv[v]);
    }
  };
  const size_t q_full = odd_missing ? qb - 1 : qb;
  for (size_t q = 0; q < q_full; ++q) pass(q, true);
  if (q_full < qb) pass(q_full, false);
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) {
      const __mmask16 mv = static_cast<__mmask16>(m[v]);
      __m512 sum = acc[r][v];
      if (last && bias)
        sum = _mm512_add_ps(sum, _mm512_maskz_loadu_ps(mv, bias + col + v * kLanes));
      _mm512_mask_storeu_ps(out + r * n_out + col + v * kLanes, mv, sum);
    }
}

// kInOut row stream with register tiles, R (3..8) rows, thread t of nt: within each chunk of
// its columns, the accumulators of the R rows x V vectors (24 of the 32 registers) stay in
// registers for kTilePairs pairs of weight rows (StreamRegTile), each pair vector built once
// from the matrix and feeding R vdpbf16ps; the chains live in `out` between tiles. The one-pass
// kernel above loaded and stored every accumulator every 4 pairs and took its x pair from memory
// for each vector: batch-8 decode ran at the load ports' rate, twice the F16 row stream's time.
// Each output is still one chain over the pairs in increasing order from zero, so the bits are
// InOutStreamThread's.
template <int R>
KVLM_BF16DOT_NOINLINE void InOutStreamRegThread(float* out, const float* x, const uint16_t* w,
                                                const float* bias, size_t n_in, size_t n_out,
                                                size_t t, size_t nt) {
  constexpr int V = std::max(1, 24 / R);
  constexpr size_t kCols = V * kLanes;
  constexpr size_t kTilePairs = 16;  // 32 weight rows per register pass
  constexpr size_t kChunk = std::max(kCols, 2048 / R / kCols * kCols);
  const size_t n_vecs = (n_out + kLanes - 1) / kLanes;
  const size_t c0 = n_vecs * t / nt * kLanes;
  const size_t c1 = std::min(n_out, n_vecs * (t + 1) / nt * kLanes);
  if (c0 >= c1) return;
  const size_t n_pairs = (n_in + 1) / 2;
  const __m512i index = InterleaveIndex();
  alignas(64) uint32_t a[R * kStreamPairs];
  for (size_t cb = c0; cb < c1; cb += kChunk) {
    const size_t ce = std::min(c1, cb + kChunk);
    for (size_t p0 = 0; p0 < n_pairs; p0 += kStreamPairs) {
      const size_t pc = std::min(kStreamPairs, n_pairs - p0);
      PackRowPairs(a, R, x, n_in, R, p0, pc);
      for (size_t q0 = 0; q0 < pc; q0 += kTilePairs) {
        const size_t qb = std::min(kTilePairs, pc - q0), i = 2 * (p0 + q0);
        const bool first = p0 + q0 == 0, last = p0 + q0 + qb == n_pairs;
        // The next tile's rows, or the next chunk's first rows after the last tile.
        const uint16_t* ahead = !last ? w + (i + 2 * qb) * n_out + cb : ce < c1 ? w + ce : nullptr;
        const bool odd_missing = i + 2 * qb > n_in;
        for (size_t col = cb; col < ce; col += kCols) {
          const size_t n_cols = std::min(kCols, ce - col);
          const uint16_t* wt = w + i * n_out + col;
          const uint16_t* at = ahead ? ahead + (col - cb) : nullptr;
          if (n_cols == kCols) {
            StreamRegTile<R, V, true>(out, n_out, a + q0 * R, wt, qb, odd_missing, bias, first,
                                      last, col, n_cols, at, index);
          } else {
            StreamRegTile<R, V, false>(out, n_out, a + q0 * R, wt, qb, odd_missing, bias, first,
                                       last, col, n_cols, at, index);
          }
        }
      }
    }
  }
}

// The V streams of a group of strips [sb, end) read side by side (each strip `strip_values`
// long), each fetched `ahead` vectors before it is read: within its own strip while it lasts, then
// in the strip the same stream reads in the next group (V strips on, below `next_end`: the end of
// the strips the thread expects to read next).
// A fetch that ran on past its strip in memory reached the next group only for the last stream
// (the strips are stored in order), so the others started cold at every group: every 384 pairs
// of GPT-2's 768-input matrices at 16 columns a strip. Zen 5, BF16, 8 rows, 2 threads, interleaved
// in one process: c_fc's shape 1.19x the GB/s, c_attn's 1.12x, mlp.c_proj's (3072 inputs) 1.04x;
// `kvlm bench --weights bf16 --decode-only` batch 8 1.09x (median of 6 pairs, 0.85-1.18x).
template <int V>
struct GroupStreams {
  const uint16_t* w[V];     // stream v's strip
  const uint16_t* next[V];  // the strip stream v reads next, null after the thread's last group
  size_t n_vecs;            // 32-value vectors per strip

  KVLM_BF16DOT_INLINE GroupStreams(const uint16_t* strips, size_t strip_values, size_t sb,
                                   size_t end, size_t next_end) {
    n_vecs = strip_values / 32;
    const size_t nv = std::min<size_t>(V, end - sb), next_sb = sb + V;
    for (int v = 0; v < V; ++v) {
      w[v] = strips + (sb + std::min<size_t>(v, nv - 1)) * strip_values;
      next[v] = next_sb < next_end ? strips + std::min(next_sb + v, next_end - 1) * strip_values
                                   : nullptr;
    }
  }
  // Fetches stream v's vector k + ahead, then loads its vector k.
  KVLM_BF16DOT_INLINE __m512bh FetchAndLoad(int v, size_t k, size_t ahead) const {
    const size_t f = k + ahead;
    if (f < n_vecs) {
      PrefetchToL2(w[v] + f * 32);
    } else if (next[v] && f - n_vecs < n_vecs) {
      PrefetchToL2(next[v] + (f - n_vecs) * 32);
    }
    return reinterpret_cast<__m512bh>(_mm512_loadu_si512(w[v] + k * 32));
  }
};

// kInOut decode over the weights packed at load as AMX tiles (WeightMatrix::amx_tiles,
// matmul_bf16amx.h): a 16-column strip's pair p is the 32 values at p * 32 of the strip, already
// (W[2p][c], W[2p+1][c]) pairs as vdpbf16ps takes them (0 for the missing odd row of an odd
// n_in), and each strip is one contiguous stream. R (1..8) rows x V strips of accumulators stay
// in registers over all pairs, x pairs broadcast from a packed copy: no pairing permutes, and V
// sequential streams instead of 64-byte pieces of rows kilobytes apart. Each output is one chain
// over the pairs in increasing order from zero, so the bits are InOutStreamRegThread's.
// At most 8 strips (streams) at once: one or two rows would take 24 or 12, and batch-1 decode
// over 24 interleaved streams ran at half the rate of 4 to 8 (Zen 5, kernels_bench's layer
// shapes, 2 threads: 87-167 us against 49-61 us).
template <int R>
constexpr int kTilesGroup = std::min(8, 24 / R);

// Strips [s0, s1) of InOutTilesThread, x pairs packed at a; the thread reads on to next_end.
// A function of its own: with the claims of InOutTilesThread around its loop, GCC 12 kept the 24
// accumulators of 8 rows on the stack (65 instructions a pair step against 41).
template <int R>
KVLM_BF16DOT_NOINLINE void InOutTilesRange(float* out, const uint32_t* a, const uint16_t* tiles,
                                           const float* bias, size_t n_in, size_t n_out, size_t s0,
                                           size_t s1, size_t next_end) {
  constexpr int V = kTilesGroup<R>;
  // Each stream's lines fetched this many pairs ahead (8-64 measured alike, batch-8 decode).
  constexpr size_t kAheadPairs = 32;
  const size_t n_pairs = (n_in + 1) / 2;
  const size_t strip_values = (n_in + 31) / 32 * 512;
  for (size_t sb = s0; sb < s1; sb += V) {
    const int nv = static_cast<int>(std::min<size_t>(V, s1 - sb));
    const GroupStreams<V> streams(tiles, strip_values, sb, s1, next_end);
    __m512 acc[R][V];
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
    for (size_t p = 0; p < n_pairs; ++p) {
      __m512bh wv[V];
      for (int v = 0; v < V; ++v) wv[v] = streams.FetchAndLoad(v, p, kAheadPairs);
      for (int r = 0; r < R; ++r) {
        const __m512bh xb = reinterpret_cast<__m512bh>(_mm512_set1_epi32(a[p * R + r]));
        for (int v = 0; v < V; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], xb, wv[v]);
      }
    }
    for (int v = 0; v < nv; ++v) {
      const size_t col = (sb + v) * kLanes;
      const __mmask16 m = Mask16(n_out - col);
      for (int r = 0; r < R; ++r) {
        __m512 sum = acc[r][v];
        if (bias) sum = _mm512_add_ps(sum, _mm512_maskz_loadu_ps(m, bias + col));
        _mm512_mask_storeu_ps(out + r * n_out + col, m, sum);
      }
    }
  }
}

// Member t's strips of a Range kernel below (InOutTilesRange, OutInStripsRange): x's R rows
// packed as pairs [p][R] for pairs [0, n_pairs), then a group of strips a claim
// (ops/stealable_shares.h), its streams fetching on into the rest of the member's share, the
// group it most likely claims next.
template <int R, class Range>
KVLM_BF16DOT_INLINE void ClaimedGroups(const float* x, size_t n_in, size_t n_pairs, int t,
                                       StealableShares& shares, size_t grain, Range&& range) {
  thread_local std::vector<uint32_t> packed;
  packed.resize(n_pairs * R);
  uint32_t* a = packed.data();
  for (size_t p0 = 0; p0 < n_pairs; p0 += kStreamPairs)
    PackRowPairs(a + p0 * R, R, x, n_in, R, p0, std::min(kStreamPairs, n_pairs - p0));
  for (auto [s0, s1] = shares.claim(t, grain); s0 < s1; std::tie(s0, s1) = shares.claim(t, grain))
    range(a, s0, s1, std::max<size_t>(s1, shares.share_end(t)));
}

template <int R>
KVLM_BF16DOT_NOINLINE void InOutTilesThread(float* out, const float* x, const uint16_t* tiles,
                                            const float* bias, size_t n_in, size_t n_out, int t,
                                            StealableShares& shares) {
  ClaimedGroups<R>(x, n_in, (n_in + 1) / 2, t, shares, kTilesGroup<R>,
                   [&](const uint32_t* a, size_t s0, size_t s1, size_t next_end) {
                     InOutTilesRange<R>(out, a, tiles, bias, n_in, n_out, s0, s1, next_end);
                   });
}

// kOutIn batched decode over the head's pair strips packed at load (pack_bf16dot_head_strips):
// lane l of an output's stated chain is, for 16 outputs at once, one vdpbf16ps chain over the
// strip's class-l vectors, chunk by chunk. R (3..8) rows x V strips of a class's chains run in
// registers to their end, the 16 classes' sums go to `sums`, and the stated tree adds them
// elementwise across each strip's 16 outputs: no lane sums per output, no x re-rounded per tile,
// and each strip one contiguous stream. Padded pairs are zeros, as the stated order reads them.
template <int R>
constexpr int kHeadStripsGroup = std::max(1, 24 / R);

// Strips [s0, s1) of OutInStripsThread, x pairs p = 16 c + l for every row packed at a ([p][R]);
// the thread reads on to next_end. A function of its own, as InOutTilesRange.
template <int R>
KVLM_BF16DOT_NOINLINE void OutInStripsRange(float* out, const uint32_t* a, const uint16_t* strips,
                                            const float* bias, size_t n_in, size_t n_out, size_t s0,
                                            size_t s1, size_t next_end) {
  constexpr int V = kHeadStripsGroup<R>;
  constexpr size_t kAheadVecs = 32;  // each stream's lines fetched this many vectors ahead
  const size_t C = (n_in + 31) / 32, strip_values = 16 * C * 32;
  alignas(64) float sums[16][R][V][kLanes];
  for (size_t sb = s0; sb < s1; sb += V) {
    const int nv = static_cast<int>(std::min<size_t>(V, s1 - sb));
    const GroupStreams<V> streams(strips, strip_values, sb, s1, next_end);
    for (size_t l = 0; l < 16; ++l) {
      __m512 acc[R][V];
      for (int r = 0; r < R; ++r)
        for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
      for (size_t c = 0; c < C; ++c) {
        const size_t k = l * C + c;  // the vector's place in its strip
        __m512bh wv[V];
        for (int v = 0; v < V; ++v) wv[v] = streams.FetchAndLoad(v, k, kAheadVecs);
        for (int r = 0; r < R; ++r) {
          const __m512bh xb =
              reinterpret_cast<__m512bh>(_mm512_set1_epi32(a[(16 * c + l) * R + r]));
          for (int v = 0; v < V; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], xb, wv[v]);
        }
      }
      for (int r = 0; r < R; ++r)
        for (int v = 0; v < V; ++v) _mm512_store_ps(sums[l][r][v], acc[r][v]);
    }
    for (int v = 0; v < nv; ++v) {
      const size_t col = (sb + v) * kLanes;
      const __mmask16 m = Mask16(n_out - col);
      for (int r = 0; r < R; ++r) {
        __m512 tl[8], ul[4];
        for (int l = 0; l < 8; ++l)
          tl[l] = _mm512_add_ps(_mm512_load_ps(sums[l][r][v]), _mm512_load_ps(sums[l + 8][r][v]));
        for (int l = 0; l < 4; ++l) ul[l] = _mm512_add_ps(tl[l], tl[l + 4]);
        __m512 sum = _mm512_add_ps(_mm512_add_ps(ul[0], ul[2]), _mm512_add_ps(ul[1], ul[3]));
        if (bias) sum = _mm512_add_ps(sum, _mm512_maskz_loadu_ps(m, bias + col));
        _mm512_mask_storeu_ps(out + r * n_out + col, m, sum);
      }
    }
  }
}

// kOutIn: outputs [o0, o0 + RO) for rows [0, rows) (rows <= RR), each a 16-lane chain over
// 32-element chunks, reduced as matmul_bf16dot.h states.
template <int RO, int RR>
KVLM_BF16DOT_INLINE void OutInTile(float* out, size_t n_out, const float* x, size_t n_in,
                                   const uint16_t* w, const float* bias, size_t rows) {
  __m512 acc[RR][RO];
  for (int r = 0; r < RR; ++r)
    for (int o = 0; o < RO; ++o) acc[r][o] = _mm512_setzero_ps();
  // The RO rows are one contiguous stretch and the next tile's follow: each chunk fetches as
  // many of the next tile's bytes as it reads, in order, so the weights arrive as one stream.
  const char* ahead = reinterpret_cast<const char*>(w + RO * n_in);
  for (size_t c = 0; c < n_in; c += 2 * kLanes) {
    for (size_t line = 0; line < RO * 2 * kLanes * sizeof(uint16_t); line += 64)
      PrefetchToL2(ahead + c * RO * sizeof(uint16_t) + line);
    const size_t n = std::min(2 * kLanes, n_in - c);
    const __mmask16 mlo = Mask16(n), mhi = Mask16(n > kLanes ? n - kLanes : 0);
    __m512bh xv[RR];
    for (int r = 0; r < RR; ++r) {
      const float* xr = x + std::min<size_t>(r, rows - 1) * n_in + c;  // pad rows: any row
      xv[r] = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(mhi, xr + kLanes),
                                  _mm512_maskz_loadu_ps(mlo, xr));
    }
    const __mmask32 mw = Mask32(n);
    for (int o = 0; o < RO; ++o) {
      const __m512bh wv =
          reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi16(mw, w + o * n_in + c));
      for (int r = 0; r < RR; ++r) acc[r][o] = _mm512_dpbf16_ps(acc[r][o], xv[r], wv);
    }
  }
  for (int r = 0; r < RR && static_cast<size_t>(r) < rows; ++r)
    for (int o = 0; o < RO; ++o) {
      const __m512 s = acc[r][o];
      const __m256 t = _mm256_add_ps(_mm512_extractf32x8_ps(s, 0), _mm512_extractf32x8_ps(s, 1));
      const __m128 u = _mm_add_ps(_mm256_extractf128_ps(t, 0), _mm256_extractf128_ps(t, 1));
      const __m128 v = _mm_add_ps(u, _mm_movehl_ps(u, u));  // u0 + u2, u1 + u3
      float sum = _mm_cvtss_f32(v) + _mm_cvtss_f32(_mm_shuffle_ps(v, v, 1));
      if (bias) sum += bias[o];
      out[r * n_out + o] = sum;
    }
}

// kOutIn output tile t (RO outputs, fewer at the end), all rows in groups of RR.
template <int RO, int RR>
KVLM_BF16DOT_NOINLINE void OutInOutputTile(float* out, const float* x, const uint16_t* w,
                                           const float* bias, size_t n_rows, size_t n_in,
                                           size_t n_out, size_t t) {
  const size_t o0 = t * RO;
  for (size_t r0 = 0; r0 < n_rows; r0 += RR) {
    const size_t rows = std::min<size_t>(RR, n_rows - r0);
    float* o = out + r0 * n_out;
    const float* xr = x + r0 * n_in;
    if (o0 + RO <= n_out) {
      OutInTile<RO, RR>(o + o0, n_out, xr, n_in, w + o0 * n_in, bias ? bias + o0 : nullptr, rows);
    } else {
      for (size_t k = o0; k < n_out; ++k)
        OutInTile<1, RR>(o + k, n_out, xr, n_in, w + k * n_in, bias ? bias + k : nullptr, rows);
    }
  }
}

// kOutIn, one row (decode): x rounded to bf16 once per thread (the same bits OutInTile makes
// chunk by chunk), then RO outputs at a time; each output the same chain as OutInTile's.
constexpr size_t kOutInMaxIn = 16384;  // x as bf16 on the stack: 32 KB

template <int RO>
KVLM_BF16DOT_INLINE void OutInTileRow(float* out, const uint16_t* xb, size_t n_in,
                                      const uint16_t* w, const float* bias) {
  __m512 acc[RO];
  for (int o = 0; o < RO; ++o) acc[o] = _mm512_setzero_ps();
  const char* ahead = reinterpret_cast<const char*>(w + RO * n_in);
  for (size_t c = 0; c < n_in; c += 2 * kLanes) {
    for (size_t line = 0; line < RO * 2 * kLanes * sizeof(uint16_t); line += 64)
      PrefetchToL2(ahead + c * RO * sizeof(uint16_t) + line);
    const __mmask32 mw = Mask32(std::min(2 * kLanes, n_in - c));
    const __m512bh xv = reinterpret_cast<__m512bh>(_mm512_load_si512(xb + c));
    for (int o = 0; o < RO; ++o)
      acc[o] = _mm512_dpbf16_ps(
          acc[o], xv, reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi16(mw, w + o * n_in + c)));
  }
  for (int o = 0; o < RO; ++o) {
    const __m512 s = acc[o];
    const __m256 t = _mm256_add_ps(_mm512_extractf32x8_ps(s, 0), _mm512_extractf32x8_ps(s, 1));
    const __m128 u = _mm_add_ps(_mm256_extractf128_ps(t, 0), _mm256_extractf128_ps(t, 1));
    const __m128 v = _mm_add_ps(u, _mm_movehl_ps(u, u));  // u0 + u2, u1 + u3
    const float sum = _mm_cvtss_f32(v) + _mm_cvtss_f32(_mm_shuffle_ps(v, v, 1));
    out[o] = bias ? sum + bias[o] : sum;
  }
}

template <int RO>
KVLM_BF16DOT_NOINLINE void OutInRowThread(float* out, const float* x, const uint16_t* w,
                                          const float* bias, size_t n_in, size_t n_out, size_t t,
                                          size_t nt) {
  const size_t n_tiles = (n_out + RO - 1) / RO;
  const size_t t0 = n_tiles * t / nt, t1 = n_tiles * (t + 1) / nt;
  if (t0 == t1) return;
  alignas(64) uint16_t xb[kOutInMaxIn];
  for (size_t c = 0; c < n_in; c += 2 * kLanes) {
    const size_t n = std::min(2 * kLanes, n_in - c);
    const __m512bh v = _mm512_cvtne2ps_pbh(
        _mm512_maskz_loadu_ps(Mask16(n > kLanes ? n - kLanes : 0), x + c + kLanes),
        _mm512_maskz_loadu_ps(Mask16(n), x + c));
    _mm512_store_si512(xb + c, reinterpret_cast<__m512i>(v));
  }
  for (size_t tile = t0; tile < t1; ++tile) {
    const size_t o0 = tile * RO;
    if (o0 + RO <= n_out) {
      OutInTileRow<RO>(out + o0, xb, n_in, w + o0 * n_in, bias ? bias + o0 : nullptr);
    } else {
      for (size_t k = o0; k < n_out; ++k)
        OutInTileRow<1>(out + k, xb, n_in, w + k * n_in, bias ? bias + k : nullptr);
    }
  }
}

// kOutIn, several rows (prefill): blocks of rows rounded to bf16 once per thread into a stack
// buffer (rows zero-padded to whole 32-element chunks), then for each of the thread's output
// tiles every group of RR rows of the block, so a tile's RO weight rows stay in L1 while the
// block's rows pass over them. Each output the same chain as OutInTile's.
constexpr size_t kOutInBlockElems = 131072;  // x of a row block as bf16: 256 KB

// ahead (or null): the next tile's weights, fetched chunk by chunk as this tile's are read, so
// that a block's first row group streams the weights in order (batched decode reads them from
// memory once, like OutInTileRow).
template <int RO, int RR>
KVLM_BF16DOT_INLINE void OutInTileBlock(float* out, size_t n_out, const uint16_t* xb, size_t xs,
                                        size_t n_in, const uint16_t* w, const float* bias,
                                        size_t rows, const char* ahead) {
  __m512 acc[RR][RO];
  for (int r = 0; r < RR; ++r)
    for (int o = 0; o < RO; ++o) acc[r][o] = _mm512_setzero_ps();
  for (size_t c = 0; c < n_in; c += 2 * kLanes) {
    if (ahead)
      for (size_t line = 0; line < RO * 2 * kLanes * sizeof(uint16_t); line += 64)
        PrefetchToL2(ahead + c * RO * sizeof(uint16_t) + line);
    const __mmask32 mw = Mask32(std::min(2 * kLanes, n_in - c));
    __m512bh xv[RR];
    for (int r = 0; r < RR; ++r)  // pad rows: any row of the block
      xv[r] = reinterpret_cast<__m512bh>(
          _mm512_load_si512(xb + std::min<size_t>(r, rows - 1) * xs + c));
    for (int o = 0; o < RO; ++o) {
      const __m512bh wv =
          reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi16(mw, w + o * n_in + c));
      for (int r = 0; r < RR; ++r) acc[r][o] = _mm512_dpbf16_ps(acc[r][o], xv[r], wv);
    }
  }
  for (int r = 0; r < RR && static_cast<size_t>(r) < rows; ++r)
    for (int o = 0; o < RO; ++o) {
      const __m512 s = acc[r][o];
      const __m256 t = _mm256_add_ps(_mm512_extractf32x8_ps(s, 0), _mm512_extractf32x8_ps(s, 1));
      const __m128 u = _mm_add_ps(_mm256_extractf128_ps(t, 0), _mm256_extractf128_ps(t, 1));
      const __m128 v = _mm_add_ps(u, _mm_movehl_ps(u, u));  // u0 + u2, u1 + u3
      const float sum = _mm_cvtss_f32(v) + _mm_cvtss_f32(_mm_shuffle_ps(v, v, 1));
      out[r * n_out + o] = bias ? sum + bias[o] : sum;
    }
}

template <int RO, int RR>
KVLM_BF16DOT_NOINLINE void OutInBlockThread(float* out, const float* x, const uint16_t* w,
                                            const float* bias, size_t n_rows, size_t n_in,
                                            size_t n_out, size_t t, size_t nt) {
  const size_t n_tiles = (n_out + RO - 1) / RO;
  const size_t t0 = n_tiles * t / nt, t1 = n_tiles * (t + 1) / nt;
  if (t0 == t1) return;
  const size_t xs = (n_in + 2 * kLanes - 1) / (2 * kLanes) * (2 * kLanes);  // padded row
  const size_t block = xs ? std::max<size_t>(RR, kOutInBlockElems / xs / RR * RR) : n_rows;
  alignas(64) uint16_t xb[kOutInBlockElems];
  for (size_t r0 = 0; r0 < n_rows; r0 += block) {
    const size_t rows = std::min(block, n_rows - r0);
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < xs; c += 2 * kLanes) {
        const float* xr = x + (r0 + r) * n_in;
        const size_t n = c < n_in ? std::min(2 * kLanes, n_in - c) : 0;
        const __m512bh v = _mm512_cvtne2ps_pbh(
            _mm512_maskz_loadu_ps(Mask16(n > kLanes ? n - kLanes : 0), xr + c + kLanes),
            _mm512_maskz_loadu_ps(Mask16(n), xr + c));
        _mm512_store_si512(xb + r * xs + c, reinterpret_cast<__m512i>(v));
      }
    for (size_t tile = t0; tile < t1; ++tile) {
      const size_t o0 = tile * RO;
      for (size_t g = 0; g < rows; g += RR) {
        const size_t gr = std::min<size_t>(RR, rows - g);
        float* o = out + (r0 + g) * n_out;
        const char* ahead =
            g == 0 && tile + 1 < t1 ? reinterpret_cast<const char*>(w + (o0 + RO) * n_in) : nullptr;
        if (o0 + RO <= n_out) {
          OutInTileBlock<RO, RR>(o + o0, n_out, xb + g * xs, xs, n_in, w + o0 * n_in,
                                 bias ? bias + o0 : nullptr, gr, ahead);
        } else {
          for (size_t k = o0; k < n_out; ++k)
            OutInTileBlock<1, RR>(o + k, n_out, xb + g * xs, xs, n_in, w + k * n_in,
                                  bias ? bias + k : nullptr, gr, nullptr);
        }
      }
    }
  }
}

template <int RO, int RR>
void OutInAll(float* out, const float* x, const uint16_t* w, const float* bias, size_t n_rows,
              size_t n_in, size_t n_out, int n_threads) {
  const size_t n_tiles = (n_out + RO - 1) / RO;
  parallel_for(n_threads, size_t{n_tiles},
               [&](size_t t) { OutInOutputTile<RO, RR>(out, x, w, bias, n_rows, n_in, n_out, t); });
}

// The x pairs p = 16 c + l of every row, as OutInStripsRange reads them.
template <int R>
KVLM_BF16DOT_NOINLINE void OutInStripsThread(float* out, const float* x, const uint16_t* strips,
                                             const float* bias, size_t n_in, size_t n_out, int t,
                                             StealableShares& shares) {
  ClaimedGroups<R>(x, n_in, 16 * ((n_in + 31) / 32), t, shares, kHeadStripsGroup<R>,
                   [&](const uint32_t* a, size_t s0, size_t s1, size_t next_end) {
                     OutInStripsRange<R>(out, a, strips, bias, n_in, n_out, s0, s1, next_end);
                   });
}

using StreamFn = void (*)(float*, const float*, const uint16_t*, const float*, size_t, size_t,
                          size_t, size_t);
constexpr StreamFn kStreamFns[kStreamMaxRows] = {
    InOutStreamThread<1>, InOutStreamThread<2>, InOutStreamThread<3>, InOutStreamThread<4>,
    InOutStreamThread<5>, InOutStreamThread<6>, InOutStreamThread<7>, InOutStreamThread<8>};
// The kernels over strips packed at load, which claim groups of strips from shared shares.
using SharedStreamFn = void (*)(float*, const float*, const uint16_t*, const float*, size_t, size_t,
                                int, StealableShares&);
constexpr SharedStreamFn kTilesFns[kStreamMaxRows] = {
    InOutTilesThread<1>, InOutTilesThread<2>, InOutTilesThread<3>, InOutTilesThread<4>,
    InOutTilesThread<5>, InOutTilesThread<6>, InOutTilesThread<7>, InOutTilesThread<8>};
constexpr SharedStreamFn kHeadStripsFns[kStreamMaxRows] = {nullptr,
                                                           nullptr,
                                                           OutInStripsThread<3>,
                                                           OutInStripsThread<4>,
                                                           OutInStripsThread<5>,
                                                           OutInStripsThread<6>,
                                                           OutInStripsThread<7>,
                                                           OutInStripsThread<8>};
constexpr StreamFn kStreamRegFns[kStreamMaxRows] = {
    InOutStreamThread<1>,    InOutStreamThread<2>,    InOutStreamRegThread<3>,
    InOutStreamRegThread<4>, InOutStreamRegThread<5>, InOutStreamRegThread<6>,
    InOutStreamRegThread<7>, InOutStreamRegThread<8>};

}  // namespace

void matmul_bf16dot_forward(float* out, const float* x, const WeightMatrix& w, const float* bias,
                            int n_rows, const Parallel& par, MatmulPath path) {
  if (n_rows <= 0 || w.n_out <= 0) return;
  const int n_threads = std::max(par.n_threads, 1);
  const size_t T = n_rows, I = w.n_in, O = w.n_out;
  const uint16_t* wb = static_cast<const uint16_t*>(w.data);
  if (w.layout == WeightLayout::kOutIn) {
    // The head's pair strips packed at load: batched decode of 3..8 rows.
    if (w.bf16dot_pairs && I > 0 && T <= static_cast<size_t>(kStreamMaxRows) &&
        kHeadStripsFns[T - 1]) {
      StealableShares shares((O + kLanes - 1) / kLanes, n_threads);
      run_team(n_threads, [&](int t, int) {
        kHeadStripsFns[T - 1](out, x, w.bf16dot_pairs, bias, I, O, t, shares);
      });
      return;
    }
    if (T == 1 && I <= kOutInMaxIn) {
      run_team(n_threads, [&](int t, int nt) { OutInRowThread<8>(out, x, wb, bias, I, O, t, nt); });
    } else if (T == 1) {
      OutInAll<8, 1>(out, x, wb, bias, T, I, O, n_threads);
    } else {
      if (I <= kOutInBlockElems / 4) {
        run_team(n_threads,
                 [&](int t, int nt) { OutInBlockThread<6, 4>(out, x, wb, bias, T, I, O, t, nt); });
      } else {
        OutInAll<4, 4>(out, x, wb, bias, T, I, O, n_threads);
      }
    }
    return;
  }
  if (path == MatmulPath::kAuto)
    path = T <= static_cast<size_t>(kStreamMaxRows) ? MatmulPath::kRowStream : MatmulPath::kTiled;
  if (path == MatmulPath::kTiled) {
    run_team(n_threads, [&](int t, int nt) { InOutTiledThread(out, x, wb, bias, T, I, O, t, nt); });
    return;
  }
  for (size_t r = 0; r < T; r += kStreamMaxRows) {
    const size_t rows = std::min<size_t>(kStreamMaxRows, T - r);
    // n_in == 0: the one-pass kernel stores the bias (the register tiles run no pass at all).
    float* o = out + r * O;
    const float* xr = x + r * I;
    if (w.amx_tiles && I > 0) {  // the tiles packed at load
      const SharedStreamFn fn = kTilesFns[rows - 1];
      StealableShares shares((O + kLanes - 1) / kLanes, n_threads);
      run_team(n_threads, [&](int t, int) { fn(o, xr, w.amx_tiles, bias, I, O, t, shares); });
      continue;
    }
    const StreamFn fn = (I == 0 ? kStreamFns : kStreamRegFns)[rows - 1];
    run_team(n_threads, [&](int t, int nt) { fn(o, xr, wb, bias, I, O, t, nt); });
  }
}

}  // namespace kvlm

#else  // no x86 AVX-512 code here: the reference gives the same bits (never called in practice)

namespace kvlm {

void matmul_bf16dot_forward(float* out, const float* x, const WeightMatrix& w, const float* bias,
                            int n_rows, const Parallel&, MatmulPath) {
  matmul_bf16dot_reference(out, x, w, bias, n_rows);
}

}  // namespace kvlm

#endif
