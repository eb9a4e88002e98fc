// The AMX kernels behind matmul_bf16amx_forward (numerics: matmul_bf16amx.h).
//
// TDPBF16PS: C[m][n] += sum over 16 pairs kk of A[m][2kk] B[kk][2n] + A[m][2kk+1] B[kk][2n+1], A
// a tile of up to 16 rows x 32 bf16, B 16 rows of up to 16 bf16 pairs ("VNNI" order), C up to
// 16 x 16 fp32. Every output below is one C element whose chain runs over the 32-element chunks
// of the reduction in increasing order from +0, whichever variant, tile or thread computes it;
// a chain stored to memory between blocks and loaded back is the same chain. So
//   kInOut (W [I, O]): A = x rows rounded to bf16, B = pairs of weight rows interleaved, read
//     from WeightMatrix::amx_tiles when the loader packed them (pack_bf16amx_tiles), else paired
//     up here into 1 KB tiles (the pairing vdpbf16ps's kernels do). Many rows (tiled): 2 x 2
//     tiles of 32 rows x 32 columns over cache blocks of x and weight tiles. At most 16 rows
//     (decode): one A tile of those rows; with packed tiles, four column strips at a time whose
//     tiles stream in place, the chains in tile registers; without, the weight rows read in order
//     32 at a time across a chunk of columns, the chains in an L1 buffer. (Pairing the rows up
//     per call costs decode a fifth of its speed: measured in docs/performance.md.)
//   kOutIn (W [O, I]): the roles swap, C = W x^T: A = 16 weight rows read in place (their
//     chunks are A tiles already), B = up to 16 rows of x as pairs; C is stored transposed.
// Tiles are configured per thread at the start of each kernel (the configuration is thread
// state) and released at its end.

#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/matmul_bf16amx.h"
#include "ops/thread_team.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define KVLM_AMX_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,amx-tile,amx-bf16")))
#define KVLM_AMX_NOINLINE __attribute__((noinline)) KVLM_AMX_TARGET
#define KVLM_AMX_INLINE inline __attribute__((always_inline)) KVLM_AMX_TARGET

