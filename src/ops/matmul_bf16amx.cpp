// The AMX BF16 matmul's detection, run-time switch and scalar reference (the kernels are in
// matmul_bf16amx_x86.cpp). See matmul_bf16amx.h for the numerics both follow.
#include "ops/matmul_bf16amx.h"

#include <algorithm>
#include <atomic>

#include "ops/dtype.h"
#include "ops/matmul_bf16dot.h"
#include "ops/thread_team.h"

#if defined(__linux__) && defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace kvlm {

namespace {

#if defined(__linux__) && defined(__x86_64__)
bool detect_amx_bf16() {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool amx_bf16 = d & (1u << 22), amx_tile = d & (1u << 24);
  if (!amx_bf16 || !amx_tile) return false;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false;  // OSXSAVE
  unsigned lo, hi;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & (3u << 17)) != (3u << 17)) return false;  // XTILECFG, XTILEDATA enabled by the OS
  // Linux hands out the 8 KB tile state only on request, once for the whole process.
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}
#else
bool detect_amx_bf16() {
  return false;
}
#endif

std::atomic<bool> g_bf16_amx_enabled{true};

}  // namespace

bool cpu_has_amx_bf16() {
  static const bool has = detect_amx_bf16();  // a fact about the machine, asked once
  return has;
}

bool bf16_amx_active() {
  return g_bf16_amx_enabled.load(std::memory_order_relaxed) && bf16_dot_active() &&
         cpu_has_amx_bf16();
}

void set_bf16_amx_enabled(bool enabled) {
  g_bf16_amx_enabled.store(enabled, std::memory_order_relaxed);
}

size_t bf16amx_tiles_size(const WeightMatrix& w) {
  const size_t strips = (static_cast<size_t>(w.n_out) + 15) / 16;
  const size_t chunks = (static_cast<size_t>(w.n_in) + 31) / 32;
  return strips * chunks * 512;
}

void pack_bf16amx_tiles(uint16_t* tiles, const WeightMatrix& w, int n_threads) {
  const uint16_t* wb = static_cast<const uint16_t*>(w.data);
  const size_t I = w.n_in, O = w.n_out;
  const int64_t strips = static_cast<int64_t>((O + 15) / 16);
  const size_t chunks = (I + 31) / 32;
  parallel_for(n_threads, int64_t{strips}, [&](int64_t s) {
    uint16_t* dst = tiles + static_cast<size_t>(s) * chunks * 512;
    for (size_t k = 0; k < chunks * 32; ++k)  // weight row k: element (k / 2) * 32 + 2n + k % 2
      for (size_t n = 0; n < 16; ++n) {
        const size_t col = static_cast<size_t>(s) * 16 + n;
        dst[(k / 2) * 32 + 2 * n + k % 2] = k < I && col < O ? wb[k * O + col] : 0;
      }
  });
}

void matmul_bf16amx_reference(float* out, const float* x, const WeightMatrix& w, const float* bias,
                              int n_rows) {
  const uint16_t* wb = static_cast<const uint16_t*>(w.data);
  const int I = w.n_in, O = w.n_out;
  for (int r = 0; r < n_rows; ++r)
    for (int o = 0; o < O; ++o) {
      float c = 0.0f;
      for (int k0 = 0; k0 < I; k0 += 32) {
        // 32 products of 8-bit significands: exact in double while their exponents stay
        // within about 30 binary orders of each other (the "ordinary ranges" of the header).
        double chunk = 0.0;
        for (int i = k0; i < std::min(I, k0 + 32); ++i) {
          const uint16_t wv = w.layout == WeightLayout::kInOut ? wb[static_cast<size_t>(i) * O + o]
                                                               : wb[static_cast<size_t>(o) * I + i];
          chunk += static_cast<double>(
                       bf16_unit_value(bf16_dot_round(x[static_cast<size_t>(r) * I + i]))) *
                   bf16_unit_value(wv);
        }
        c = flush_denormal(c + flush_denormal(static_cast<float>(chunk)));
      }
      out[static_cast<size_t>(r) * O + o] = bias ? c + bias[o] : c;
    }
}

}  // namespace kvlm
