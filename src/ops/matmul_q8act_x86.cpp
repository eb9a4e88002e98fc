// The x86 kernels of matmul_q8act.h: AVX512-VNNI (vpdpbusd) and AVX2 (vpmaddubsw + vpmaddwd),
// each giving the scalar reference's bits (the integer sums are exact; the float chains and
// their final reduction follow matmul_q8act.h's order lane for lane).
//
// The instruction sets are carried in target attributes (ops/q8act_x86_targets.h). They are
// called from a run_team job in matmul_q8act.cpp; nothing here starts one.
//
// Q4_0, AVX-512: a zmm holds two blocks (b even, b + 1) of one weight row as unsigned nibbles
// in value order, [qs_b low | qs_b high | qs_b+1 low | qs_b+1 high] (each 16 bytes: values
// 0..15, then 16..31), against the activation bytes of the same 64 values loaded as stored;
// vpdpbusd, accumulating onto -8 * (sum of each 4 activations), leaves in lane l the partial
// sum P_{b + l / 8, l % 8}: exactly the reference's lane 8 * (b % 2) + p. AVX2 runs one block per
// ymm and keeps the even and odd blocks' chains in two registers. Q5_0 and Q8_0 run the same
// tiles: Q5_0's fifth bits ORed into the nibbles (offset 16); Q8_0's int8 weights XORed with
// 0x80, the unsigned w + 128 that vpdpbusd takes (offset 128: |128 * 4 * 127| fits an int32
// with room to spare), and on AVX2 ggml's sign trick (below).
//
// Tiles: RO weight rows x RR activation rows per register tile; activation rows are taken in
// chunks of kRowChunk so that a chunk's int8 rows stay in L2 while every output tile reads them.
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>

#include "ops/matmul_q8act_kernels.h"
#include "ops/prefetch.h"
#include "ops/q8act_x86_targets.h"
#include "ops/quant.h"

#if KVLM_Q8ACT_X86

namespace kvlm::q8act {
namespace {

constexpr size_t kRowChunk = 64;      // activation rows per pass over a thread's outputs
constexpr size_t kPrefetchTiles = 2;  // how far ahead decode tiles fetch their weights

// A block's fp16 scale (F16C: the bits of f16_to_f32_fast but for signalling NaNs, quieted; a
// scale only enters products, which quiet them the same way).
KVLM_AVX2_INLINE float HalfAt(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// matmul.h's kOutIn reduction: t[l] = s[l] + s[l+8], u[l] = t[l] + t[l+4], v[l] = u[l] + u[l+2],
// v[0] + v[1]; the 8-lane form starts at t.
KVLM_AVX2_INLINE float Reduce8(__m256 t) {
  const __m128 u = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
  const __m128 v = _mm_add_ps(u, _mm_movehl_ps(u, u));
  return _mm_cvtss_f32(_mm_add_ss(v, _mm_shuffle_ps(v, v, 1)));
}

KVLM_VNNI_INLINE float Reduce16(__m512 s) {
  return Reduce8(_mm256_add_ps(_mm512_castps512_ps256(s), _mm512_extractf32x8_ps(s, 1)));
}

// The loops every kernel shares. Tile<RO, RR>::Run computes RR activation rows x RO outputs;
// *Rows::Run<RO> runs rows [r0, r1) of one output tile, RR at a time and then one, compiled
// for its instruction set (one copy per set: the attribute is the only difference); Walk goes
// over the row chunks and the output tiles of [o_begin, o_end), then single outputs.
template <template <int, int> class Tile, int RR>
struct VnniRows {
  template <int RO>
  __attribute__((noinline)) KVLM_VNNI_TARGET static void Run(float* out, const Q8Rows& x, size_t r0,
                                                             size_t r1, const uint8_t* w,
                                                             size_t row_bytes, const float* bias,
                                                             size_t n_out) {
    size_t r = r0;
    for (; r + RR <= r1; r += RR) Tile<RO, RR>::Run(out, x, r, w, row_bytes, bias, n_out);
    for (; r < r1; ++r) Tile<RO, 1>::Run(out, x, r, w, row_bytes, bias, n_out);
  }
};

template <template <int, int> class Tile, int RR>
struct Avx2Rows {
  template <int RO>
  __attribute__((noinline)) KVLM_AVX2_TARGET static void Run(float* out, const Q8Rows& x, size_t r0,
                                                             size_t r1, const uint8_t* w,
                                                             size_t row_bytes, const float* bias,
                                                             size_t n_out) {
    size_t r = r0;
    for (; r + RR <= r1; r += RR) Tile<RO, RR>::Run(out, x, r, w, row_bytes, bias, n_out);
    for (; r < r1; ++r) Tile<RO, 1>::Run(out, x, r, w, row_bytes, bias, n_out);
  }
};

template <class Rows, int RO>
void Walk(float* out, const Q8Rows& x, const uint8_t* w, size_t row_bytes, const float* bias,
          size_t n_rows, size_t n_out, size_t o_begin, size_t o_end) {
  for (size_t r0 = 0; r0 < n_rows; r0 += kRowChunk) {
    const size_t r1 = std::min(n_rows, r0 + kRowChunk);
    size_t o = o_begin;
    for (; o + RO <= o_end; o += RO)
      Rows::template Run<RO>(out + o, x, r0, r1, w + o * row_bytes, row_bytes,
                             bias ? bias + o : nullptr, n_out);
    for (; o < o_end; ++o)
      Rows::template Run<1>(out + o, x, r0, r1, w + o * row_bytes, row_bytes,
                            bias ? bias + o : nullptr, n_out);
  }
}

// ---------------------------------------------------------------------------------------------
// Q4_0, AVX512-VNNI.

// Two blocks' weights of one row as vpdpbusd's unsigned bytes (`b` at the first block; `two`
// false: the second is absent, its lanes zero, and nothing past the first is read).
template <int kBytes>
KVLM_VNNI_INLINE __m512i Q4_0Pair(const uint8_t* b, bool two) {
  if constexpr (kBytes == 34) {  // Q8_0: w + 128 = w ^ 0x80 (offset 128 in off4)
    const __m256i first = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2));
    const __m512i v =
        two ? _mm512_inserti64x4(_mm512_castsi256_si512(first),
                                 _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 36)), 1)
            : _mm512_zextsi256_si512(first);
    return _mm512_xor_si512(v, _mm512_set1_epi8(static_cast<char>(0x80)));
  }
  const __m512i shift = _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0);
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  __m512i v =
      _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + kBytes - 16)));
  v = two ? _mm512_mask_broadcast_i32x4(
                v, 0xFF00, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 * kBytes - 16)))
          : _mm512_maskz_mov_epi32(0x00FF, v);
  const __m512i q = _mm512_and_si512(_mm512_srlv_epi64(v, shift), low4);
  if constexpr (kBytes == 22) {  // Q5_0: bit j of qh is value j's 16
    uint32_t h0, h1 = 0;
    std::memcpy(&h0, b + 2, 4);
    if (two) std::memcpy(&h1, b + kBytes + 2, 4);
    const __mmask64 high = h0 | (static_cast<uint64_t>(h1) << 32);
    return _mm512_or_si512(q, _mm512_maskz_mov_epi8(high, _mm512_set1_epi8(0x10)));
  }
  return q;
}