namespace kvlm {
namespace {

constexpr size_t kChunk = 32;       // reduction elements per tile op
constexpr size_t kTileElems = 512;  // bf16 in a full A or B tile (1 KB)
constexpr size_t kLanes = 16;

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

KVLM_AMX_INLINE __mmask16 Mask16(size_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1);
}

KVLM_AMX_INLINE __mmask32 Mask32(size_t n) {
  return n >= 32 ? static_cast<__mmask32>(0xffffffffu) : static_cast<__mmask32>((1u << n) - 1);
}

// 32 values of x from k (those past n_in read 0) rounded to bf16: one A tile row.
KVLM_AMX_INLINE __m512i RoundChunk(const float* x, size_t k, size_t n_in) {
  const size_t n = k < n_in ? std::min(kChunk, n_in - k) : 0;
  const __m512 lo = _mm512_maskz_loadu_ps(Mask16(n), x + k);
  const __m512 hi = _mm512_maskz_loadu_ps(Mask16(n > kLanes ? n - kLanes : 0), x + k + kLanes);
  return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
}

// A tiles of S rows: a[(rt * n_chunks + c) * S * 32 + rr * 32 + e] = bf16(x[rt * S + rr][k0 +
// 32c + e]); rows past `rows` (up to a whole tile) and x past n_in: 0.
KVLM_AMX_NOINLINE void PackRows(uint16_t* a, size_t S, const float* x, size_t n_in, size_t rows,
                                size_t k0, size_t n_chunks) {
  const size_t padded = (rows + S - 1) / S * S;
  for (size_t r = 0; r < padded; ++r) {
    uint16_t* dst = a + (r / S) * n_chunks * S * kChunk + (r % S) * kChunk;
    for (size_t c = 0; c < n_chunks; ++c)
      _mm512_storeu_si512(
          dst + c * S * kChunk,
          r < rows ? RoundChunk(x + r * n_in, k0 + c * kChunk, n_in) : _mm512_setzero_si512());
  }
}

// Lane j of the result takes element j / 2 of the first (j even) or second (j odd) operand.
KVLM_AMX_INLINE __m512i InterleaveIndex() {
  alignas(64) static const uint16_t kIndex[32] = {0,  32, 1,  33, 2,  34, 3,  35, 4,  36, 5,
                                                  37, 6,  38, 7,  39, 8,  40, 9,  41, 10, 42,
                                                  11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
  return _mm512_load_si512(kIndex);
}

// The B tile of kInOut weights for reduction rows [i, i + 32) and columns [col, col + n)
// (n <= 16): row kk = (W[i + 2kk][col + j], W[i + 2kk + 1][col + j]) for j < 16, 0 past the
// matrix. Reads 32 bytes of each weight row, never more.
KVLM_AMX_INLINE void PackWeightTile(uint16_t* b, const uint16_t* w, size_t n_in, size_t n_out,
                                    size_t i, size_t col, size_t n, __m512i index) {
  const __mmask32 m = Mask32(std::min(n, kLanes));
  for (size_t kk = 0; kk < kLanes; ++kk) {
    const size_t r = i + 2 * kk;
    __m512i pairs = _mm512_setzero_si512();
    if (r < n_in) {
      const uint16_t* r0 = w + r * n_out + col;
      const __m512i lo = _mm512_maskz_loadu_epi16(m, r0);
      const __m512i hi =
          r + 1 < n_in ? _mm512_maskz_loadu_epi16(m, r0 + n_out) : _mm512_setzero_si512();
      pairs = _mm512_permutex2var_epi16(lo, index, hi);
    }
    _mm512_store_si512(b + kk * 2 * kLanes, pairs);
  }
}

// Where a C tile covering out rows [0, rows) x columns [0, cols) (row stride n_out floats) is
// loaded from and stored to: `out` itself when the tile is whole, else `scratch` (16 x 16
// floats, stride 64 bytes) filled from `out` with masked copies (CLoadSource) or copied back
// after the store (CFinishStore). (GCC's tile intrinsics take the tile number as a literal.)
struct CPlace {
  float* p;
  size_t stride;  // bytes
};

KVLM_AMX_INLINE CPlace CLoadSource(float* out, size_t n_out, size_t rows, size_t cols,
                                   float* scratch, size_t tile_rows) {
  if (rows == tile_rows && cols == 16) return {out, n_out * sizeof(float)};
  for (size_t r = 0; r < tile_rows; ++r)
    _mm512_store_ps(scratch + r * 16, r < rows
                                          ? _mm512_maskz_loadu_ps(Mask16(cols), out + r * n_out)
                                          : _mm512_setzero_ps());
  return {scratch, 64};
}

KVLM_AMX_INLINE CPlace CStoreDest(float* out, size_t n_out, size_t rows, size_t cols,
                                  float* scratch, size_t tile_rows) {
  if (rows == tile_rows && cols == 16) return {out, n_out * sizeof(float)};
  return {scratch, 64};
}

KVLM_AMX_INLINE void CFinishStore(float* out, size_t n_out, size_t rows, size_t cols,
                                  const float* scratch, size_t tile_rows) {
  if (rows == tile_rows && cols == 16) return;
  for (size_t r = 0; r < rows; ++r)
    _mm512_mask_storeu_ps(out + r * n_out, Mask16(cols), _mm512_load_ps(scratch + r * 16));
}

// tile_rows: the rows the tile is configured with (rows of them lie in `out`).
#define KVLM_AMX_LOAD_C(tile, out, n_out, rows, cols, scratch, tile_rows)         \
  do {                                                                            \
    const CPlace place = CLoadSource(out, n_out, rows, cols, scratch, tile_rows); \
    _tile_loadd(tile, place.p, place.stride);                                     \
  } while (0)
#define KVLM_AMX_STORE_C(tile, out, n_out, rows, cols, scratch, tile_rows)       \
  do {                                                                           \
    const CPlace place = CStoreDest(out, n_out, rows, cols, scratch, tile_rows); \
    _tile_stored(tile, place.p, place.stride);                                   \
    CFinishStore(out, n_out, rows, cols, scratch, tile_rows);                    \
  } while (0)

// out[r][c] += bias[c] for rows [0, rows), columns [c0, c1): the bias after the chain.
KVLM_AMX_INLINE void AddBias(float* out, size_t n_out, const float* bias, size_t rows, size_t c0,
                             size_t c1) {
  if (!bias) return;
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = c0; c < c1; c += kLanes) {
      const __mmask16 m = Mask16(c1 - c);
      float* o = out + r * n_out + c;
      _mm512_mask_storeu_ps(
          o, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, o), _mm512_maskz_loadu_ps(m, bias + c)));
    }
}

