// The instruction sets of the 8-bit-activation x86 code (matmul_q8act_x86.cpp, the kernels;
// q8act_quantize_x86.cpp, the activation quantizers). Highway 1.0 (Debian 12) has no target with
// VNNI, so these functions carry their instruction set in a target attribute and run only where
// q8act::cpu_has_* (matmul_q8act_kernels.h) says so. Include only inside
// `#if KVLM_Q8ACT_X86`.
#pragma once

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KVLM_Q8ACT_X86 1
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
#else
#define KVLM_Q8ACT_X86 0
#endif