// [d_b x 8 | d_b+1 x 8] (0 for an absent second block), converted by vcvtph2ps (F16C's bits).
template <int kBytes>
KVLM_VNNI_INLINE __m512 Q4_0PairScales(const uint8_t* b, bool two) {
  uint16_t h0, h1 = 0;
  std::memcpy(&h0, b, 2);
  if (two) std::memcpy(&h1, b + kBytes, 2);
  const __m256i h =
      _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16(static_cast<short>(h0))),
                              _mm_set1_epi16(static_cast<short>(h1)), 1);
  return _mm512_cvtph_ps(h);
}

// Blocks b and b + 1 (kTwo; else block b alone, the row's last) of a tile's RO weight rows
// against its RR activation rows, onto acc. The pair steps and the last single block are separate
// instantiations so that the pair loop has no branches and no lane masks.
template <int kBytes, int RO, int RR, bool kTwo>
KVLM_VNNI_INLINE void Q4_0StepVnni(__m512 (&acc)[RO][RR], const Q8Rows& x, size_t r0,
                                   const uint8_t* w, size_t row_bytes, size_t b) {
  const size_t n_in = x.n_in, nb = n_in / 32, n4 = n_in / 4;
  constexpr __mmask16 kLanes = kTwo ? 0xFFFF : 0x00FF;
  // A tile's RO rows and the tiles after it are one contiguous stretch: fetch the part of the
  // tile kPrefetchTiles ahead that this step reads, one sequential stream, into L2
  // (ops/prefetch.h; Q8_0, with the least work per byte, ran out of L1 fill buffers first:
  // batch-1 decode at 1 thread read 9 GB/s of 13 with prefetcht0, docs/performance.md).
  {
    const char* ahead =
        reinterpret_cast<const char*>(w) + kPrefetchTiles * RO * row_bytes + b * (RO * kBytes);
    for (size_t line = 0; line < 2 * RO * kBytes; line += 64) PrefetchToL2(ahead + line);
  }
  __m512i wv[RO];
  __m512 dw[RO];
  for (int ro = 0; ro < RO; ++ro) {
    const uint8_t* blk = w + ro * row_bytes + b * kBytes;
    wv[ro] = Q4_0Pair<kBytes>(blk, kTwo);
    dw[ro] = Q4_0PairScales<kBytes>(blk, kTwo);
  }
  for (int rr = 0; rr < RR; ++rr) {
    const size_t r = r0 + rr;
    const __m512i a =
        _mm512_maskz_loadu_epi8(kTwo ? ~0ull : 0xFFFFFFFFull, x.q + r * n_in + b * 32);
    const __m512i off = _mm512_maskz_loadu_epi32(kLanes, x.off4 + r * n4 + b * 8);
    const float* dx = x.d + r * nb + b;
    const __m512 dxv =
        _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(dx[0]), _mm512_set1_ps(kTwo ? dx[1] : 0.0f));
    for (int ro = 0; ro < RO; ++ro) {
      const __m512 p = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(off, wv[ro], a));
      const __m512 scale = _mm512_mul_ps(dw[ro], dxv);
      // A lone block leaves the upper lanes' chains as they are (adding +0 would turn a -0 +0).
      acc[ro][rr] = kTwo ? _mm512_fmadd_ps(scale, p, acc[ro][rr])
                         : _mm512_mask3_fmadd_ps(scale, p, acc[ro][rr], kLanes);
    }
  }
}

