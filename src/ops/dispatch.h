// Run-time choice of the SIMD instruction set the kernels use. By default every kernel runs
// the best target this CPU supports among those compiled in; tests and benchmarks may pin one
// to check each target against the scalar reference.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvlm {

struct SimdTarget {
  int64_t id = 0;    // Highway's target bit (HWY_AVX2, ...)
  std::string name;  // "AVX2", "AVX3", "NEON", "EMU128", ...
  // Whether the kernels' multiply-add rounds once (AVX2, AVX-512, Arm64 NEON) or rounds the
  // product and the sum separately (SSSE3, SSE4, EMU128): it decides the kernels' exact bits.
  bool fused_multiply_add = false;
  // Whether BF16-weight matmuls use vdpbf16ps on this target and CPU (ops/matmul_bf16dot.h):
  // an AVX-512 target on a CPU with AVX512_BF16. It decides their exact bits.
  bool bf16_dot = false;
};

// Targets compiled into the kernels that this CPU can run, best first.
std::vector<SimdTarget> available_simd_targets();

// Name of the target the kernels dispatch to now.
std::string active_simd_target();

// Highway's bit of that target (HWY_AVX3, ...).
int64_t active_simd_target_id();

// Whether `target` is one of Highway's AVX-512 targets.
bool simd_target_is_avx512(int64_t target);

// Makes every kernel run `target` (one of available_simd_targets()); 0 restores the default
// choice. Not thread-safe: call it while no kernel is running.
void pin_simd_target(int64_t target);

}  // namespace kvlm