// ---- kInOut, many rows: 2 x 2 tiles (C 0-3, A 4-5, B 6-7) over cache blocks.
constexpr size_t kTiledCols = 2 * kLanes;  // a strip: two B tiles
constexpr size_t kTiledBlockChunks = 32;   // reduction block: 1,024 elements
constexpr size_t kTiledBlockRows = 128;    // x block: 128 rows x 1,024 bf16 = 256 KB

// tiles: the weights packed at load (pack_bf16amx_tiles) or null (packed here per block).
KVLM_AMX_NOINLINE void InOutTiledThread(float* out, const float* x, const uint16_t* w,
                                        const uint16_t* tiles, const float* bias, size_t n_rows,
                                        size_t n_in, size_t n_out, size_t t, size_t nt) {
  const size_t n_strips = (n_out + kTiledCols - 1) / kTiledCols;
  const size_t s0 = n_strips * t / nt, s1 = n_strips * (t + 1) / nt;
  if (s0 == s1) return;
  TileConfig cfg;
  for (int k = 0; k < 8; ++k) {
    cfg.rows[k] = 16;
    cfg.colsb[k] = 64;
  }
  _tile_loadconfig(&cfg);
  const size_t n_chunks = (n_in + kChunk - 1) / kChunk;
  const __m512i index = InterleaveIndex();
  alignas(64) uint16_t a[kTiledBlockRows * kTiledBlockChunks * kChunk];
  alignas(64) uint16_t b[kTiledBlockChunks * 2 * kTileElems];
  alignas(64) float scratch[256];
  for (size_t r0 = 0; r0 < n_rows; r0 += kTiledBlockRows) {
    const size_t rows = std::min(kTiledBlockRows, n_rows - r0);
    const size_t row_tiles = (rows + 15) / 16;
    float* ob = out + r0 * n_out;
    for (size_t c0 = 0; c0 < n_chunks; c0 += kTiledBlockChunks) {
      const size_t nc = std::min(kTiledBlockChunks, n_chunks - c0);
      const bool first = c0 == 0;
      PackRows(a, 16, x + r0 * n_in, n_in, rows, c0 * kChunk, nc);
      for (size_t s = s0; s < s1; ++s) {
        const size_t col = s * kTiledCols, n_cols = std::min(kTiledCols, n_out - col);
        const bool two_cols = n_cols > kLanes;
        // B tile of chunk c, strip half h: at b0 + c * bstep (+ hstep for h = 1).
        const uint16_t *b0 = b, *b1 = b + kTileElems;
        size_t bstep = 2 * kTileElems;
        if (tiles) {
          b0 = tiles + ((2 * s) * n_chunks + c0) * kTileElems;
          b1 = b0 + n_chunks * kTileElems;
          bstep = kTileElems;
        } else {
          for (size_t c = 0; c < nc; ++c) {
            const size_t i = (c0 + c) * kChunk;
            PackWeightTile(b + (2 * c) * kTileElems, w, n_in, n_out, i, col, n_cols, index);
            if (two_cols)
              PackWeightTile(b + (2 * c + 1) * kTileElems, w, n_in, n_out, i, col + kLanes,
                             n_cols - kLanes, index);
          }
        }
        const size_t cols0 = std::min(kLanes, n_cols), cols1 = n_cols - cols0;
        for (size_t rt = 0; rt < row_tiles; rt += 2) {
          const bool two_rows = rt + 1 < row_tiles;
          const size_t rows0 = std::min<size_t>(16, rows - rt * 16);
          const size_t rows1 = two_rows ? std::min<size_t>(16, rows - rt * 16 - 16) : 0;
          float* o0 = ob + rt * 16 * n_out + col;
          float* o1 = o0 + 16 * n_out;
          if (first) {
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
          } else {
            KVLM_AMX_LOAD_C(0, o0, n_out, rows0, cols0, scratch, 16);
            if (two_cols) KVLM_AMX_LOAD_C(1, o0 + kLanes, n_out, rows0, cols1, scratch, 16);
            if (two_rows) KVLM_AMX_LOAD_C(2, o1, n_out, rows1, cols0, scratch, 16);
            if (two_rows && two_cols)
              KVLM_AMX_LOAD_C(3, o1 + kLanes, n_out, rows1, cols1, scratch, 16);
          }
          const uint16_t* a0 = a + rt * nc * kTileElems;
          const uint16_t* a1 = a0 + nc * kTileElems;
          for (size_t c = 0; c < nc; ++c) {
            _tile_loadd(4, a0 + c * kTileElems, 64);
            _tile_loadd(6, b0 + c * bstep, 64);
            _tile_dpbf16ps(0, 4, 6);
            if (two_cols) {
              _tile_loadd(7, b1 + c * bstep, 64);
              _tile_dpbf16ps(1, 4, 7);
            }
            if (two_rows) {
              _tile_loadd(5, a1 + c * kTileElems, 64);
              _tile_dpbf16ps(2, 5, 6);
              if (two_cols) _tile_dpbf16ps(3, 5, 7);
            }
          }
          KVLM_AMX_STORE_C(0, o0, n_out, rows0, cols0, scratch, 16);
          if (two_cols) KVLM_AMX_STORE_C(1, o0 + kLanes, n_out, rows0, cols1, scratch, 16);
          if (two_rows) KVLM_AMX_STORE_C(2, o1, n_out, rows1, cols0, scratch, 16);
          if (two_rows && two_cols)
            KVLM_AMX_STORE_C(3, o1 + kLanes, n_out, rows1, cols1, scratch, 16);
        }
      }
    }
    AddBias(ob, n_out, bias, rows, s0 * kTiledCols, std::min(n_out, s1 * kTiledCols));
  }
  _tile_release();
}