template <int kBytes, int RO, int RR>
KVLM_VNNI_INLINE void Q4_0TileVnni(float* out, const Q8Rows& x, size_t r0, const uint8_t* w,
                                   size_t row_bytes, const float* bias, size_t n_out) {
  const size_t nb = x.n_in / 32;
  __m512 acc[RO][RR];
  for (int ro = 0; ro < RO; ++ro)
    for (int rr = 0; rr < RR; ++rr) acc[ro][rr] = _mm512_setzero_ps();
  size_t b = 0;
  for (; b + 2 <= nb; b += 2) Q4_0StepVnni<kBytes, RO, RR, true>(acc, x, r0, w, row_bytes, b);
  if (b < nb) Q4_0StepVnni<kBytes, RO, RR, false>(acc, x, r0, w, row_bytes, b);
  for (int rr = 0; rr < RR; ++rr)
    for (int ro = 0; ro < RO; ++ro) {
      const float dot = Reduce16(acc[ro][rr]);
      out[(r0 + rr) * n_out + ro] = bias ? dot + bias[ro] : dot;
    }
}

template <int kBytes>
struct Q4_0Vnni {
  template <int RO, int RR>
  struct Tile {
    static KVLM_VNNI_INLINE void Run(float* out, const Q8Rows& x, size_t r0, const uint8_t* w,
                                     size_t row_bytes, const float* bias, size_t n_out) {
      Q4_0TileVnni<kBytes, RO, RR>(out, x, r0, w, row_bytes, bias, n_out);
    }
  };
};

// Q4_0 (kBytes 18), Q5_0 (22: its fifth bits ORed into the nibbles as 16s) and Q8_0 (34).
template <int kBytes>
void Q4_0Avx512Vnni(float* out, const Q8Rows& x, const uint8_t* w, size_t row_bytes,
                    const float* bias, size_t n_rows, size_t n_out, size_t o_begin, size_t o_end) {
  if (n_rows < 4)
    Walk<VnniRows<Q4_0Vnni<kBytes>::template Tile, 1>, 4>(out, x, w, row_bytes, bias, n_rows, n_out,
                                                          o_begin, o_end);
  else
    Walk<VnniRows<Q4_0Vnni<kBytes>::template Tile, 4>, 4>(out, x, w, row_bytes, bias, n_rows, n_out,
                                                          o_begin, o_end);
}

// ---------------------------------------------------------------------------------------------
// Q4_0, AVX2: one block per ymm, [low nibbles | high nibbles] = values 0..31.

// One block's weights: Q4_0's and Q5_0's unsigned codes (nibble, | 16 for Q5_0's fifth bit);
// Q8_0's int8 weights as stored.
template <int kBytes>
KVLM_AVX2_INLINE __m256i Q4_0Block(const uint8_t* b) {
  if constexpr (kBytes == 34) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2));
  const __m256i shift = _mm256_set_epi64x(4, 4, 0, 0);
  const __m256i v = _mm256_broadcastsi128_si256(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + kBytes - 16)));
  const __m256i q = _mm256_and_si256(_mm256_srlv_epi64(v, shift), _mm256_set1_epi8(0x0F));
  if constexpr (kBytes == 22) {  // Q5_0: bit j of qh to byte j (ggml's bytes_from_bits_32)
    uint32_t h;
    std::memcpy(&h, b + 2, 4);
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(static_cast<int>(h)),
        _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
    const __m256i set = _mm256_cmpeq_epi8(
        _mm256_or_si256(spread, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe)), _mm256_set1_epi64x(-1));
    return _mm256_or_si256(q, _mm256_and_si256(set, _mm256_set1_epi8(0x10)));
  }
  return q;
}

// Block b's 8 partial sums against row r. Q4_0 and Q5_0: the unsigned codes times the
// activations, their -8 / -16 folded in through off4. Q8_0: w + 128 would overflow vpmaddubsw's
// int16 pairs (2 * 255 * 127), so ggml's sign trick: |w| (128 for -128, read unsigned) times
// q with w's sign (psignb: 0 where w is 0), the same products w * q, |pair| <= 2 * 128 * 127.
template <int kBytes>
KVLM_AVX2_INLINE __m256 Q4_0Partials(__m256i wv, const Q8Rows& x, size_t r, size_t b) {
  const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q + r * x.n_in + b * 32));
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (kBytes == 34) {
    const __m256i pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(wv), _mm256_sign_epi8(a, wv));
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, ones));
  }
  const __m256i off =
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.off4 + r * (x.n_in / 4) + b * 8));
  const __m256i pairs = _mm256_maddubs_epi16(wv, a);  // |pair| <= 2 * 31 * 127: no saturation
  return _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_madd_epi16(pairs, ones), off));
}

