// Layer norm, vectorised over the row, compiled per Highway target and dispatched at run time.
// Each row is reduced on its own with a fixed order (vector partial sums, then the target's lane
// sum), so its result depends on that row only.
#include "ops/layernorm.h"

#include <cmath>

// Highway: simd_targets.h before any hwy header, then foreach_target.h re-includes this
// file once per target (HWY_TARGET_INCLUDE).
// clang-format off
#include "ops/simd_targets.h"
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/layernorm.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format on
#include "ops/simd_weights-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kvlm {
namespace HWY_NAMESPACE {

void LayernormImpl(float* out, const float* x, const float* weight, const float* bias, int n_rows,
                   int n_embd, float eps) {
  const DF df;
  const size_t N = hn::Lanes(df), C = n_embd;
  const size_t n_full = C / N * N, n_tail = C - n_full;
  const auto tail_mask = hn::FirstN(df, n_tail);
  for (int t = 0; t < n_rows; ++t) {
    const float* row = x + t * C;
    float* dst = out + t * C;
    hn::Vec<DF> sum = hn::Zero(df);
    for (size_t i = 0; i < n_full; i += N) sum = hn::Add(sum, hn::LoadU(df, row + i));
    if (n_tail) sum = hn::Add(sum, LoadWeightsN(df, row + n_full, n_tail));
    const float mean = hn::GetLane(hn::SumOfLanes(df, sum)) / n_embd;
    const auto vmean = hn::Set(df, mean);
    hn::Vec<DF> sq = hn::Zero(df);
    for (size_t i = 0; i < n_full; i += N) {
      const auto d = hn::Sub(hn::LoadU(df, row + i), vmean);
      sq = hn::MulAdd(d, d, sq);
    }
    if (n_tail) {
      const auto d =
          hn::IfThenElseZero(tail_mask, hn::Sub(LoadWeightsN(df, row + n_full, n_tail), vmean));
      sq = hn::MulAdd(d, d, sq);
    }
    const float rstd = 1.0f / std::sqrt(hn::GetLane(hn::SumOfLanes(df, sq)) / n_embd + eps);
    const auto vrstd = hn::Set(df, rstd);
    for (size_t i = 0; i < n_full; i += N) {
      const auto norm = hn::Mul(hn::Sub(hn::LoadU(df, row + i), vmean), vrstd);
      hn::StoreU(hn::MulAdd(norm, hn::LoadU(df, weight + i), hn::LoadU(df, bias + i)), df, dst + i);
    }
    if (n_tail) {
      const auto norm = hn::Mul(hn::Sub(LoadWeightsN(df, row + n_full, n_tail), vmean), vrstd);
      const auto y = hn::MulAdd(norm, LoadWeightsN(df, weight + n_full, n_tail),
                                LoadWeightsN(df, bias + n_full, n_tail));
      StorePartial(y, df, dst + n_full, n_tail);
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace kvlm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvlm {

HWY_EXPORT(LayernormImpl);

void layernorm_forward(float* out, const float* x, const float* weight, const float* bias,
                       int n_rows, int n_embd, float eps) {
  HWY_DYNAMIC_DISPATCH(LayernormImpl)(out, x, weight, bias, n_rows, n_embd, eps);
}

void layernorm_reference(float* out, const float* x, const float* weight, const float* bias,
                         int n_rows, int n_embd, float eps) {
  for (int t = 0; t < n_rows; ++t) {
    const float* row = x + static_cast<size_t>(t) * n_embd;
    float* dst = out + static_cast<size_t>(t) * n_embd;
    double sum = 0.0;
    for (int i = 0; i < n_embd; ++i) sum += row[i];
    const double mean = sum / n_embd;
    double sq = 0.0;
    for (int i = 0; i < n_embd; ++i) sq += (row[i] - mean) * (row[i] - mean);
    const double rstd = 1.0 / std::sqrt(sq / n_embd + eps);
    for (int i = 0; i < n_embd; ++i)
      dst[i] = static_cast<float>((row[i] - mean) * rstd * weight[i] + bias[i]);
  }
}

}  // namespace kvlm
#endif  // HWY_ONCE