// ---- kInOut, at most 16 rows (decode), weights as stored: C 0 and 3 (R rows), A 1, B 2 and 4.
// The chains of a column chunk, [R][chunk], at most 64 KB: chunks stay 2,048 columns wide up to
// 8 rows, so each weight row is read in 4 KB stretches (narrower ones starve the prefetchers).
constexpr size_t kStreamAccFloats = 16384;
constexpr size_t kStreamChunkCols = 2048;
constexpr size_t kStreamGroup = 8;         // weight tiles packed ahead of their products: 8 KB
constexpr size_t kStreamBlockChunks = 64;  // x packed per 2,048 reduction elements
constexpr size_t kStreamMaxRows = 16;

KVLM_AMX_NOINLINE void InOutStreamThread(float* out, const float* x, const uint16_t* w,
                                         const float* bias, size_t R, size_t n_in, size_t n_out,
                                         size_t t, size_t nt) {
  const size_t n_vecs = (n_out + kLanes - 1) / kLanes;
  const size_t c0 = n_vecs * t / nt * kLanes;
  const size_t c1 = std::min(n_out, n_vecs * (t + 1) / nt * kLanes);
  if (c0 >= c1) return;
  // C 0 and 3 (R rows), A 1 (R rows), B 2 and 4.
  TileConfig cfg;
  for (int k = 0; k < 8; ++k) {
    cfg.rows[k] = k == 0 || k == 3 || k == 1 || k == 5 ? static_cast<uint8_t>(R) : 16;
    cfg.colsb[k] = 64;
  }
  _tile_loadconfig(&cfg);
  const size_t chunk_cols = std::min(kStreamChunkCols, kStreamAccFloats / R / kLanes * kLanes);
  const size_t n_chunks = (n_in + kChunk - 1) / kChunk;
  const __m512i index = InterleaveIndex();
  alignas(64) float acc[kStreamAccFloats];
  alignas(64) uint16_t a[kStreamMaxRows * kStreamBlockChunks * kChunk];
  alignas(64) uint16_t b[kStreamGroup * kTileElems];
  for (size_t cb = c0; cb < c1; cb += chunk_cols) {
    const size_t nc = std::min(chunk_cols, c1 - cb), nv = (nc + kLanes - 1) / kLanes;
    const size_t stride = nv * kLanes, ldc = stride * sizeof(float);
    for (size_t k = 0; k < R * stride; k += kLanes) _mm512_store_ps(acc + k, _mm512_setzero_ps());
    for (size_t q0 = 0; q0 < n_chunks; q0 += kStreamBlockChunks) {
      const size_t qc = std::min(kStreamBlockChunks, n_chunks - q0);
      PackRows(a, R, x, n_in, R, q0 * kChunk, qc);
      for (size_t q = 0; q < qc; ++q) {
        const size_t i = (q0 + q) * kChunk;
        _tile_loadd(1, a + q * R * kChunk, 64);
        // Groups of vectors: all their weight tiles packed first, then their products, so a
        // tile load never waits on the stores that just wrote it.
        for (size_t v0 = 0; v0 < nv; v0 += kStreamGroup) {
          const size_t gv = std::min(kStreamGroup, nv - v0);
          for (size_t v = v0; v < v0 + gv; ++v) {
            const size_t c = v * kLanes;
            if (v % 2 == 0 && i + kChunk < n_in) {  // the next chunk's rows, these 32 columns
              const uint16_t* ahead = w + (i + kChunk) * n_out + cb + c;
              const size_t n_ahead = std::min(kChunk, n_in - i - kChunk);
              for (size_t k = 0; k < n_ahead; ++k)
                _mm_prefetch(reinterpret_cast<const char*>(ahead + k * n_out), _MM_HINT_T0);
            }
            PackWeightTile(b + (v - v0) * kTileElems, w, n_in, n_out, i, cb + c,
                           std::min(kLanes, nc - c), index);
          }
          for (size_t v = v0; v < v0 + gv; ++v) {
            const uint16_t* bt = b + (v - v0) * kTileElems;
            float* ct = acc + v * kLanes;
            if (v % 2 == 0) {  // tiles alternate: the next product need not wait for this store
              _tile_loadd(2, bt, 64);
              _tile_loadd(0, ct, ldc);
              _tile_dpbf16ps(0, 1, 2);
              _tile_stored(0, ct, ldc);
            } else {
              _tile_loadd(4, bt, 64);
              _tile_loadd(3, ct, ldc);
              _tile_dpbf16ps(3, 1, 4);
              _tile_stored(3, ct, ldc);
            }
          }
        }
      }
    }
    for (size_t r = 0; r < R; ++r)
      for (size_t c = 0; c < nc; c += kLanes) {
        const __mmask16 m = Mask16(nc - c);
        __m512 sum = _mm512_load_ps(acc + r * stride + c);
        if (bias) sum = _mm512_add_ps(sum, _mm512_maskz_loadu_ps(m, bias + cb + c));
        _mm512_mask_storeu_ps(out + r * n_out + cb + c, m, sum);
      }
  }
  _tile_release();
}