template <int kBytes, int RO, int RR>
KVLM_AVX2_INLINE void Q4_0TileAvx2(float* out, const Q8Rows& x, size_t r0, const uint8_t* w,
                                   size_t row_bytes, const float* bias, size_t n_out) {
  const size_t nb = x.n_in / 32;
  __m256 acc[RO][RR][2];  // chains of the even and the odd blocks
  for (int ro = 0; ro < RO; ++ro)
    for (int rr = 0; rr < RR; ++rr) acc[ro][rr][0] = acc[ro][rr][1] = _mm256_setzero_ps();
  auto step = [&](size_t b, int parity) KVLM_AVX2_TARGET {
    __m256i wv[RO];
    float dw[RO];
    for (int ro = 0; ro < RO; ++ro) {
      wv[ro] = Q4_0Block<kBytes>(w + ro * row_bytes + b * kBytes);
      dw[ro] = HalfAt(w + ro * row_bytes + b * kBytes);
    }
    for (int rr = 0; rr < RR; ++rr) {
      const float dx = x.d[(r0 + rr) * nb + b];
      for (int ro = 0; ro < RO; ++ro)
        acc[ro][rr][parity] =
            _mm256_fmadd_ps(_mm256_set1_ps(dw[ro] * dx),
                            Q4_0Partials<kBytes>(wv[ro], x, r0 + rr, b), acc[ro][rr][parity]);
    }
  };
  size_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    step(b, 0);
    step(b + 1, 1);
  }
  if (b < nb) step(b, 0);
  for (int rr = 0; rr < RR; ++rr)
    for (int ro = 0; ro < RO; ++ro) {
      const float dot = Reduce8(_mm256_add_ps(acc[ro][rr][0], acc[ro][rr][1]));
      out[(r0 + rr) * n_out + ro] = bias ? dot + bias[ro] : dot;
    }
}

template <int kBytes>
struct Q4_0Avx2Tiles {
  template <int RO, int RR>
  struct Tile {
    static KVLM_AVX2_INLINE void Run(float* out, const Q8Rows& x, size_t r0, const uint8_t* w,
                                     size_t row_bytes, const float* bias, size_t n_out) {
      Q4_0TileAvx2<kBytes, RO, RR>(out, x, r0, w, row_bytes, bias, n_out);
    }
  };
};

template <int kBytes>
void Q4_0Avx2(float* out, const Q8Rows& x, const uint8_t* w, size_t row_bytes, const float* bias,
              size_t n_rows, size_t n_out, size_t o_begin, size_t o_end) {
  if (n_rows < 2)
    Walk<Avx2Rows<Q4_0Avx2Tiles<kBytes>::template Tile, 1>, 4>(out, x, w, row_bytes, bias, n_rows,
                                                               n_out, o_begin, o_end);
  else
    Walk<Avx2Rows<Q4_0Avx2Tiles<kBytes>::template Tile, 2>, 2>(out, x, w, row_bytes, bias, n_rows,
                                                               n_out, o_begin, o_end);
}

// ---------------------------------------------------------------------------------------------
// Q4_K and Q6_K: a 256-value block summed in integers (matmul_q8act.h), 8 int32 lanes k holding
// the values i with (i / 4) % 8 = k, each group of 4 products times its scale. A decoder gives,
// per chunk of values, the weights as unsigned bytes in value order and the scale of each
// int32 lane (in its low 16 bits, the high ones zero, so that vpmaddwd / vpdpwssd multiply the
// lane's sum, which fits in int16, by it). Q6_K's -32 is folded into the sums' start (off4);
// Q4_K's mins are a second, per-sub-block product with the activations' sums of 32.

// Per-lane scale indices: lane l of chunk h reads scale kFirst(h) + l / kPer.
template <int kChunks, int kStride, int kPer>
struct ScaleIndex {
  alignas(64) int32_t lanes[kChunks][16];
  constexpr ScaleIndex() : lanes() {
    for (int h = 0; h < kChunks; ++h)
      for (int l = 0; l < 16; ++l) lanes[h][l] = (kStride * h + l / kPer) % 16;
  }
};

// A Q4_K block's 8 scales, then its 8 mins (q4_k_scale_min for j = 0..7, 6 bits each) from its
// 12 packed bytes at p, in vector registers: scales 0-3 are the low 6 bits of bytes 0-3 and mins
// 0-3 those of bytes 4-7; scales 4-7 are the low nibbles of bytes 8-11 and mins 4-7 their high
// ones, each with the top 2 bits of bytes 0-3 (scales) or 4-7 (mins) above. Reads 16 bytes
// (the last 4 are the block's next ones, unused).
KVLM_AVX2_INLINE __m128i Q4_KScalesMins(const uint8_t* p) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i low =
      _mm_shuffle_epi8(q, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
  const __m128i top =
      _mm_shuffle_epi8(q, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
  // Shifts of 16-bit words: a byte's bits that the shift brings in from its neighbour are masked.
  const __m128i low_bits =
      _mm_and_si128(low, _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0));
  const __m128i high_nibbles = _mm_and_si128(
      _mm_srli_epi16(low, 4), _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15));
  const __m128i top_bits = _mm_and_si128(_mm_srli_epi16(top, 2), _mm_set1_epi8(0x30));
  return _mm_or_si128(_mm_or_si128(low_bits, high_nibbles), top_bits);
}

