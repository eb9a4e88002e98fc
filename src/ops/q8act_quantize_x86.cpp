// The activation quantizers of matmul_q8act.h in AVX-512 and AVX2: the scalar quantizer's
// arithmetic (matmul_q8act.cpp) on all lanes, so the bytes are the same.
//
// Why: every decode matmul over block weights quantizes its input rows first, on the calling
// thread while the other waits. The scalar loop calls nearbyintf for each value; at batch 8 on
// GPT-2's shape it was 9% of a Q8_0 step (perf, Zen 5).
//
// Each step matches the scalar one exactly: the block's largest magnitude with NaNs skipped (max
// returns its second operand, the running maximum, when the first is NaN, as std::max keeps the
// running value), the scale and its inverse in scalar code, one fp32 product, rounding to
// nearest even (nearbyint in the default mode), NaN to 0, the clamp to [-127, 127]. The sums of
// each 4 and 32 values are integer sums, exact in any order: vpdpbusd (AVX-512) or
// vpmaddubsw + vpmaddwd (AVX2) against bytes of 1.
#include <cstddef>
#include <cstdint>

#include "ops/matmul_q8act_kernels.h"
#include "ops/q8act_x86_targets.h"

#if KVLM_Q8ACT_X86

namespace kvlm::q8act {
namespace {

KVLM_VNNI_TARGET void QuantizeRowAvx512(int8_t* q, float* d, int32_t* off4, int32_t* sum32,
                                        const float* x, size_t n, size_t block, int32_t offset) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
  for (size_t b = 0; b < n / block; ++b) {
    const float* xb = x + b * block;
    __m512 vmax = _mm512_setzero_ps();
    for (size_t i = 0; i < block; i += 16)
      vmax = _mm512_max_ps(_mm512_andnot_ps(sign, _mm512_loadu_ps(xb + i)), vmax);
    const float scale = _mm512_reduce_max_ps(vmax) / 127.0f;
    const float inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
    d[b] = scale;
    const __m512 inv = _mm512_set1_ps(inverse);
    for (size_t i = 0; i < block; i += 16) {
      __m512 v = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_loadu_ps(xb + i), inv),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v);
      v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * block + i),
                       _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(v)));
    }
  }
  if (offset == 0 && sum32 == nullptr) return;
  // 64 values a step (n is whole 32s: the last step may have 32).
  const __m512i ones = _mm512_set1_epi8(1), minus_offset = _mm512_set1_epi32(-offset);
  for (size_t i = 0; i < n; i += 64) {
    const bool two = n - i >= 64;
    const __m512i quads = _mm512_dpbusd_epi32(
        _mm512_setzero_si512(), ones, _mm512_maskz_loadu_epi8(two ? ~0ull : 0xFFFFFFFFull, q + i));
    if (offset != 0)
      _mm512_mask_storeu_epi32(off4 + i / 4, two ? 0xFFFF : 0x00FF,
                               _mm512_mullo_epi32(quads, minus_offset));
    if (sum32 != nullptr) {
      sum32[i / 32] = _mm512_mask_reduce_add_epi32(0x00FF, quads);
      if (two) sum32[i / 32 + 1] = _mm512_mask_reduce_add_epi32(0xFF00, quads);
    }
  }
}

KVLM_AVX2_INLINE int32_t SumOf8(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  return _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 1)));
}

KVLM_AVX2_INLINE float MaxOf8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_shuffle_ps(m, m, 1)));
}

KVLM_AVX2_TARGET void QuantizeRowAvx2(int8_t* q, float* d, int32_t* off4, int32_t* sum32,
                                      const float* x, size_t n, size_t block, int32_t offset) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  for (size_t b = 0; b < n / block; ++b) {
    const float* xb = x + b * block;
    __m256 vmax = _mm256_setzero_ps();
    for (size_t i = 0; i < block; i += 8)
      vmax = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(xb + i)), vmax);
    const float scale = MaxOf8(vmax) / 127.0f;
    const float inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
    d[b] = scale;
    const __m256 inv = _mm256_set1_ps(inverse);
    for (size_t i = 0; i < block; i += 8) {
      __m256 v = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(xb + i), inv),
                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      v = _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q));
      v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
      const __m256i v32 = _mm256_cvtps_epi32(v);
      const __m128i v16 =
          _mm_packs_epi32(_mm256_castsi256_si128(v32), _mm256_extracti128_si256(v32, 1));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(q + b * block + i), _mm_packs_epi16(v16, v16));
    }
  }
  if (offset == 0 && sum32 == nullptr) return;
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  const __m256i minus_offset = _mm256_set1_epi32(-offset);
  for (size_t i = 0; i < n; i += 32) {
    const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + i));
    const __m256i quads = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, bytes), ones16);
    if (offset != 0)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(off4 + i / 4),
                          _mm256_mullo_epi32(quads, minus_offset));
    if (sum32 != nullptr) sum32[i / 32] = SumOf8(quads);
  }
}

}  // namespace

RowQuantizer avx512_row_quantizer() {
  return QuantizeRowAvx512;
}

RowQuantizer avx2_row_quantizer() {
  return QuantizeRowAvx2;
}

}  // namespace kvlm::q8act

#else  // not x86-64: the scalar quantizer runs

namespace kvlm::q8act {
RowQuantizer avx512_row_quantizer() {
  return nullptr;
}
RowQuantizer avx2_row_quantizer() {
  return nullptr;
}
}  // namespace kvlm::q8act

#endif