// ---- kInOut, at most 16 rows, weights packed at load: the thread's 16-column strips four at a
// time (C 0-3, R rows), each strip's tiles one contiguous stream read in place (B 5, 6, 7), the
// chains in tile registers across a whole x block (A 4).
// Each strip's tiles are fetched this many chunks ahead of their products, into L2 (as the
// other decode kernels' weights: ops/prefetch.h). Four strips are four streams the hardware
// prefetchers did not keep ahead of: GPT-2 124M shape, BF16, 2 threads, `kvlm bench
// --decode-only`, interleaved runs on a 2-core Sapphire Rapids VM (bus 31-33 GB/s): batch 1 at
// 128 / 900 cached 114-116 / 89-90 tok/s -> 117-126 / 92-97 (2, 4, 8 or 16 tiles ahead alike;
// T0 hints alike), batch 8 621-637 -> 632-680.
constexpr size_t kTilesAhead = 4;

KVLM_AMX_INLINE void PrefetchTileToL2(const uint16_t* tile) {
  const char* p = reinterpret_cast<const char*>(tile);
  for (size_t line = 0; line < kTileElems * sizeof(uint16_t); line += 64)
    _mm_prefetch(p + line, _MM_HINT_T2);
}

KVLM_AMX_NOINLINE void InOutTilesStreamThread(float* out, const float* x, const uint16_t* tiles,
                                              const float* bias, size_t R, size_t n_in,
                                              size_t n_out, size_t t, size_t nt) {
  const size_t n_strips = (n_out + kLanes - 1) / kLanes;
  const size_t s0 = n_strips * t / nt, s1 = n_strips * (t + 1) / nt;
  if (s0 == s1) return;
  TileConfig cfg;
  for (int k = 0; k < 8; ++k) {
    cfg.rows[k] = k <= 4 ? static_cast<uint8_t>(R) : 16;
    cfg.colsb[k] = 64;
  }
  _tile_loadconfig(&cfg);
  const size_t n_chunks = (n_in + kChunk - 1) / kChunk;
  alignas(64) uint16_t a[kStreamMaxRows * kStreamBlockChunks * kChunk];
  alignas(64) float scratch[256];
  for (size_t q0 = 0; q0 < n_chunks; q0 += kStreamBlockChunks) {
    const size_t qc = std::min(kStreamBlockChunks, n_chunks - q0);
    const bool first = q0 == 0;
    PackRows(a, R, x, n_in, R, q0 * kChunk, qc);
    for (size_t sg = s0; sg < s1; sg += 4) {
      const size_t ng = std::min<size_t>(4, s1 - sg);
      float* o = out + sg * kLanes;
      const size_t cols[4] = {std::min(kLanes, n_out - sg * kLanes),
                              ng > 1 ? std::min(kLanes, n_out - (sg + 1) * kLanes) : 0,
                              ng > 2 ? std::min(kLanes, n_out - (sg + 2) * kLanes) : 0,
                              ng > 3 ? std::min(kLanes, n_out - (sg + 3) * kLanes) : 0};
      if (first) {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
      } else {
        KVLM_AMX_LOAD_C(0, o, n_out, R, cols[0], scratch, R);
        if (ng > 1) KVLM_AMX_LOAD_C(1, o + kLanes, n_out, R, cols[1], scratch, R);
        if (ng > 2) KVLM_AMX_LOAD_C(2, o + 2 * kLanes, n_out, R, cols[2], scratch, R);
        if (ng > 3) KVLM_AMX_LOAD_C(3, o + 3 * kLanes, n_out, R, cols[3], scratch, R);
      }
      const uint16_t* b = tiles + (sg * n_chunks + q0) * kTileElems;
      const size_t strip = n_chunks * kTileElems;
      for (size_t q = 0; q < qc; ++q) {
        const uint16_t* bq = b + q * kTileElems;
        if (q + kTilesAhead < qc) {
          for (size_t j = 0; j < ng; ++j)
            PrefetchTileToL2(bq + kTilesAhead * kTileElems + j * strip);
        } else if (const size_t next_q = q0 + q + kTilesAhead - qc;
                   sg + 4 < s1 && next_q < n_chunks) {  // the next strip group's first tiles
          const uint16_t* next = tiles + ((sg + 4) * n_chunks + next_q) * kTileElems;
          for (size_t j = 0; j < std::min<size_t>(4, s1 - sg - 4); ++j)
            PrefetchTileToL2(next + j * strip);
        }
        _tile_loadd(4, a + q * R * kChunk, 64);
        _tile_loadd(5, bq, 64);
        _tile_dpbf16ps(0, 4, 5);
        if (ng > 1) {
          _tile_loadd(6, bq + strip, 64);
          _tile_dpbf16ps(1, 4, 6);
        }
        if (ng > 2) {
          _tile_loadd(7, bq + 2 * strip, 64);
          _tile_dpbf16ps(2, 4, 7);
        }
        if (ng > 3) {
          _tile_loadd(5, bq + 3 * strip, 64);
          _tile_dpbf16ps(3, 4, 5);
        }
      }
      KVLM_AMX_STORE_C(0, o, n_out, R, cols[0], scratch, R);
      if (ng > 1) KVLM_AMX_STORE_C(1, o + kLanes, n_out, R, cols[1], scratch, R);
      if (ng > 2) KVLM_AMX_STORE_C(2, o + 2 * kLanes, n_out, R, cols[2], scratch, R);
      if (ng > 3) KVLM_AMX_STORE_C(3, o + 3 * kLanes, n_out, R, cols[3], scratch, R);
    }
  }
  AddBias(out, n_out, bias, R, s0 * kLanes, std::min(n_out, s1 * kLanes));
  _tile_release();
}

