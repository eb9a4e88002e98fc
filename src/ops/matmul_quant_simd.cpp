// Matmul over Q8_0 weights for decode (up to kKQuantPanelMinRows - 1 rows, batched decode
// included), compiled once per Highway target and dispatched at run time like matmul_simd.cpp.
// The other block types, and Q8_0 prefill, run matmul_kquant_simd.cpp's kernels.
//
// Numerics: each 16 weights are dequantized in registers (int8 -> int32 -> fp32, times the
// block scale: ggml's formula, the same fp32 operations as ops/quant.h's reference, so the same
// bits) straight into matmul.h's kOutIn 16-lane fma chains. So a Q8_0 matmul gives exactly the
// bits of the F32 kOutIn matmul on the dequantized matrix, on every target, as the kernels of
// matmul_kquant_simd.cpp do, and inherits its exactness contract: the order of each output's
// reduction depends only on n_in and the target, never on the row count, the batch or the
// threads. Activations stay fp32 (no 8-bit activation quantization).
//
// Quantized matrices are [n_out, n_in] (kOutIn) with n_in a whole number of blocks, so the
// 16-lane steps never need a zero-padded tail.
#include <omp.h>

#include <algorithm>
#include <cstring>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>  // _cvtsh_ss (F16C), used on the AVX2 and AVX-512 targets only
#endif

#include "ops/matmul_internal.h"
#include "ops/matmul_kquant.h"
#include "ops/matmul_q8act.h"
#include "ops/quant.h"

