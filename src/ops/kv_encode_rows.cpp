// fp8 (e4m3) and q8_0 rows in SIMD: the scalar reference's arithmetic (ops/kv_format.cpp) on
// all lanes. e4m3 rounds |x| to 3 mantissa bits with round-to-nearest-even folded into an
// integer add (normal values) or into an fp32 add (below e4m3's smallest normal, where the
// quantum is fixed); q8_0 takes each block's largest magnitude, then rounds x / d half away from
// zero as std::round does. Partial vectors go through the same code via padded copies.
#include "ops/kv_encode_rows.h"

#include <algorithm>
#include <cstring>

#include "ops/dtype.h"
#include "ops/kv_format.h"

// Highway: simd_targets.h before any hwy header, then foreach_target.h re-includes this
// file once per target (HWY_TARGET_INCLUDE).
// clang-format off
#include "ops/simd_targets.h"
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/kv_encode_rows.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace kvlm {
namespace HWY_NAMESPACE {
namespace {

namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using DU = hn::RebindToUnsigned<DF>;
using DI = hn::RebindToSigned<DF>;
using VF = hn::Vec<DF>;
using VU = hn::Vec<DU>;

// Up to one vector of src through `body(vector, lanes)`, padded with zeros past n.
template <class F>
HWY_INLINE void ForEachVector(const float* src, size_t n, F body) {
  const DF df;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  for (; i + N <= n; i += N) body(hn::LoadU(df, src + i), i, N);
  if (i < n) {
    HWY_ALIGN float in[hn::MaxLanes(DF())] = {};
    std::memcpy(in, src + i, (n - i) * sizeof(float));
    body(hn::Load(df, in), i, n - i);
  }
}

// Stores the low byte of each lane's int32 (all within int8 or uint8 range) at dst[0, count).
template <typename T>
HWY_INLINE void StoreBytes(hn::Vec<DI> v, T* dst, size_t count) {
  const hn::Rebind<T, DI> d8;
  HWY_ALIGN T out[hn::MaxLanes(DI())];
  hn::Store(hn::DemoteTo(d8, v), d8, out);
  std::memcpy(dst, out, count);
}

// f32_to_e4m3 of each lane.
HWY_INLINE hn::Vec<DI> E4m3Codes(VF x) {
  const DF df;
  const DU du;
  const DI di;
  const VU bits = hn::BitCast(du, x);
  const VU sign = hn::And(hn::ShiftRight<24>(bits), hn::Set(du, 0x80u));
  const VF a = hn::Abs(x);
  const VU abits = hn::BitCast(du, a);
  // Normal (|x| >= 2^-6): the top 3 mantissa bits rounded to nearest even, a carry moving into
  // the exponent; fp32's exponent bias 127 becomes e4m3's 7.
  const VU odd = hn::And(hn::ShiftRight<20>(abits), hn::Set(du, 1u));
  const VU normal = hn::Sub(hn::ShiftRight<20>(hn::Add(hn::Add(abits, hn::Set(du, 0x7ffffu)), odd)),
                            hn::Set(du, 120u << 3));
  // Below 2^-6 the quantum is 2^-9, the last mantissa bit of 16384.0f: adding it rounds |x| to
  // that quantum (to nearest even) and leaves the count of quanta, 0..8, in the low bits
  // (8 is the smallest normal, 0x08).
  const VF magic = hn::Set(df, 16384.0f);
  const VU small = hn::Sub(hn::BitCast(du, hn::Add(a, magic)), hn::BitCast(du, magic));
  VU code = hn::IfThenElse(hn::RebindMask(du, hn::Lt(a, hn::Set(df, 0.015625f))), small, normal);
  code =
      hn::IfThenElse(hn::RebindMask(du, hn::Ge(a, hn::Set(df, 448.0f))), hn::Set(du, 0x7eu), code);
  code = hn::Or(code, sign);
  code = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(x)), hn::Set(du, 0x7fu), code);
  return hn::BitCast(di, code);
}

// std::round (half away from zero) of each lane; NaN stays NaN.
HWY_INLINE VF RoundHalfAway(VF v) {
  const DF df;
  const VF t = hn::Trunc(v);  // v - t is exact
  const auto up = hn::Ge(hn::Abs(hn::Sub(v, t)), hn::Set(df, 0.5f));
  return hn::IfThenElse(up, hn::Add(t, hn::CopySign(hn::Set(df, 1.0f), v)), t);
}

}  // namespace

void E4m3RowImpl(uint8_t* dst, const float* src, size_t n, const float* head_scales,
                 size_t head_dim) {
  const DF df;
  for (size_t h0 = 0; h0 < n; h0 += head_dim) {
    const VF scale = hn::Set(df, head_scales[h0 / head_dim]);
    ForEachVector(src + h0, std::min(head_dim, n - h0), [&](VF x, size_t i, size_t count) HWY_ATTR {
      StoreBytes(E4m3Codes(hn::Div(x, scale)), dst + h0 + i, count);
    });
  }
}

void QuantizeQ8RowImpl(std::byte* dst, const float* src, size_t n) {
  const DF df;
  const DI di;
  auto* q = reinterpret_cast<int8_t*>(dst);
  std::byte* scales = dst + n;
  for (size_t b0 = 0, block = 0; b0 < n; b0 += kQ8BlockSize, ++block) {
    const size_t len = std::min<size_t>(kQ8BlockSize, n - b0);
    // The block's largest magnitude; NaNs count as zero (std::max keeps the running value).
    VF vmax = hn::Zero(df);
    ForEachVector(src + b0, len, [&](VF x, size_t, size_t) HWY_ATTR {
      vmax = hn::Max(vmax, hn::IfThenZeroElse(hn::IsNaN(x), hn::Abs(x)));
    });
    const float amax = hn::GetLane(hn::MaxOfLanes(df, vmax));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t h = f32_to_f16(d);
    std::memcpy(scales + 2 * block, &h, 2);
    const VF vid = hn::Set(df, id), lo = hn::Set(df, -127.0f), hi = hn::Set(df, 127.0f);
    ForEachVector(src + b0, len, [&](VF x, size_t i, size_t count) HWY_ATTR {
      const VF r = RoundHalfAway(hn::Mul(x, vid));
      const VF clamped = hn::Min(hn::Max(hn::IfThenZeroElse(hn::IsNaN(r), r), lo), hi);
      StoreBytes(hn::ConvertTo(di, clamped), q + b0 + i, count);
    });
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace kvlm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvlm {

HWY_EXPORT(E4m3RowImpl);
HWY_EXPORT(QuantizeQ8RowImpl);

void f32_to_e4m3_row(uint8_t* dst, const float* src, size_t n, const float* head_scales,
                     size_t head_dim) {
  HWY_DYNAMIC_DISPATCH(E4m3RowImpl)(dst, src, n, head_scales, head_dim);
}

void quantize_q8_0_row(std::byte* dst, const float* src, size_t n) {
  HWY_DYNAMIC_DISPATCH(QuantizeQ8RowImpl)(dst, src, n);
}

}  // namespace kvlm
#endif  // HWY_ONCE
