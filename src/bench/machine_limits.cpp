// Compiled per Highway target like the kernels, so the limits are measured with the same
// instructions the kernels use.
#include "bench/machine_limits.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <new>

#include "util/huge_pages.h"

// Highway: simd_targets.h before any hwy header, then foreach_target.h re-includes this
// file once per target (HWY_TARGET_INCLUDE).
// clang-format off
#include "ops/simd_targets.h"
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "bench/machine_limits.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace kvlm {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Sum of a[0, n) (n a multiple of 4 vectors): four accumulators so the adds never wait on
// each other and the loads are the only limit.
float SumArray(const float* HWY_RESTRICT a, size_t n) {
  const hn::ScalableTag<float> df;
  const size_t N = hn::Lanes(df);
  auto s0 = hn::Zero(df), s1 = s0, s2 = s0, s3 = s0;
  for (size_t i = 0; i + 4 * N <= n; i += 4 * N) {
    s0 = hn::Add(s0, hn::Load(df, a + i));
    s1 = hn::Add(s1, hn::Load(df, a + i + N));
    s2 = hn::Add(s2, hn::Load(df, a + i + 2 * N));
    s3 = hn::Add(s3, hn::Load(df, a + i + 3 * N));
  }
  return hn::GetLane(hn::SumOfLanes(df, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3))));
}

// Runs n_iter rounds of 12 independent fma chains (enough to cover latency x throughput on
// current cores); returns a value depending on all of them and the number of lanes.
float FmaChains(size_t n_iter, float seed, size_t* lanes) {
  const hn::ScalableTag<float> df;
  *lanes = hn::Lanes(df);
  const auto m = hn::Set(df, 0.999999f), a = hn::Set(df, 1e-7f);
  auto c0 = hn::Set(df, seed), c1 = hn::Add(c0, a), c2 = hn::Add(c1, a), c3 = hn::Add(c2, a);
  auto c4 = hn::Add(c3, a), c5 = hn::Add(c4, a), c6 = hn::Add(c5, a), c7 = hn::Add(c6, a);
  auto c8 = hn::Add(c7, a), c9 = hn::Add(c8, a), c10 = hn::Add(c9, a), c11 = hn::Add(c10, a);
  for (size_t i = 0; i < n_iter; ++i) {
    c0 = hn::MulAdd(c0, m, a);
    c1 = hn::MulAdd(c1, m, a);
    c2 = hn::MulAdd(c2, m, a);
    c3 = hn::MulAdd(c3, m, a);
    c4 = hn::MulAdd(c4, m, a);
    c5 = hn::MulAdd(c5, m, a);
    c6 = hn::MulAdd(c6, m, a);
    c7 = hn::MulAdd(c7, m, a);
    c8 = hn::MulAdd(c8, m, a);
    c9 = hn::MulAdd(c9, m, a);
    c10 = hn::MulAdd(c10, m, a);
    c11 = hn::MulAdd(c11, m, a);
  }
  const auto s = hn::Add(hn::Add(hn::Add(c0, c1), hn::Add(c2, c3)),
                         hn::Add(hn::Add(hn::Add(c4, c5), hn::Add(c6, c7)),
                                 hn::Add(hn::Add(c8, c9), hn::Add(c10, c11))));
  return hn::GetLane(hn::SumOfLanes(df, s));
}

}  // namespace HWY_NAMESPACE
}  // namespace kvlm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvlm {

HWY_EXPORT(SumArray);
HWY_EXPORT(FmaChains);

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

// In huge pages, as the weights and caches it stands beside (util/huge_pages.h).
struct ReadBandwidthProbe::Array {
  HugePageBuffer memory;
  size_t n = 0;  // floats, a multiple of 64 per thread
  float* data() const { return reinterpret_cast<float*>(memory.data()); }
};