// Q4_K, AVX-512: chunk h = values 64h .. 64h + 63 = the low, then the high nibbles of
// qs[32h .. 32h + 31] (sub-blocks 2h and 2h + 1; lanes 0-7 and 8-15).
struct Q4_KVnni {
  static constexpr size_t kBytes = 144;
  static constexpr bool kOffset = false, kMins = true;
  static constexpr ScaleIndex<4, 2, 8> kIndex{};
  __m512i sc;    // int32: the 8 scales, then the 8 mins (6 bits: high halves zero)
  __m256i mins;  // int32: the 8 mins
  float dw, dmin;
  KVLM_VNNI_INLINE void Init(const uint8_t* b) {
    sc = _mm512_cvtepu8_epi32(Q4_KScalesMins(b + 4));
    mins = _mm512_extracti32x8_epi32(sc, 1);
    dw = HalfAt(b);
    dmin = HalfAt(b + 2);
  }
  template <int h>
  KVLM_VNNI_INLINE __m512i Quants(const uint8_t* b) const {
    const __m512i v = _mm512_broadcast_i64x4(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16 + 32 * h)));
    return _mm512_and_si512(_mm512_srlv_epi64(v, _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0)),
                            _mm512_set1_epi8(0x0F));
  }
  template <int h>
  KVLM_VNNI_INLINE __m512i Scales() const {
    return _mm512_permutexvar_epi32(_mm512_load_si512(kIndex.lanes[h]), sc);
  }
};

// Q6_K, AVX-512: chunk h = values 64h .. 64h + 63 = quarters 2(h % 2) and 2(h % 2) + 1 of half
// n = h / 2: ql[64n .. 64n + 63] (nibble h % 2), and bits 4(h % 2) (low 32 values) and
// 4(h % 2) + 2 (high 32) of qh[32n .. 32n + 31]; lane l's scale is scales[4h + l / 4].
struct Q6_KVnni {
  static constexpr size_t kBytes = 210;
  static constexpr bool kOffset = true, kMins = false;
  static constexpr ScaleIndex<4, 4, 4> kIndex{};
  __m512i sc;      // the 16 int8 scales in int32 lanes' low halves
  __m256i mins;    // unused
  float dw, dmin;  // dmin unused
  KVLM_VNNI_INLINE void Init(const uint8_t* b) {
    const __m512i s =
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192)));
    sc = _mm512_and_si512(s, _mm512_set1_epi32(0xFFFF));
    dw = HalfAt(b + 208);
  }
  template <int h>
  KVLM_VNNI_INLINE __m512i Quants(const uint8_t* b) const {
    constexpr int n = h / 2, hp = h % 2;
    const __m512i ql = _mm512_loadu_si512(b + 64 * n);
    const __m512i nib =
        _mm512_and_si512(hp ? _mm512_srli_epi16(ql, 4) : ql, _mm512_set1_epi8(0x0F));
    const __m512i qh = _mm512_broadcast_i64x4(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * n)));
    const __m512i shift = _mm512_set_epi64(4 * hp + 2, 4 * hp + 2, 4 * hp + 2, 4 * hp + 2, 4 * hp,
                                           4 * hp, 4 * hp, 4 * hp);
    const __m512i high = _mm512_and_si512(_mm512_srlv_epi64(qh, shift), _mm512_set1_epi8(3));
    return _mm512_or_si512(nib, _mm512_slli_epi16(high, 4));  // bytes <= 3 << 4: no carry
  }
  template <int h>
  KVLM_VNNI_INLINE __m512i Scales() const {
    return _mm512_permutexvar_epi32(_mm512_load_si512(kIndex.lanes[h]), sc);
  }
};

// A block's end for one tile, on both instruction sets: lanes[ro][rr] holds I_{b,k}; the 8
// float chains take fl(dw * d) * I and, for Q4_K, -fl(dmin * d) * M (matmul_q8act.h).
template <class Dec, int RO, int RR>
KVLM_AVX2_INLINE void KBlockEnd(__m256 (&acc)[RO][RR], const __m256i (&lanes)[RO][RR],
                                const Dec (&dec)[RO], const Q8Rows& x, size_t r0, size_t b) {
  const size_t nb = x.n_in / 256;
  for (int rr = 0; rr < RR; ++rr) {
    const size_t r = r0 + rr;
    const float dy = x.d[r * nb + b];
    for (int ro = 0; ro < RO; ++ro) {
      acc[ro][rr] = _mm256_fmadd_ps(_mm256_set1_ps(dec[ro].dw * dy),
                                    _mm256_cvtepi32_ps(lanes[ro][rr]), acc[ro][rr]);
      if constexpr (Dec::kMins) {
        const __m256i sums = _mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(x.sum32 + r * (x.n_in / 32) + 8 * b));
        acc[ro][rr] = _mm256_fmadd_ps(_mm256_set1_ps(-(dec[ro].dmin * dy)),
                                      _mm256_cvtepi32_ps(_mm256_mullo_epi32(dec[ro].mins, sums)),
                                      acc[ro][rr]);
      }
    }
  }
}

