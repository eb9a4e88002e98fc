// The x86 kernels of matmul_q8act.h: AVX512-VNNI (vpdpbusd) and AVX2 (vpmaddubsw + vpmaddwd),
// each giving the scalar reference's bits (the integer sums are exact; the float chains and
// their final reduction follow matmul_q8act.h's order lane for lane).
//
// Highway 1.0 (Debian 12) has no target with VNNI, so these functions carry their instruction
// set in a target attribute and run only where q8act::cpu_has_* says so. They are called from
// an OpenMP region in matmul_q8act.cpp; nothing here opens one.
//
// Q4_0, AVX-512: a zmm holds two blocks (b even, b + 1) of one weight row as unsigned nibbles
// in value order, [qs_b low | qs_b high | qs_b+1 low | qs_b+1 high] (each 16 bytes: values
// 0..15, then 16..31), against the activation bytes of the same 64 values loaded as stored;
// vpdpbusd, accumulating onto -8 * (sum of each 4 activations), leaves in lane l the partial
// sum P_{b + l / 8, l % 8}: exactly the reference's lane 8 * (b % 2) + p. AVX2 runs one block per
// ymm and keeps the even and odd blocks' chains in two registers.
//
// Tiles: RO weight rows x RR activation rows per register tile; activation rows are taken in
// chunks of kRowChunk so that a chunk's int8 rows stay in L2 while every output tile reads them.
#include <algorithm>
#include <cstring>

#include "ops/matmul_q8act_kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the unused merge source of their
// unmasked forms, which -Wmaybe-uninitialized reports once they are inlined into functions with
// a target attribute (a false positive: those lanes are all overwritten).
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#define KVLM_VNNI_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c")))
#define KVLM_VNNI_INLINE inline __attribute__((always_inline)) KVLM_VNNI_TARGET
#define KVLM_AVX2_TARGET __attribute__((target("avx2,fma,f16c")))
#define KVLM_AVX2_INLINE inline __attribute__((always_inline)) KVLM_AVX2_TARGET

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

// ---------------------------------------------------------------------------------------------
// Q4_0, AVX512-VNNI.

// Two blocks' nibbles of one row (`b` at the first block; `two` false: the second is absent
// and its lanes zero).
KVLM_VNNI_INLINE __m512i Q4_0Pair(const uint8_t* b, bool two) {
  const __m512i shift = _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0);
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  __m512i v = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2)));
  v = two ? _mm512_mask_broadcast_i32x4(
                v, 0xFF00, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 18 + 2)))
          : _mm512_maskz_mov_epi32(0x00FF, v);
  return _mm512_and_si512(_mm512_srlv_epi64(v, shift), low4);
}

// [d_b x 8 | d_b+1 x 8] (0 for an absent second block), converted by vcvtph2ps (F16C's bits).
KVLM_VNNI_INLINE __m512 Q4_0PairScales(const uint8_t* b, bool two) {
  uint16_t h0, h1 = 0;
  std::memcpy(&h0, b, 2);
  if (two) std::memcpy(&h1, b + 18, 2);
  const __m256i h =
      _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16(static_cast<short>(h0))),
                              _mm_set1_epi16(static_cast<short>(h1)), 1);
  return _mm512_cvtph_ps(h);
}