// Highway: simd_targets.h before any hwy header, then foreach_target.h re-includes this
// file once per target (HWY_TARGET_INCLUDE).
// clang-format off
#include "ops/simd_targets.h"
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/matmul_quant_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format on
#include "ops/matmul_outin-inl.h"
#include "ops/simd_weights-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kvlm {
namespace HWY_NAMESPACE {
namespace {

constexpr size_t kPrefetchTiles = 2;  // how far ahead Q8Tile fetches: 1 to 8 measured alike

// A block's fp16 scale as fp32. x86 targets from AVX2 up have F16C: one vcvtph2ps. It gives
// f16_to_f32_fast's bits for every input except signalling NaNs, which it returns quieted; the
// scale only ever enters a product float(q) * d, and a product quiets a signalling NaN the
// same way, so the weights come out with the same bits either way.
HWY_INLINE float BlockScale(const uint8_t* HWY_RESTRICT block) {
  uint16_t h;
  std::memcpy(&h, block, 2);
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  return _cvtsh_ss(h);
#else
  return f16_to_f32_fast(h);
#endif
}

// Q8_0, fused: each 16 weights are widened, scaled and fed to the fma in registers, never
// stored. Decode is bound by the weight stream: going through an L1 buffer (a store and a load
// per vector, and the dequantization as a separate pass) made it compute-bound at about 30% of
// the bandwidth. Same per-element products (float(q) * d, one rounding) and the same 16-lane
// chains as the F32 kOutIn tiles, so the same bits.
template <int RO, int RR>
HWY_INLINE void Q8Tile(float* HWY_RESTRICT out, const float* HWY_RESTRICT x,
                       const uint8_t* HWY_RESTRICT w, size_t row_bytes,
                       const float* HWY_RESTRICT bias, size_t n_in, size_t n_out) {
  const DD dd;
  const hn::Rebind<int32_t, DD> d32;
  const hn::Rebind<int8_t, DD> d8;
  VD acc[RO][RR][kDotVecs];
  for (int ro = 0; ro < RO; ++ro)
    for (int rr = 0; rr < RR; ++rr)
      for (int k = 0; k < kDotVecs; ++k) acc[ro][rr][k] = hn::Zero(dd);
  const size_t n_blocks = n_in / 32;
  for (size_t b = 0; b < n_blocks; ++b) {
    const uint8_t* block = w + b * 34;
    // The tile's RO rows are one contiguous stretch of RO * row_bytes, and so are the tiles
    // after it: each block step fetches the next RO * 34 bytes of the tile kPrefetchTiles ahead,
    // one sequential stream a line at a time. The hardware prefetcher does not follow RO
    // interleaved row streams far enough ahead for the bus to stay busy.
    {
      const char* ahead =
          reinterpret_cast<const char*>(w) + (kPrefetchTiles * RO) * row_bytes + b * (RO * 34);
      for (size_t line = 0; line < RO * 34; line += 64) hwy::Prefetch(ahead + line);
    }
    VD scale[RO];
    for (int ro = 0; ro < RO; ++ro) scale[ro] = hn::Set(dd, BlockScale(block + ro * row_bytes));
    for (size_t half = 0; half < 32; half += 16) {
      const size_t i = b * 32 + half;
      VD xv[RR][kDotVecs];
      for (int rr = 0; rr < RR; ++rr)
        for (int k = 0; k < kDotVecs; ++k) xv[rr][k] = hn::LoadU(dd, x + rr * n_in + i + k * kDN);
      for (int ro = 0; ro < RO; ++ro) {
        const auto* q = reinterpret_cast<const int8_t*>(block + ro * row_bytes + 2 + half);
        for (int k = 0; k < kDotVecs; ++k) {
          const VD wv =
              hn::Mul(hn::ConvertTo(dd, hn::PromoteTo(d32, hn::LoadU(d8, q + k * kDN))), scale[ro]);
          for (int rr = 0; rr < RR; ++rr)
            acc[ro][rr][k] = hn::MulAdd(xv[rr][k], wv, acc[ro][rr][k]);
        }
      }
    }
  }
  for (int rr = 0; rr < RR; ++rr)
    for (int ro = 0; ro < RO; ++ro) {
      const float dot = SumLanes16(acc[ro][rr]);
      out[rr * n_out + ro] = bias ? dot + bias[ro] : dot;
    }
}

template <DType kType, int RO, int RR>
void QuantOutputs(float* out, const float* x, const uint8_t* w, size_t row_bytes, const float* bias,
                  size_t n_rows, size_t n_in, size_t n_out) {
  size_t r = 0;
  for (; r + RR <= n_rows; r += RR)
    Q8Tile<RO, RR>(out + r * n_out, x + r * n_in, w, row_bytes, bias, n_in, n_out);
  for (; r < n_rows; ++r)
    Q8Tile<RO, 1>(out + r * n_out, x + r * n_in, w, row_bytes, bias, n_in, n_out);
}

// Output tile t: outputs [t * RO, t * RO + RO) for all rows (fewer at the end). Not inlined
// into the OpenMP region, which clang compiles without the target's attributes.
template <DType kType, int RO, int RR>
HWY_NOINLINE void QuantOutputTile(float* out, const float* x, const uint8_t* w, size_t row_bytes,
                                  const float* bias, size_t n_rows, size_t n_in, size_t n_out,
                                  size_t t) {
  const size_t o0 = t * RO;
  if (o0 + RO <= n_out) {
    QuantOutputs<kType, RO, RR>(out + o0, x, w + o0 * row_bytes, row_bytes,
                                bias ? bias + o0 : nullptr, n_rows, n_in, n_out);
    return;
  }
  for (size_t o = o0; o < n_out; ++o)
    QuantOutputs<kType, 1, RR>(out + o, x, w + o * row_bytes, row_bytes, bias ? bias + o : nullptr,
                               n_rows, n_in, n_out);
}

template <DType kType, int RO, int RR>
void QuantAll(float* out, const float* x, const WeightMatrix& w, const float* bias, size_t n_rows,
              int n_threads) {
  const size_t n_in = w.n_in, n_out = w.n_out;
  const size_t row_bytes = dtype_bytes(kType, n_in);
  const auto* data = static_cast<const uint8_t*>(w.data);
  const size_t n_tiles = (n_out + RO - 1) / RO;
#pragma omp parallel for num_threads(n_threads) schedule(static)
  for (size_t t = 0; t < n_tiles; ++t)
    QuantOutputTile<kType, RO, RR>(out, x, data, row_bytes, bias, n_rows, n_in, n_out, t);
}

template <DType kType>
void QuantMatmul(float* out, const float* x, const WeightMatrix& w, const float* bias,
                 size_t n_rows, int n_threads) {
  if (n_rows == 1) {
    QuantAll<kType, kDotOuts1, 1>(out, x, w, bias, n_rows, n_threads);
  } else {
    QuantAll<kType, kDotOutsN, kDotRowsN>(out, x, w, bias, n_rows, n_threads);
  }
}

}  // namespace

void QuantMatmulImpl(float* out, const float* x, const WeightMatrix& w, const float* bias,
                     int n_rows, int n_threads) {
  if (n_rows <= 0 || w.n_out <= 0) return;
  n_threads = std::max(n_threads, 1);
  switch (w.dtype) {
    case DType::kQ8_0:
      return QuantMatmul<DType::kQ8_0>(out, x, w, bias, n_rows, n_threads);
    default:
      return;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace kvlm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvlm {

HWY_EXPORT(QuantMatmulImpl);

void matmul_quant_forward(float* out, const float* x, const WeightMatrix& w, const float* bias,
                          int n_rows, const Parallel& par) {
  // Q4_0, Q5_0, Q4_K, Q6_K, and Q8_0 prefill: the kernels of matmul_kquant_simd.cpp.
  // Q8_0 up to 8 rows (batched decode) stays on this file's fused tiles: at 8 rows the panel
  // path decoded GPT-2 124M at 413-421 tok/s against their 555-571 (kvlm bench, batch 8).
  // Q4_0, Q4_K, Q6_K: 8-bit activations and integer dot products (matmul_q8act.h), decode and
  // prefill.
  if (q8act_kernel_handles(w.dtype)) return matmul_q8act_forward(out, x, w, bias, n_rows, par);
  const bool q8_decode = w.dtype == DType::kQ8_0 && n_rows <= 8;
  if (!q8_decode && kquant_kernel_handles(w.dtype, n_rows))
    return matmul_kquant_forward(out, x, w, bias, n_rows, par);
  HWY_DYNAMIC_DISPATCH(QuantMatmulImpl)(out, x, w, bias, n_rows, par.n_threads);
}

}  // namespace kvlm
#endif  // HWY_ONCE