template <int RO, int RR>
KVLM_AVX2_INLINE void StoreTile(float* out, const __m256 (&acc)[RO][RR], size_t r0,
                                const float* bias, size_t n_out) {
  for (int rr = 0; rr < RR; ++rr)
    for (int ro = 0; ro < RO; ++ro) {
      const float dot = Reduce8(acc[ro][rr]);
      out[(r0 + rr) * n_out + ro] = bias ? dot + bias[ro] : dot;
    }
}

// Chunk h (64 values) of block b: each lane's 4 products (from off4 for Q6_K's -32), times
// its scale, onto sum.
template <class Dec, int RO, int RR, int h>
KVLM_VNNI_INLINE void KChunkVnni(__m512i (&sum)[RO][RR], const Dec (&dec)[RO], const Q8Rows& x,
                                 size_t r0, const uint8_t* w, size_t row_bytes, size_t b) {
  const size_t n_in = x.n_in;
  __m512i wv[RO], sv[RO];
  for (int ro = 0; ro < RO; ++ro) {
    wv[ro] = dec[ro].template Quants<h>(w + ro * row_bytes + b * Dec::kBytes);
    sv[ro] = dec[ro].template Scales<h>();
  }
  for (int rr = 0; rr < RR; ++rr) {
    const size_t r = r0 + rr;
    const __m512i a = _mm512_loadu_si512(x.q + r * n_in + b * 256 + 64 * h);
    const __m512i start = Dec::kOffset
                              ? _mm512_loadu_si512(x.off4 + r * (n_in / 4) + b * 64 + 16 * h)
                              : _mm512_setzero_si512();
    for (int ro = 0; ro < RO; ++ro)
      sum[ro][rr] = _mm512_dpwssd_epi32(sum[ro][rr], _mm512_dpbusd_epi32(start, wv[ro], a), sv[ro]);
  }
}

template <class Dec, int RO, int RR>
KVLM_VNNI_INLINE void KTileVnni(float* out, const Q8Rows& x, size_t r0, const uint8_t* w,
                                size_t row_bytes, const float* bias, size_t n_out) {
  __m256 acc[RO][RR];
  for (int ro = 0; ro < RO; ++ro)
    for (int rr = 0; rr < RR; ++rr) acc[ro][rr] = _mm256_setzero_ps();
  for (size_t b = 0; b < x.n_in / 256; ++b) {
    {  // as Q4_0's tiles: the part of the tile kPrefetchTiles ahead that this step reads
      const char* ahead = reinterpret_cast<const char*>(w) + kPrefetchTiles * RO * row_bytes +
                          b * (RO * Dec::kBytes);
      for (size_t line = 0; line < RO * Dec::kBytes; line += 64) PrefetchToL2(ahead + line);
    }
    Dec dec[RO];
    for (int ro = 0; ro < RO; ++ro) dec[ro].Init(w + ro * row_bytes + b * Dec::kBytes);
    __m512i sum[RO][RR];
    for (int ro = 0; ro < RO; ++ro)
      for (int rr = 0; rr < RR; ++rr) sum[ro][rr] = _mm512_setzero_si512();
    KChunkVnni<Dec, RO, RR, 0>(sum, dec, x, r0, w, row_bytes, b);
    KChunkVnni<Dec, RO, RR, 1>(sum, dec, x, r0, w, row_bytes, b);
    KChunkVnni<Dec, RO, RR, 2>(sum, dec, x, r0, w, row_bytes, b);
    KChunkVnni<Dec, RO, RR, 3>(sum, dec, x, r0, w, row_bytes, b);
    __m256i lanes[RO][RR];  // lanes l and l + 8 hold the same k
    for (int ro = 0; ro < RO; ++ro)
      for (int rr = 0; rr < RR; ++rr)
        lanes[ro][rr] = _mm256_add_epi32(_mm512_castsi512_si256(sum[ro][rr]),
                                         _mm512_extracti32x8_epi32(sum[ro][rr], 1));
    KBlockEnd<Dec, RO, RR>(acc, lanes, dec, x, r0, b);
  }
  StoreTile<RO, RR>(out, acc, r0, bias, n_out);
}

template <class Dec>
struct KVnni {
  template <int RO, int RR>
  struct Tile {
    static KVLM_VNNI_INLINE void Run(float* out, const Q8Rows& x, size_t r0, const uint8_t* w,
                                     size_t row_bytes, const float* bias, size_t n_out) {
      KTileVnni<Dec, RO, RR>(out, x, r0, w, row_bytes, bias, n_out);
    }
  };
};

template <class Dec>
void KQuantAvx512Vnni(float* out, const Q8Rows& x, const uint8_t* w, size_t row_bytes,
                      const float* bias, size_t n_rows, size_t n_out, size_t o_begin,
                      size_t o_end) {
  if (n_rows < 4)
    Walk<VnniRows<KVnni<Dec>::template Tile, 1>, 4>(out, x, w, row_bytes, bias, n_rows, n_out,
                                                    o_begin, o_end);
  else
    Walk<VnniRows<KVnni<Dec>::template Tile, 4>, 2>(out, x, w, row_bytes, bias, n_rows, n_out,
                                                    o_begin, o_end);
}

