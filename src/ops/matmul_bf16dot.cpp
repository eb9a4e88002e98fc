// The AVX-512 BF16 matmul's run-time switch and its scalar reference (the kernels themselves
// are in matmul_bf16dot_x86.cpp). See matmul_bf16dot.h for the numerics both follow.
#include "ops/matmul_bf16dot.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "ops/dispatch.h"
#include "ops/dtype.h"
#include "ops/thread_team.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace kvlm {

namespace {

#if defined(__x86_64__) || defined(__i386__)
bool detect_avx512_bf16() {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool f = b & (1u << 16), bw = b & (1u << 30), vl = b & (1u << 31);
  if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
  const bool bf16 = a & (1u << 5);
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false;  // OSXSAVE
  unsigned lo, hi;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  const bool os_saves_zmm = (lo & 0xe6) == 0xe6;  // XMM, YMM, opmask, ZMM_Hi256, Hi16_ZMM
  return f && bw && vl && bf16 && os_saves_zmm;
}
#else
bool detect_avx512_bf16() {
  return false;
}
#endif

// The process-wide switch of set_bf16_dot_enabled, as pin_simd_target is for targets.
std::atomic<bool> g_bf16_dot_enabled{true};

}  // namespace

float flush_denormal(float f) {
  return std::fpclassify(f) == FP_SUBNORMAL ? std::copysign(0.0f, f) : f;
}

float bf16_unit_value(uint16_t h) {
  return flush_denormal(bf16_to_f32(h));
}

bool cpu_has_avx512_bf16() {
  static const bool has = detect_avx512_bf16();  // a fact about the machine, read once
  return has;
}

bool bf16_dot_active() {
  return g_bf16_dot_enabled.load(std::memory_order_relaxed) && cpu_has_avx512_bf16() &&
         simd_target_is_avx512(active_simd_target_id());
}

void set_bf16_dot_enabled(bool enabled) {
  g_bf16_dot_enabled.store(enabled, std::memory_order_relaxed);
}

uint16_t bf16_dot_round(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) == 0) return static_cast<uint16_t>((u >> 16) & 0x8000u);  // 0, denormal
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float bf16_dot2(float acc, uint16_t x0, uint16_t x1, uint16_t w0, uint16_t w1) {
  float t = flush_denormal(std::fma(bf16_unit_value(x1), bf16_unit_value(w1), flush_denormal(acc)));
  return flush_denormal(std::fma(bf16_unit_value(x0), bf16_unit_value(w0), t));
}

size_t bf16dot_head_strips_size(const WeightMatrix& w) {
  const size_t strips = (static_cast<size_t>(w.n_out) + 15) / 16;
  const size_t chunks = (static_cast<size_t>(w.n_in) + 31) / 32;
  return strips * 16 * chunks * 32;
}

void pack_bf16dot_head_strips(uint16_t* strips, const WeightMatrix& w, int n_threads) {
  const uint16_t* src = static_cast<const uint16_t*>(w.data);
  const size_t I = w.n_in, O = w.n_out, C = (I + 31) / 32;
  const int64_t n_strips = static_cast<int64_t>((O + 15) / 16);
  parallel_for(n_threads, int64_t{n_strips}, [&](int64_t s) {
    uint16_t* dst = strips + static_cast<size_t>(s) * 16 * C * 32;
    for (size_t l = 0; l < 16; ++l)
      for (size_t c = 0; c < C; ++c, dst += 32)
        for (size_t n = 0; n < 16; ++n)
          for (size_t e = 0; e < 2; ++e) {
            const size_t o = static_cast<size_t>(s) * 16 + n, i = 32 * c + 2 * l + e;
            dst[2 * n + e] = o < O && i < I ? src[o * I + i] : uint16_t{0};
          }
  });
}

void matmul_bf16dot_reference(float* out, const float* x, const WeightMatrix& w, const float* bias,
                              int n_rows) {
  const uint16_t* wb = static_cast<const uint16_t*>(w.data);
  const int I = w.n_in, O = w.n_out;
  auto xb = [&](int r, int i) -> uint16_t {
    return i < I ? bf16_dot_round(x[static_cast<size_t>(r) * I + i]) : 0;
  };
  auto wat = [&](int i, int o) -> uint16_t {
    if (i >= I) return 0;
    return w.layout == WeightLayout::kInOut ? wb[static_cast<size_t>(i) * O + o]
                                            : wb[static_cast<size_t>(o) * I + i];
  };
  for (int r = 0; r < n_rows; ++r)
    for (int o = 0; o < O; ++o) {
      float sum;
      if (w.layout == WeightLayout::kInOut) {
        sum = 0.0f;
        for (int i = 0; i < I; i += 2)
          sum = bf16_dot2(sum, xb(r, i), xb(r, i + 1), wat(i, o), wat(i + 1, o));
      } else {
        float s[16] = {};
        for (int c = 0; c < I; c += 32)
          for (int l = 0; l < 16; ++l) {
            const int i = c + 2 * l;
            s[l] = bf16_dot2(s[l], xb(r, i), xb(r, i + 1), wat(i, o), wat(i + 1, o));
          }
        float t[8], u[4];
        for (int l = 0; l < 8; ++l) t[l] = s[l] + s[l + 8];
        for (int l = 0; l < 4; ++l) u[l] = t[l] + t[l + 4];
        sum = (u[0] + u[2]) + (u[1] + u[3]);
      }
      out[static_cast<size_t>(r) * O + o] = bias ? sum + bias[o] : sum;
    }
}

}  // namespace kvlm
