#include "ops/dispatch.h"

#include "ops/matmul_bf16dot.h"

// Highway: simd_targets.h before any hwy header, then foreach_target.h re-includes this
// file once per target (HWY_TARGET_INCLUDE).
// clang-format off
#include "ops/simd_targets.h"
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/dispatch.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace kvlm {
namespace HWY_NAMESPACE {

// The target this copy was compiled for: asking dispatch for it tells which copy runs.
int64_t CompiledTarget() {
  return HWY_TARGET;
}

}  // namespace HWY_NAMESPACE
}  // namespace kvlm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvlm {

HWY_EXPORT(CompiledTarget);

namespace {

bool fuses_multiply_add(int64_t target) {
#if HWY_ARCH_X86
  return target == HWY_AVX2 || target == HWY_AVX3 || target == HWY_AVX3_DL;
#elif HWY_ARCH_ARM_A64
  return target == HWY_NEON;
#else
  (void)target;
  return false;
#endif
}

}  // namespace

std::vector<SimdTarget> available_simd_targets() {
  std::vector<SimdTarget> out;
  for (int64_t t : hwy::SupportedAndGeneratedTargets())
    out.push_back({t, hwy::TargetName(t), fuses_multiply_add(t),
                   simd_target_is_avx512(t) && cpu_has_avx512_bf16()});
  return out;  // lower bits are better targets, so this is already best first
}

std::string active_simd_target() {
  return hwy::TargetName(active_simd_target_id());
}

int64_t active_simd_target_id() {
  return HWY_DYNAMIC_DISPATCH(CompiledTarget)();
}

bool simd_target_is_avx512(int64_t target) {
#if HWY_ARCH_X86
  return target == HWY_AVX3 || target == HWY_AVX3_DL
#ifdef HWY_AVX3_ZEN4
         || target == HWY_AVX3_ZEN4
#endif
#ifdef HWY_AVX3_SPR
         || target == HWY_AVX3_SPR
#endif
      ;
#else
  (void)target;
  return false;
#endif
}

void pin_simd_target(int64_t target) {
  hwy::SetSupportedTargetsForTest(target);
}

}  // namespace kvlm
#endif  // HWY_ONCE