// Q4_K, AVX2: chunk c = sub-block c, values 32c .. 32c + 31: the low (c even) or high nibbles
// of qs[32(c / 2) ..]; one scale for the whole ymm.
struct Q4_KAvx2 {
  static constexpr size_t kBytes = 144;
  static constexpr bool kOffset = false, kMins = true;
  __m256i sc, mins;  // int32: the 8 scales, the 8 mins
  float dw, dmin;
  KVLM_AVX2_INLINE void Init(const uint8_t* b) {
    const __m128i scales_mins = Q4_KScalesMins(b + 4);
    sc = _mm256_cvtepu8_epi32(scales_mins);
    mins = _mm256_cvtepu8_epi32(_mm_srli_si128(scales_mins, 8));
    dw = HalfAt(b);
    dmin = HalfAt(b + 2);
  }
  template <int c>
  KVLM_AVX2_INLINE __m256i Quants(const uint8_t* b) const {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16 + 32 * (c / 2)));
    return _mm256_and_si256(c % 2 ? _mm256_srli_epi16(v, 4) : v, _mm256_set1_epi8(0x0F));
  }
  template <int c>
  KVLM_AVX2_INLINE __m256i Scales() const {
    return _mm256_permutevar8x32_epi32(sc, _mm256_set1_epi32(c));
  }
};

// Q6_K, AVX2: chunk c = quarter c % 4 of half c / 4: ql[64(c / 4) + 32(c % 2) ..] (nibble
// (c % 4) / 2), bits 2(c % 4) of qh[32(c / 4) ..]; lanes 0-3 take scales[2c], 4-7 scales[2c + 1].
struct Q6_KAvx2 {
  static constexpr size_t kBytes = 210;
  static constexpr bool kOffset = true, kMins = false;
  __m256i sc[2];   // the 16 int8 scales in int32 lanes' low halves, 8 per register
  __m256i mins;    // unused
  float dw, dmin;  // dmin unused
  KVLM_AVX2_INLINE void Init(const uint8_t* b) {
    const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192));
    const __m256i low16 = _mm256_set1_epi32(0xFFFF);
    sc[0] = _mm256_and_si256(_mm256_cvtepi8_epi32(s), low16);
    sc[1] = _mm256_and_si256(_mm256_cvtepi8_epi32(_mm_srli_si128(s, 8)), low16);
    dw = HalfAt(b + 208);
  }
  template <int c>
  KVLM_AVX2_INLINE __m256i Quants(const uint8_t* b) const {
    constexpr int n = c / 4, quarter = c % 4;
    const __m256i ql =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 64 * n + 32 * (quarter % 2)));
    const __m256i nib =
        _mm256_and_si256(quarter / 2 ? _mm256_srli_epi16(ql, 4) : ql, _mm256_set1_epi8(0x0F));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * n));
    const __m256i high = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * quarter), _mm256_set1_epi8(3));
    return _mm256_or_si256(nib, _mm256_slli_epi16(high, 4));  // bytes <= 3 << 4: no carry
  }
  template <int c>
  KVLM_AVX2_INLINE __m256i Scales() const {
    constexpr int first = 2 * c % 8;
    return _mm256_permutevar8x32_epi32(
        sc[c / 4],
        _mm256_set_epi32(first + 1, first + 1, first + 1, first + 1, first, first, first, first));
  }
};

// Chunk c (32 values) of block b: lane l sums values 32c + 4l .. 32c + 4l + 3 (k = l).
template <class Dec, int RO, int RR, int c>
KVLM_AVX2_INLINE void KChunkAvx2(__m256i (&sum)[RO][RR], const Dec (&dec)[RO], const Q8Rows& x,
                                 size_t r0, const uint8_t* w, size_t row_bytes, size_t b) {
  const size_t n_in = x.n_in;
  __m256i wv[RO], sv[RO];
  for (int ro = 0; ro < RO; ++ro) {
    wv[ro] = dec[ro].template Quants<c>(w + ro * row_bytes + b * Dec::kBytes);
    sv[ro] = dec[ro].template Scales<c>();
  }
  for (int rr = 0; rr < RR; ++rr) {
    const size_t r = r0 + rr;
    const __m256i a =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q + r * n_in + b * 256 + 32 * c));
    for (int ro = 0; ro < RO; ++ro) {
      // |pair| <= 2 * 63 * 127: no saturation; |t| < 2^15, so vpmaddwd on its low half is exact
      __m256i t = _mm256_madd_epi16(_mm256_maddubs_epi16(wv[ro], a), _mm256_set1_epi16(1));
      if constexpr (Dec::kOffset)
        t = _mm256_add_epi32(t, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                                    x.off4 + r * (n_in / 4) + b * 64 + 8 * c)));
      sum[ro][rr] = _mm256_add_epi32(sum[ro][rr], _mm256_madd_epi16(t, sv[ro]));
    }
  }
}