template <int RO, int RR>
KVLM_VNNI_INLINE void Q4_0TileVnni(float* out, const Q8Rows& x, size_t r0, const uint8_t* w,
                                   size_t row_bytes, const float* bias, size_t n_out) {
  const size_t n_in = x.n_in, nb = n_in / 32, n4 = n_in / 4;
  __m512 acc[RO][RR];
  for (int ro = 0; ro < RO; ++ro)
    for (int rr = 0; rr < RR; ++rr) acc[ro][rr] = _mm512_setzero_ps();
  for (size_t b = 0; b < nb; b += 2) {
    const bool two = b + 1 < nb;
    const __mmask16 lanes = two ? 0xFFFF : 0x00FF;
    // A tile's RO rows and the tiles after it are one contiguous stretch: fetch the part of the
    // tile kPrefetchTiles ahead that this step reads, one sequential stream.
    {
      const char* ahead =
          reinterpret_cast<const char*>(w) + kPrefetchTiles * RO * row_bytes + b * (RO * 18);
      for (size_t line = 0; line < 2 * RO * 18; line += 64) _mm_prefetch(ahead + line, _MM_HINT_T0);
    }
    __m512i wv[RO];
    __m512 dw[RO];
    for (int ro = 0; ro < RO; ++ro) {
      const uint8_t* blk = w + ro * row_bytes + b * 18;
      wv[ro] = Q4_0Pair(blk, two);
      dw[ro] = Q4_0PairScales(blk, two);
    }
    for (int rr = 0; rr < RR; ++rr) {
      const size_t r = r0 + rr;
      const __m512i a =
          _mm512_maskz_loadu_epi8(two ? ~0ull : 0xFFFFFFFFull, x.q + r * n_in + b * 32);
      const __m512i off = _mm512_maskz_loadu_epi32(lanes, x.off4 + r * n4 + b * 8);
      const float* dx = x.d + r * nb + b;
      const __m512 dxv =
          _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(dx[0]), _mm512_set1_ps(two ? dx[1] : 0.0f));
      for (int ro = 0; ro < RO; ++ro) {
        const __m512 p = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(off, wv[ro], a));
        acc[ro][rr] = _mm512_mask3_fmadd_ps(_mm512_mul_ps(dw[ro], dxv), p, acc[ro][rr], lanes);
      }
    }
  }
  for (int rr = 0; rr < RR; ++rr)
    for (int ro = 0; ro < RO; ++ro) {
      const float dot = Reduce16(acc[ro][rr]);
      out[(r0 + rr) * n_out + ro] = bias ? dot + bias[ro] : dot;
    }
}

// Rows [r0, r1) of outputs [o, o + RO).
template <int RO, int RR>
KVLM_VNNI_INLINE void Q4_0RowsVnni(float* out, const Q8Rows& x, size_t r0, size_t r1,
                                   const uint8_t* w, size_t row_bytes, const float* bias,
                                   size_t n_out) {
  size_t r = r0;
  for (; r + RR <= r1; r += RR) Q4_0TileVnni<RO, RR>(out, x, r, w, row_bytes, bias, n_out);
  for (; r < r1; ++r) Q4_0TileVnni<RO, 1>(out, x, r, w, row_bytes, bias, n_out);
}

template <int RO, int RR>
__attribute__((noinline)) KVLM_VNNI_TARGET void Q4_0Vnni(float* out, const Q8Rows& x,
                                                         const uint8_t* w, size_t row_bytes,
                                                         const float* bias, size_t n_rows,
                                                         size_t n_out, size_t o_begin,
                                                         size_t o_end) {
  for (size_t r0 = 0; r0 < n_rows; r0 += kRowChunk) {
    const size_t r1 = std::min(n_rows, r0 + kRowChunk);
    size_t o = o_begin;
    for (; o + RO <= o_end; o += RO)
      Q4_0RowsVnni<RO, RR>(out + o, x, r0, r1, w + o * row_bytes, row_bytes,
                           bias ? bias + o : nullptr, n_out);
    for (; o < o_end; ++o)
      Q4_0RowsVnni<1, RR>(out + o, x, r0, r1, w + o * row_bytes, row_bytes,
                          bias ? bias + o : nullptr, n_out);
  }
}

void Q4_0Avx512Vnni(float* out, const Q8Rows& x, const uint8_t* w, size_t row_bytes,
                    const float* bias, size_t n_rows, size_t n_out, size_t o_begin, size_t o_end) {
  if (n_rows < 4)
    Q4_0Vnni<4, 1>(out, x, w, row_bytes, bias, n_rows, n_out, o_begin, o_end);
  else
    Q4_0Vnni<4, 4>(out, x, w, row_bytes, bias, n_rows, n_out, o_begin, o_end);
}