// ---- kOutIn: C 0-1 (16 outputs x RB rows each), B 4 (RB rows of x as pairs), A 5-6 (16 weight
// rows).
constexpr size_t kOutInBufferPairs = 65536;  // x of a row group as pairs: 256 KB

// xb[c * 16 * RB + kk * RB + r] = (bf16(x[r][32c + 2kk]), bf16(x[r][32c + 2kk + 1])), rows past
// `rows`: 0.
KVLM_AMX_NOINLINE void PackRowsAsPairs(uint32_t* xb, size_t RB, const float* x, size_t n_in,
                                       size_t rows, size_t n_chunks) {
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i scatter = _mm512_mullo_epi32(lanes, _mm512_set1_epi32(static_cast<int>(RB)));
  for (size_t r = 0; r < RB; ++r)
    for (size_t c = 0; c < n_chunks; ++c) {
      const __m512i v =
          r < rows ? RoundChunk(x + r * n_in, c * kChunk, n_in) : _mm512_setzero_si512();
      _mm512_i32scatter_epi32(xb + c * kLanes * RB + r, scatter, v, 4);
    }
}

// The A tile of weight rows [o0, o0 + n_o) x chunk c into tile register `tile`: in place when
// whole, else zero-padded through `edge` (the matrix's last rows or a short last chunk).
#define KVLM_AMX_LOAD_W(tile, wt, n_in, n_o, c, full_chunks, edge)                             \
  do {                                                                                         \
    if ((n_o) == kLanes && (c) < (full_chunks)) {                                              \
      _tile_loadd(tile, (wt) + (c)*kChunk, (n_in) * sizeof(uint16_t));                         \
    } else {                                                                                   \
      const size_t n_ = std::min(kChunk, (n_in) - (c)*kChunk);                                 \
      for (size_t j_ = 0; j_ < kLanes; ++j_)                                                   \
        _mm512_store_si512(                                                                    \
            (edge) + j_ * kChunk,                                                              \
            j_ < (n_o) ? _mm512_maskz_loadu_epi16(Mask32(n_), (wt) + j_ * (n_in) + (c)*kChunk) \
                       : _mm512_setzero_si512());                                              \
      _tile_loadd(tile, edge, 64);                                                             \
    }                                                                                          \
  } while (0)