template <class Dec, int RO, int RR>
KVLM_AVX2_INLINE void KTileAvx2(float* out, const Q8Rows& x, size_t r0, const uint8_t* w,
                                size_t row_bytes, const float* bias, size_t n_out) {
  __m256 acc[RO][RR];
  for (int ro = 0; ro < RO; ++ro)
    for (int rr = 0; rr < RR; ++rr) acc[ro][rr] = _mm256_setzero_ps();
  for (size_t b = 0; b < x.n_in / 256; ++b) {
    {
      const char* ahead = reinterpret_cast<const char*>(w) + kPrefetchTiles * RO * row_bytes +
                          b * (RO * Dec::kBytes);
      for (size_t line = 0; line < RO * Dec::kBytes; line += 64) PrefetchToL2(ahead + line);
    }
    Dec dec[RO];
    for (int ro = 0; ro < RO; ++ro) dec[ro].Init(w + ro * row_bytes + b * Dec::kBytes);
    __m256i sum[RO][RR];
    for (int ro = 0; ro < RO; ++ro)
      for (int rr = 0; rr < RR; ++rr) sum[ro][rr] = _mm256_setzero_si256();
    KChunkAvx2<Dec, RO, RR, 0>(sum, dec, x, r0, w, row_bytes, b);
    KChunkAvx2<Dec, RO, RR, 1>(sum, dec, x, r0, w, row_bytes, b);
    KChunkAvx2<Dec, RO, RR, 2>(sum, dec, x, r0, w, row_bytes, b);
    KChunkAvx2<Dec, RO, RR, 3>(sum, dec, x, r0, w, row_bytes, b);
    KChunkAvx2<Dec, RO, RR, 4>(sum, dec, x, r0, w, row_bytes, b);
    KChunkAvx2<Dec, RO, RR, 5>(sum, dec, x, r0, w, row_bytes, b);
    KChunkAvx2<Dec, RO, RR, 6>(sum, dec, x, r0, w, row_bytes, b);
    KChunkAvx2<Dec, RO, RR, 7>(sum, dec, x, r0, w, row_bytes, b);
    KBlockEnd<Dec, RO, RR>(acc, sum, dec, x, r0, b);
  }
  StoreTile<RO, RR>(out, acc, r0, bias, n_out);
}

template <class Dec>
struct KAvx2 {
  template <int RO, int RR>
  struct Tile {
    static KVLM_AVX2_INLINE void Run(float* out, const Q8Rows& x, size_t r0, const uint8_t* w,
                                     size_t row_bytes, const float* bias, size_t n_out) {
      KTileAvx2<Dec, RO, RR>(out, x, r0, w, row_bytes, bias, n_out);
    }
  };
};

template <class Dec>
void KQuantAvx2(float* out, const Q8Rows& x, const uint8_t* w, size_t row_bytes, const float* bias,
                size_t n_rows, size_t n_out, size_t o_begin, size_t o_end) {
  if (n_rows < 2)
    Walk<Avx2Rows<KAvx2<Dec>::template Tile, 1>, 4>(out, x, w, row_bytes, bias, n_rows, n_out,
                                                    o_begin, o_end);
  else
    Walk<Avx2Rows<KAvx2<Dec>::template Tile, 2>, 2>(out, x, w, row_bytes, bias, n_rows, n_out,
                                                    o_begin, o_end);
}
bool os_saves_avx512() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false;  // OSXSAVE
  unsigned lo, hi;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & 0xe6) == 0xe6;  // XMM, YMM, opmask, ZMM_Hi256, Hi16_ZMM
}

}  // namespace

bool cpu_has_avx512_vnni() {
  static const bool has = [] {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    const bool f = b & (1u << 16), dq = b & (1u << 17), bw = b & (1u << 30), vl = b & (1u << 31);
    const bool vnni = c & (1u << 11);
    return f && dq && bw && vl && vnni && cpu_has_avx2() && os_saves_avx512();
  }();
  return has;
}

bool cpu_has_avx2() {
  static const bool has = [] {
    // F16C by cpuid (leaf 1, ecx bit 29): clang's __builtin_cpu_supports has no "f16c".
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 29))) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return has;
}

Kernel avx512_vnni_kernel(DType type) {
  switch (type) {
    case DType::kQ4_0:
      return Q4_0Avx512Vnni<18>;
    case DType::kQ5_0:
      return Q4_0Avx512Vnni<22>;
    case DType::kQ8_0:
      return Q4_0Avx512Vnni<34>;
    case DType::kQ4_K:
      return KQuantAvx512Vnni<Q4_KVnni>;
    case DType::kQ6_K:
      return KQuantAvx512Vnni<Q6_KVnni>;
    default:
      return nullptr;
  }
}

Kernel avx2_kernel(DType type) {
  switch (type) {
    case DType::kQ4_0:
      return Q4_0Avx2<18>;
    case DType::kQ5_0:
      return Q4_0Avx2<22>;
    case DType::kQ8_0:
      return Q4_0Avx2<34>;
    case DType::kQ4_K:
      return KQuantAvx2<Q4_KAvx2>;
    case DType::kQ6_K:
      return KQuantAvx2<Q6_KAvx2>;
    default:
      return nullptr;
  }
}

}  // namespace kvlm::q8act

#else  // not x86-64: the scalar reference runs

namespace kvlm::q8act {
bool cpu_has_avx512_vnni() {
  return false;
}
bool cpu_has_avx2() {
  return false;
}
Kernel avx512_vnni_kernel(DType) {
  return nullptr;
}
Kernel avx2_kernel(DType) {
  return nullptr;
}
}  // namespace kvlm::q8act

#endif