Result<ReadBandwidthProbe> ReadBandwidthProbe::create(size_t n_bytes, const Parallel& par) {
  const int n_threads = std::max(par.n_threads, 1);
  // Whole blocks of 64 floats per thread: a multiple of 4 vectors on every target.
  const size_t block = 64, n = n_bytes / sizeof(float) / (block * n_threads) * block * n_threads;
  if (n == 0)
    return Status::error("bandwidth array of " + std::to_string(n_bytes) + " bytes is too small");
  auto array = std::make_shared<Array>();
  try {
    array->memory = HugePageBuffer(n * sizeof(float));
  } catch (const std::bad_alloc&) {
    return Status::error("cannot allocate the " + std::to_string(n_bytes) +
                         "-byte bandwidth array");
  }
  array->n = n;
  float* a = array->data();
  const size_t per_thread = n / n_threads;
  // Each thread writes its own part first, so its pages sit near it (first touch).
#pragma omp parallel for num_threads(n_threads) schedule(static)
  for (int t = 0; t < n_threads; ++t) std::fill(a + t * per_thread, a + (t + 1) * per_thread, 1.0f);
  ReadBandwidthProbe probe;
  probe.array_ = std::move(array);
  probe.n_threads_ = n_threads;
  return probe;
}

double ReadBandwidthProbe::measure(int repeats) const {
  const float* a = array_->data();
  const size_t n = array_->n, per_thread = n / n_threads_;
  double best = 0.0;
  volatile float sink = 0.0f;
  for (int rep = 0; rep < std::max(repeats, 1); ++rep) {
    float sum = 0.0f;
    const auto start = Clock::now();
#pragma omp parallel for num_threads(n_threads_) schedule(static) reduction(+ : sum)
    for (int t = 0; t < n_threads_; ++t)
      sum += HWY_DYNAMIC_DISPATCH(SumArray)(a + t * per_thread, per_thread);
    const double seconds = seconds_since(start);
    sink = sink + sum;
    best = std::max(best, static_cast<double>(n * sizeof(float)) / seconds);
  }
  return best;
}

double ReadBandwidthProbe::measure_sustained(double seconds) const {
  const float* a = array_->data();
  const size_t n = array_->n, per_thread = n / n_threads_;
  volatile float sink = 0.0f;
  size_t passes = 0;
  const auto start = Clock::now();
  double elapsed = 0.0;
  do {
    float sum = 0.0f;
#pragma omp parallel for num_threads(n_threads_) schedule(static) reduction(+ : sum)
    for (int t = 0; t < n_threads_; ++t)
      sum += HWY_DYNAMIC_DISPATCH(SumArray)(a + t * per_thread, per_thread);
    sink = sink + sum;
    ++passes;
    elapsed = seconds_since(start);
  } while (elapsed < seconds);
  return static_cast<double>(passes * n * sizeof(float)) / elapsed;
}

size_t ReadBandwidthProbe::bytes() const {
  return array_->n * sizeof(float);
}

Result<double> measure_read_bandwidth(size_t n_bytes, int repeats, const Parallel& par) {
  KVLM_ASSIGN_OR_RETURN(auto probe, ReadBandwidthProbe::create(n_bytes, par));
  return probe.measure(repeats);
}

double measure_fma_throughput(int repeats, double seconds_per_run, const Parallel& par) {
  const int n_threads = std::max(par.n_threads, 1);
  // Calibrate the iteration count on one thread.
  size_t lanes = 1, n_iter = 1 << 16;
  volatile float sink = 0.0f;
  for (;;) {
    const auto start = Clock::now();
    sink = sink + HWY_DYNAMIC_DISPATCH(FmaChains)(n_iter, 1.0f, &lanes);
    if (seconds_since(start) > seconds_per_run / 4 || n_iter > (size_t{1} << 40)) break;
    n_iter *= 2;
  }
  n_iter *= 4;
  double best = 0.0;
  for (int rep = 0; rep < std::max(repeats, 1); ++rep) {
    float sum = 0.0f;
    const auto start = Clock::now();
#pragma omp parallel for num_threads(n_threads) schedule(static) reduction(+ : sum)
    for (int t = 0; t < n_threads; ++t) {
      size_t l = 0;
      sum += HWY_DYNAMIC_DISPATCH(FmaChains)(n_iter, 1.0f + t, &l);
    }
    const double seconds = seconds_since(start);
    sink = sink + sum;
    best = std::max(best, 2.0 * 12 * lanes * n_iter * n_threads / seconds);
  }
  return best;
}

}  // namespace kvlm
#endif  // HWY_ONCE