// Two output tiles (32 weight rows) run together, C 0-1 over one B tile (4) and A tiles 5-6, so
// a second chain keeps the unit busy while a tile load waits (tile registers are not renamed: with
// one chain each weight load waited for the previous product). The rows' lines of chunk
// c + kOutInChunksAhead (running on into the next pair's first chunks) are fetched into L1 as
// chunk c is read; the old order, one tile at a time with the next tile's lines of the same
// chunk fetched, read GPT-2's head at 8 rows at 26-29 GB/s where this reads it at 31-37 (1 row:
// 32-41 either way; interleaved kernels_bench rounds, docs/performance.md). Four tiles at a time
// read 1 row slower (30-37 GB/s); 8 chunks ahead: within noise.
constexpr size_t kOutInGroup = 2;
constexpr size_t kOutInChunksAhead = 4;

KVLM_AMX_NOINLINE void OutInThread(float* out, const float* x, const uint16_t* w, const float* bias,
                                   size_t n_rows, size_t n_in, size_t n_out, size_t t, size_t nt) {
  const size_t n_tiles = (n_out + kLanes - 1) / kLanes;
  const size_t t0 = n_tiles * t / nt, t1 = n_tiles * (t + 1) / nt;
  if (t0 == t1) return;
  const size_t n_chunks = (n_in + kChunk - 1) / kChunk;
  const size_t cap = std::max<size_t>(1, kOutInBufferPairs / (n_chunks * kLanes));
  const size_t RB = std::min({kLanes, n_rows, cap});
  TileConfig cfg;
  for (int k = 0; k < 2; ++k) {  // C: 16 outputs x RB rows
    cfg.rows[k] = 16;
    cfg.colsb[k] = static_cast<uint16_t>(4 * RB);
  }
  cfg.rows[4] = 16;  // B: 16 pairs x RB rows
  cfg.colsb[4] = static_cast<uint16_t>(4 * RB);
  for (int k = 5; k < 7; ++k) {  // A: 16 weight rows x 32
    cfg.rows[k] = 16;
    cfg.colsb[k] = 64;
  }
  _tile_loadconfig(&cfg);
  alignas(64) uint32_t stack_xb[kOutInBufferPairs];
  std::vector<uint32_t> heap_xb;  // rows too long for the stack buffer (over 65,536 inputs)
  uint32_t* xb = stack_xb;
  if (n_chunks * kLanes * RB > kOutInBufferPairs) {
    heap_xb.resize(n_chunks * kLanes * RB);
    xb = heap_xb.data();
  }
  alignas(64) uint16_t edge[kTileElems];  // a weight tile past the matrix's last row or column
  alignas(64) float cs[kOutInGroup][256];
  const size_t full_chunks = n_in / kChunk;
  const size_t rows_end = std::min(n_out, t1 * kLanes);  // this thread's last weight row + 1
  for (size_t g = 0; g < n_rows; g += RB) {
    const size_t rows = std::min(RB, n_rows - g);
    PackRowsAsPairs(xb, RB, x + g * n_in, n_in, rows, n_chunks);
    for (size_t tg = t0; tg < t1; tg += kOutInGroup) {
      const size_t ng = std::min(kOutInGroup, t1 - tg);
      const size_t o0 = tg * kLanes;
      const uint16_t* wt = w + o0 * n_in;
      size_t n_o[kOutInGroup] = {};
      for (size_t k = 0; k < ng; ++k) n_o[k] = std::min(kLanes, n_out - o0 - k * kLanes);
      _tile_zero(0);
      _tile_zero(1);
      for (size_t c = 0; c < n_chunks; ++c) {
        {  // this group's rows kOutInChunksAhead chunks on, or the next group's first chunks
          const size_t ahead = c + kOutInChunksAhead;
          const size_t r0 = ahead < n_chunks ? o0 : o0 + ng * kLanes;
          const size_t ca = ahead < n_chunks ? ahead : ahead - n_chunks;
          const size_t r1 = std::min(r0 + kOutInGroup * kLanes, rows_end);
          if (ca < n_chunks)
            for (size_t r = r0; r < r1; ++r)
              _mm_prefetch(reinterpret_cast<const char*>(w + r * n_in + ca * kChunk), _MM_HINT_T0);
        }
        _tile_loadd(4, xb + c * kLanes * RB, 4 * RB);
        KVLM_AMX_LOAD_W(5, wt, n_in, n_o[0], c, full_chunks, edge);
        _tile_dpbf16ps(0, 5, 4);
        if (ng > 1) {
          KVLM_AMX_LOAD_W(6, wt + kLanes * n_in, n_in, n_o[1], c, full_chunks, edge);
          _tile_dpbf16ps(1, 6, 4);
        }
      }
      _tile_stored(0, cs[0], 4 * RB);
      if (ng > 1) _tile_stored(1, cs[1], 4 * RB);
      for (size_t k = 0; k < ng; ++k) {
        const size_t ok = o0 + k * kLanes;
        for (size_t r = 0; r < rows; ++r)
          for (size_t j = 0; j < n_o[k]; ++j) {
            const float sum = cs[k][j * RB + r];
            out[(g + r) * n_out + ok + j] = bias ? sum + bias[ok + j] : sum;
          }
      }
    }
  }
  _tile_release();
}

}  // namespace

