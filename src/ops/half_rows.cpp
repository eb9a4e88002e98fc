// fp32 -> f16 / bf16 rows in integer SIMD: the scalar functions' arithmetic (ops/dtype.cpp)
// done on all lanes, so every target, with or without hardware half conversions, gives their
// bits. The last partial vector goes through the same code via a padded copy.
#include "ops/half_rows.h"

#include <algorithm>
#include <cstring>

// Highway: simd_targets.h before any hwy header, then foreach_target.h re-includes this
// file once per target (HWY_TARGET_INCLUDE).
// clang-format off
#include "ops/simd_targets.h"
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/half_rows.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace kvlm {
namespace HWY_NAMESPACE {
namespace {

namespace hn = hwy::HWY_NAMESPACE;
using DU = hn::ScalableTag<uint32_t>;
using DF32 = hn::Repartition<float, DU>;
using DU16 = hn::Rebind<uint16_t, DU>;
using DI = hn::Repartition<int32_t, DU>;
using VU = hn::Vec<DU>;

// f32_to_f16 on each lane of the fp32 bits: the halves of |x| at or above 2^-14 take its top
// bits with round-to-nearest-even folded in as an add (a carry out of the mantissa moves to the
// exponent, as it should); the subnormal halves are |x| + 0.5 in fp32, whose own rounding to
// nearest even leaves the half's mantissa in the low bits (the float add's rounding is the
// half's); 65,520 and above round to infinity, NaN to 0x7e00, and the sign goes back on.
HWY_INLINE VU HalfBits(VU bits) {
  const DU du;
  const DF32 df;
  const VU sign = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 0x8000u));
  const VU abs = hn::And(bits, hn::Set(du, 0x7fffffffu));
  // Normal halves: (abs + 0xfff + odd) >> 13, less the exponent bias difference (112 << 10).
  const VU odd = hn::And(hn::ShiftRight<13>(abs), hn::Set(du, 1u));
  const VU normal = hn::Sub(hn::ShiftRight<13>(hn::Add(hn::Add(abs, hn::Set(du, 0xfffu)), odd)),
                            hn::Set(du, 112u << 10));
  // Subnormal halves: 0.5f has its lowest mantissa bit at 2^-24, the half's subnormal step.
  const VU half_magic = hn::Set(du, 0x3f000000u);
  const VU subnormal = hn::Sub(
      hn::BitCast(du, hn::Add(hn::BitCast(df, abs), hn::BitCast(df, half_magic))), half_magic);
  // Compared as signed: every magnitude below 2^31 is positive either way.
  const DI di;
  const auto is_subnormal =
      hn::RebindMask(du, hn::Lt(hn::BitCast(di, abs), hn::Set(di, 0x38800000)));
  const auto is_inf = hn::RebindMask(du, hn::Gt(hn::BitCast(di, abs), hn::Set(di, 0x477fefff)));
  const auto is_nan = hn::RebindMask(du, hn::Gt(hn::BitCast(di, abs), hn::Set(di, 0x7f800000)));
  VU h = hn::IfThenElse(is_subnormal, subnormal, normal);
  h = hn::IfThenElse(is_inf, hn::Set(du, 0x7c00u), h);
  h = hn::IfThenElse(is_nan, hn::Set(du, 0x7e00u), h);
  return hn::Or(h, sign);
}

// f32_to_bf16 on each lane: round to nearest even as an add, NaN kept quiet (bit 6 of the half
// set) instead of rounded.
HWY_INLINE VU Bf16Bits(VU bits) {
  const DU du;
  const DI di;
  const VU odd = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1u));
  const VU rounded = hn::ShiftRight<16>(hn::Add(hn::Add(bits, hn::Set(du, 0x7fffu)), odd));
  const VU quiet_nan = hn::Or(hn::ShiftRight<16>(bits), hn::Set(du, 0x40u));
  const VU abs = hn::And(bits, hn::Set(du, 0x7fffffffu));
  const auto is_nan = hn::RebindMask(du, hn::Gt(hn::BitCast(di, abs), hn::Set(di, 0x7f800000)));
  return hn::IfThenElse(is_nan, quiet_nan, rounded);
}

// Every lane's result is below 2^16, so the demotion's saturation never acts.
template <class F>
HWY_INLINE void ConvertRow(uint16_t* HWY_RESTRICT dst, const float* HWY_RESTRICT src, size_t n,
                           F convert) {
  const DU du;
  const DU16 du16;
  const DI di;
  const size_t N = hn::Lanes(du);
  auto one = [&](const float* from, uint16_t* to) HWY_ATTR {
    const VU bits = hn::LoadU(du, reinterpret_cast<const uint32_t*>(from));
    hn::StoreU(hn::DemoteTo(du16, hn::BitCast(di, convert(bits))), du16, to);
  };
  size_t i = 0;
  for (; i + N <= n; i += N) one(src + i, dst + i);
  if (i < n) {
    HWY_ALIGN float in[hn::MaxLanes(DU())] = {};
    HWY_ALIGN uint16_t out[hn::MaxLanes(DU())];
    std::memcpy(in, src + i, (n - i) * sizeof(float));
    one(in, out);
    std::memcpy(dst + i, out, (n - i) * sizeof(uint16_t));
  }
}

}  // namespace

void F32ToF16RowImpl(uint16_t* dst, const float* src, size_t n) {
  ConvertRow(dst, src, n, [](VU bits) HWY_ATTR { return HalfBits(bits); });
}

void F32ToBf16RowImpl(uint16_t* dst, const float* src, size_t n) {
  ConvertRow(dst, src, n, [](VU bits) HWY_ATTR { return Bf16Bits(bits); });
}

}  // namespace HWY_NAMESPACE
}  // namespace kvlm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvlm {

HWY_EXPORT(F32ToF16RowImpl);
HWY_EXPORT(F32ToBf16RowImpl);

void f32_to_f16_row(uint16_t* dst, const float* src, size_t n) {
  HWY_DYNAMIC_DISPATCH(F32ToF16RowImpl)(dst, src, n);
}

void f32_to_bf16_row(uint16_t* dst, const float* src, size_t n) {
  HWY_DYNAMIC_DISPATCH(F32ToBf16RowImpl)(dst, src, n);
}

}  // namespace kvlm
#endif  // HWY_ONCE
