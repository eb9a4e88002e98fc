// Per-target helpers shared by the SIMD kernels: the fp32 vector type, weight vectors widened
// to fp32 from F32, F16 or BF16 storage, and zero-padded partial loads and stores for row and
// column tails. Include
// after hwy/highway.h (and foreach_target.h) in a file compiled per target.

// Per-target include guard: this file is included once per Highway target.
#if defined(KVLM_OPS_SIMD_WEIGHTS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KVLM_OPS_SIMD_WEIGHTS_INL_H_
#undef KVLM_OPS_SIMD_WEIGHTS_INL_H_
#else
#define KVLM_OPS_SIMD_WEIGHTS_INL_H_
#endif

#include <cstddef>
#include <cstring>

#include "hwy/highway.h"
#include "ops/dtype.h"

HWY_BEFORE_NAMESPACE();
namespace kvlm {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The fp32 vector the kernels work in: the widest this target has, kN lanes.
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
constexpr size_t kN = hn::MaxLanes(DF());

// Vector registers a kernel's register tiles may fill: 32 on AVX-512 and NEON, 16 on the others.
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_NEON
constexpr int kVecRegs = 32;
#else
constexpr int kVecRegs = 16;
#endif

// Widening loads of Lanes(d) weights starting at p.
template <class D>
HWY_INLINE hn::Vec<D> LoadWeights(D d, const float* HWY_RESTRICT p) {
  return hn::LoadU(d, p);
}
template <class D>
HWY_INLINE hn::Vec<D> LoadWeights(D d, const hwy::bfloat16_t* HWY_RESTRICT p) {
  const hn::Rebind<hwy::bfloat16_t, D> d16;
  return hn::PromoteTo(d, hn::LoadU(d16, p));  // bf16 is the top half of an fp32: a shift
}
template <class D>
HWY_INLINE hn::Vec<D> LoadWeights(D d, const hwy::float16_t* HWY_RESTRICT p) {
  const hn::Rebind<hwy::float16_t, D> d16;
  return hn::PromoteTo(d, hn::LoadU(d16, p));
}

// The first n (< Lanes(d)) elements at p, the other lanes zero. Copies through a buffer so it
// never reads past p + n.
template <class D, typename T>
HWY_INLINE hn::Vec<D> LoadWeightsN(D d, const T* HWY_RESTRICT p, size_t n) {
  T buffer[hn::MaxLanes(D())] = {};
  std::memcpy(buffer, p, n * sizeof(T));
  return LoadWeights(d, buffer);
}

// Stores the first n lanes of v at p, writing nothing past p + n.
template <class D>
HWY_INLINE void StorePartial(hn::Vec<D> v, D d, float* HWY_RESTRICT p, size_t n) {
  float buffer[hn::MaxLanes(D())];
  hn::StoreU(v, d, buffer);
  std::memcpy(p, buffer, n * sizeof(float));
}

// Stores sum (+ the n biases at bias, when bias is not null) as the n <= Lanes(d) outputs at o:
// the last step of every kernel's chains, bias added once after the reduction (matmul.h).
template <class D>
HWY_INLINE void StoreOutputs(D d, hn::Vec<D> sum, const float* bias, float* HWY_RESTRICT o,
                             size_t n) {
  constexpr size_t kLanes = hn::MaxLanes(D());
  if (bias) sum = hn::Add(sum, n == kLanes ? hn::LoadU(d, bias) : LoadWeightsN(d, bias, n));
  if (n == kLanes) {
    hn::StoreU(sum, d, o);
  } else {
    StorePartial(sum, d, o, n);
  }
}

// Calls f(typed pointer) with the weight data cast to its element type, so kernels are
// templates over the storage type and the dtype switch happens once per call.
template <class F>
HWY_INLINE void VisitWeights(const void* data, DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32:
      f(static_cast<const float*>(data));
      return;
    case DType::kF16:
      f(static_cast<const hwy::float16_t*>(data));
      return;
    case DType::kBF16:
      f(static_cast<const hwy::bfloat16_t*>(data));
      return;
    default:  // block-quantized types have kernels of their own (matmul_q8act.h)
      return;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace kvlm
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