// ---------------------------------------------------------------------------------------------
// Q4_0, AVX2: one block per ymm, [low nibbles | high nibbles] = values 0..31.

KVLM_AVX2_INLINE __m256i Q4_0Block(const uint8_t* b) {
  const __m256i shift = _mm256_set_epi64x(4, 4, 0, 0);
  const __m256i v =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2)));
  return _mm256_and_si256(_mm256_srlv_epi64(v, shift), _mm256_set1_epi8(0x0F));
}

// Block b's 8 partial sums (with Q4_0's -8 folded in through off4) against row r.
KVLM_AVX2_INLINE __m256 Q4_0Partials(__m256i wv, const Q8Rows& x, size_t r, size_t b) {
  const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q + r * x.n_in + b * 32));
  const __m256i off =
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.off4 + r * (x.n_in / 4) + b * 8));
  const __m256i pairs = _mm256_maddubs_epi16(wv, a);  // |pair| <= 2 * 15 * 127: no saturation
  return _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)), off));
}

template <int RO, int RR>
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
      wv[ro] = Q4_0Block(w + ro * row_bytes + b * 18);
      dw[ro] = HalfAt(w + ro * row_bytes + b * 18);
    }
    for (int rr = 0; rr < RR; ++rr) {
      const float dx = x.d[(r0 + rr) * nb + b];
      for (int ro = 0; ro < RO; ++ro)
        acc[ro][rr][parity] = _mm256_fmadd_ps(
            _mm256_set1_ps(dw[ro] * dx), Q4_0Partials(wv[ro], x, r0 + rr, b), acc[ro][rr][parity]);
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

template <int RO, int RR>
KVLM_AVX2_INLINE void Q4_0RowsAvx2(float* out, const Q8Rows& x, size_t r0, size_t r1,
                                   const uint8_t* w, size_t row_bytes, const float* bias,
                                   size_t n_out) {
  size_t r = r0;
  for (; r + RR <= r1; r += RR) Q4_0TileAvx2<RO, RR>(out, x, r, w, row_bytes, bias, n_out);
  for (; r < r1; ++r) Q4_0TileAvx2<RO, 1>(out, x, r, w, row_bytes, bias, n_out);
}

template <int RO, int RR>
__attribute__((noinline)) KVLM_AVX2_TARGET void Q4_0Avx2Impl(float* out, const Q8Rows& x,
                                                             const uint8_t* w, size_t row_bytes,
                                                             const float* bias, size_t n_rows,
                                                             size_t n_out, size_t o_begin,
                                                             size_t o_end) {
  for (size_t r0 = 0; r0 < n_rows; r0 += kRowChunk) {
    const size_t r1 = std::min(n_rows, r0 + kRowChunk);
    size_t o = o_begin;
    for (; o + RO <= o_end; o += RO)
      Q4_0RowsAvx2<RO, RR>(out + o, x, r0, r1, w + o * row_bytes, row_bytes,
                           bias ? bias + o : nullptr, n_out);
    for (; o < o_end; ++o)
      Q4_0RowsAvx2<1, RR>(out + o, x, r0, r1, w + o * row_bytes, row_bytes,
                          bias ? bias + o : nullptr, n_out);
  }
}

void Q4_0Avx2(float* out, const Q8Rows& x, const uint8_t* w, size_t row_bytes, const float* bias,
              size_t n_rows, size_t n_out, size_t o_begin, size_t o_end) {
  if (n_rows < 2)
    Q4_0Avx2Impl<4, 1>(out, x, w, row_bytes, bias, n_rows, n_out, o_begin, o_end);
  else
    Q4_0Avx2Impl<2, 2>(out, x, w, row_bytes, bias, n_rows, n_out, o_begin, o_end);
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
  return type == DType::kQ4_0 ? Q4_0Avx512Vnni : nullptr;
}

Kernel avx2_kernel(DType type) {
  return type == DType::kQ4_0 ? Q4_0Avx2 : nullptr;
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
