// The kOutIn dot-product tiles (matmul.h's 16-lane order) of matmul_simd.cpp's kernels, kept in
// their own file. Include in a file compiled per target, after hwy/foreach_target.h.

// Per-target include guard: this file is included once per Highway target.
#if defined(KVLM_OPS_MATMUL_OUTIN_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KVLM_OPS_MATMUL_OUTIN_INL_H_
#undef KVLM_OPS_MATMUL_OUTIN_INL_H_
#else
#define KVLM_OPS_MATMUL_OUTIN_INL_H_
#endif

#include <algorithm>

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "ops/prefetch.h"
#include "ops/simd_weights-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kvlm {
namespace HWY_NAMESPACE {
namespace {

using DD = hn::CappedTag<float, 16>;
using VD = hn::Vec<DD>;
constexpr size_t kDN = hn::MaxLanes(DD());
constexpr int kDotVecs = static_cast<int>(16 / kDN);
static_assert(16 % kDN == 0, "the 16 dot-product lanes must be whole vectors");

// Tiles: outputs x rows, their accumulators kept within about half the registers.
constexpr int kDotOuts1 = std::clamp(kVecRegs / 2 / kDotVecs, 1, 8);  // one row
constexpr int kDotOutsN = 2;                                          // several rows
constexpr int kDotRowsN = std::clamp((kVecRegs == 32 ? 16 : 12) / (2 * kDotVecs), 1, 4);

// The fixed reduction of the 16 lanes (matmul.h).
HWY_INLINE float SumLanes16(const VD* acc) {
  const DD dd;
  float s[16];
  for (int k = 0; k < kDotVecs; ++k) hn::StoreU(acc[k], dd, s + k * kDN);
  float t[8], u[4];
  for (int l = 0; l < 8; ++l) t[l] = s[l] + s[l + 8];
  for (int l = 0; l < 4; ++l) u[l] = t[l] + t[l + 4];
  return (u[0] + u[2]) + (u[1] + u[3]);
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
#define KVLM_OUTIN_SUMS4 1
// SumLanes16 of four one-vector accumulators at once, in its order: per accumulator t[l] =
// s[l] + s[l + 8], u[l] = t[l] + t[l + 4], then (u0 + u2) + (u1 + u3). Each step adds the same
// pairs, only several accumulators share a vector (and adding is commutative bit for bit), so
// the sums are SumLanes16's bits with 9 vector adds and 10 shuffles for the four instead of a
// store and 15 scalar adds each: at 768 inputs a tile's lane sums cost about as much as its
// products.
HWY_INLINE void SumLanes16x4(const VD& a, const VD& b, const VD& c, const VD& d,
                             float* HWY_RESTRICT sums) {
  const DD dd;
  const hn::Half<DD> dh;                            // 8 lanes
  const hn::Repartition<double, decltype(dh)> d64;  // the same bits as 4 pairs
  const auto ta = hn::Add(hn::LowerHalf(dh, a), hn::UpperHalf(dh, a));
  const auto tb = hn::Add(hn::LowerHalf(dh, b), hn::UpperHalf(dh, b));
  const auto tc = hn::Add(hn::LowerHalf(dh, c), hn::UpperHalf(dh, c));
  const auto td = hn::Add(hn::LowerHalf(dh, d), hn::UpperHalf(dh, d));
  // [ua | ub] and [uc | ud]: lanes l and l + 4 of each t.
  const auto uab = hn::Add(hn::ConcatLowerLower(dh, tb, ta), hn::ConcatUpperUpper(dh, tb, ta));
  const auto ucd = hn::Add(hn::ConcatLowerLower(dh, td, tc), hn::ConcatUpperUpper(dh, td, tc));
  // Pairs (u0, u1) and (u2, u3) of each: [a0+a2, a1+a3, b0+b2, b1+b3, c.., d..].
  const auto pab = hn::BitCast(d64, uab), pcd = hn::BitCast(d64, ucd);
  const auto v = hn::Add(hn::BitCast(dh, hn::ConcatEven(d64, pcd, pab)),
                         hn::BitCast(dh, hn::ConcatOdd(d64, pcd, pab)));
  // [a, b, c, d, a, b, c, d]
  const auto r = hn::Add(hn::ConcatEven(dh, v, v), hn::ConcatOdd(dh, v, v));
  hn::StoreU(r, dh, sums);  // 8 floats; the first 4 are the sums
  (void)dd;
}
#endif

// One 16-element step for RO outputs x RR rows; x rows at stride x_stride, weight rows at
// stride w_stride.
template <int RO, int RR, typename WT>
HWY_INLINE void OutInStep(VD (&acc)[RO][RR][kDotVecs], const float* HWY_RESTRICT x, size_t x_stride,
                          const WT* HWY_RESTRICT w, size_t w_stride) {
  const DD dd;
  for (int k = 0; k < kDotVecs; ++k) {
    VD xv[RR];
    for (int rr = 0; rr < RR; ++rr) xv[rr] = hn::LoadU(dd, x + rr * x_stride + k * kDN);
    for (int ro = 0; ro < RO; ++ro) {
      const VD wv = LoadWeights(dd, w + ro * w_stride + k * kDN);
      for (int rr = 0; rr < RR; ++rr) acc[ro][rr][k] = hn::MulAdd(xv[rr], wv, acc[ro][rr][k]);
    }
  }
}

// out[r][o] for RO outputs starting at w's row o0 and RR rows of x.
template <int RO, int RR, typename WT>
HWY_INLINE void OutInTile(float* HWY_RESTRICT out, const float* HWY_RESTRICT x,
                          const WT* HWY_RESTRICT w, const float* HWY_RESTRICT bias, size_t n_in,
                          size_t n_out) {
  const DD dd;
  VD acc[RO][RR][kDotVecs];
  for (int ro = 0; ro < RO; ++ro)
    for (int rr = 0; rr < RR; ++rr)
      for (int k = 0; k < kDotVecs; ++k) acc[ro][rr][k] = hn::Zero(dd);
  const size_t n_main = n_in / 16 * 16;
  // The tile's RO rows are one contiguous stretch of memory and the next tile's rows follow
  // it, so each 16-element step fetches the next tile's bytes in order (as many as the step
  // reads): one sequential stream, which the hardware prefetcher then runs ahead of, where a
  // fetch per row at the same column (RO interleaved streams) left the bus idle at times.
  const char* ahead = reinterpret_cast<const char*>(w + RO * n_in);
  for (size_t i = 0; i < n_main; i += 16) {
    for (size_t line = 0; line < RO * 16 * sizeof(WT); line += 64)
      PrefetchToL2(ahead + i * RO * sizeof(WT) + line);
    OutInStep<RO, RR>(acc, x + i, n_in, w + i, n_in);
  }
  if (n_main < n_in) {  // the last n_in % 16 elements, zero-padded to 16 lanes
    float xt[RR][16] = {};
    WT wt[RO][16] = {};
    for (int rr = 0; rr < RR; ++rr) std::copy(x + rr * n_in + n_main, x + rr * n_in + n_in, xt[rr]);
    for (int ro = 0; ro < RO; ++ro) std::copy(w + ro * n_in + n_main, w + ro * n_in + n_in, wt[ro]);
    OutInStep<RO, RR>(acc, xt[0], 16, wt[0], 16);
  }
#ifdef KVLM_OUTIN_SUMS4
  if constexpr (kDotVecs == 1 && RO % 4 == 0) {
    for (int rr = 0; rr < RR; ++rr)
      for (int ro = 0; ro < RO; ro += 4) {
        float dots[8];
        SumLanes16x4(acc[ro][rr][0], acc[ro + 1][rr][0], acc[ro + 2][rr][0], acc[ro + 3][rr][0],
                     dots);
        for (int j = 0; j < 4; ++j)
          out[rr * n_out + ro + j] = bias ? dots[j] + bias[ro + j] : dots[j];
      }
    return;
  }
#endif
  for (int rr = 0; rr < RR; ++rr)
    for (int ro = 0; ro < RO; ++ro) {
      const float dot = SumLanes16(acc[ro][rr]);
      out[rr * n_out + ro] = bias ? dot + bias[ro] : dot;
    }
}

// RO outputs (w and bias already offset to the first) for all rows, RR rows at a time, and the
// rows left over in one narrower tile: batch-8 decode on AVX2 (3-row tiles) runs 3 + 3 + 2
// rows, each weight vector widened three times, where 3 + 3 + 1 + 1 widened it four times and
// ran two one-row tiles that load an x vector for every two fmas.
template <int RO, int RR, typename WT>
void OutInOutputs(float* out, const float* x, const WT* w, const float* bias, size_t n_rows,
                  size_t n_in, size_t n_out) {
  size_t r = 0;
  for (; r + RR <= n_rows; r += RR)
    OutInTile<RO, RR>(out + r * n_out, x + r * n_in, w, bias, n_in, n_out);
  if constexpr (RR > 1) {
    if (r < n_rows)
      OutInOutputs<RO, RR - 1>(out + r * n_out, x + r * n_in, w, bias, n_rows - r, n_in, n_out);
  }
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace kvlm
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