void matmul_bf16amx_forward(float* out, const float* x, const WeightMatrix& w, const float* bias,
                            int n_rows, const Parallel& par) {
  if (n_rows <= 0 || w.n_out <= 0) return;
  const int n_threads = std::max(par.n_threads, 1);
  const size_t T = n_rows, I = w.n_in, O = w.n_out;
  if (I == 0) {  // no chunks: the chain is +0
    for (size_t k = 0; k < T * O; ++k) out[k] = bias ? 0.0f + bias[k % O] : 0.0f;
    return;
  }
  const uint16_t* wb = static_cast<const uint16_t*>(w.data);
  if (w.layout == WeightLayout::kOutIn) {
    run_team(n_threads, [&](int t, int nt) { OutInThread(out, x, wb, bias, T, I, O, t, nt); });
    return;
  }
  if (T <= kStreamMaxRows && w.amx_tiles) {
    run_team(n_threads, [&](int t, int nt) {
      InOutTilesStreamThread(out, x, w.amx_tiles, bias, T, I, O, t, nt);
    });
    return;
  }
  if (T <= kStreamMaxRows) {
    run_team(n_threads,
             [&](int t, int nt) { InOutStreamThread(out, x, wb, bias, T, I, O, t, nt); });
    return;
  }
  run_team(n_threads,
           [&](int t, int nt) { InOutTiledThread(out, x, wb, w.amx_tiles, bias, T, I, O, t, nt); });
}

}  // namespace kvlm

#else  // no x86: never called (cpu_has_amx_bf16() is false); the reference keeps the contract

namespace kvlm {

void matmul_bf16amx_forward(float* out, const float* x, const WeightMatrix& w, const float* bias,
                            int n_rows, const Parallel&) {
  matmul_bf16amx_reference(out, x, w, bias, n_rows);
}

}  // namespace kvlm

#endif
