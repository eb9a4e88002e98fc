// Attention of one query row over the cache, vectorised over head_dim, compiled per Highway
// target and dispatched at run time. Per head: scores q.k (a fixed vector reduction over D),
// softmax with a vectorised exp, then the weighted sum of values as one fma chain per element
// in position order. Every step depends only on the positions attended, never on how the
// cache splits them into runs or on which other rows are being computed, so prefill and decode
// give the same bits.
#include "ops/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

// Highway: simd_targets.h before any hwy header, then foreach_target.h re-includes this
// file once per target (HWY_TARGET_INCLUDE).
// clang-format off
#include "ops/simd_targets.h"
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/attention.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format on
#include "hwy/contrib/math/math-inl.h"
#include "ops/simd_weights-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kvlm {
namespace HWY_NAMESPACE {
namespace {

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
constexpr size_t kN = hn::MaxLanes(DF());

// q.k over n elements: two accumulator chains over alternate vectors, the partial last vector
// zero-padded, then the target's fixed lane sum.
HWY_INLINE float Dot(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b, size_t n) {
  const DF df;
  VF s0 = hn::Zero(df), s1 = hn::Zero(df);
  size_t i = 0;
  for (; i + 2 * kN <= n; i += 2 * kN) {
    s0 = hn::MulAdd(hn::LoadU(df, a + i), hn::LoadU(df, b + i), s0);
    s1 = hn::MulAdd(hn::LoadU(df, a + i + kN), hn::LoadU(df, b + i + kN), s1);
  }
  if (i + kN <= n) {
    s0 = hn::MulAdd(hn::LoadU(df, a + i), hn::LoadU(df, b + i), s0);
    i += kN;
  }
  if (i < n) s1 = hn::MulAdd(LoadWeightsN(df, a + i, n - i), LoadWeightsN(df, b + i, n - i), s1);
  return hn::GetLane(hn::SumOfLanes(df, hn::Add(s0, s1)));
}

// s[p] = exp(s[p] - max) for p < n; returns their sum (vector partial sums in order, then
// the target's lane sum). The partial last vector is padded with -inf, whose exp is 0.
HWY_INLINE float ExpAndSum(float* HWY_RESTRICT s, size_t n, float max_score) {
  const DF df;
  const VF vmax = hn::Set(df, max_score);
  VF sum = hn::Zero(df);
  size_t p = 0;
  for (; p + kN <= n; p += kN) {
    const VF e = hn::Exp(df, hn::Sub(hn::LoadU(df, s + p), vmax));
    hn::StoreU(e, df, s + p);
    sum = hn::Add(sum, e);
  }
  if (p < n) {
    float buffer[kN];
    for (size_t k = 0; k < kN; ++k) buffer[k] = p + k < n ? s[p + k] : -INFINITY;
    const VF e = hn::Exp(df, hn::Sub(hn::LoadU(df, buffer), vmax));
    StorePartial(e, df, s + p, n - p);
    sum = hn::Add(sum, e);
  }
  return hn::GetLane(hn::SumOfLanes(df, sum));
}

// o[d] = fma(w, v[d], o[d]) for d < n (full vectors, then the partial one through buffers).
HWY_INLINE void AccumulateValue(float* HWY_RESTRICT o, const float* HWY_RESTRICT v, float w,
                                size_t n) {
  const DF df;
  const VF vw = hn::Set(df, w);
  size_t d = 0;
  for (; d + kN <= n; d += kN)
    hn::StoreU(hn::MulAdd(vw, hn::LoadU(df, v + d), hn::LoadU(df, o + d)), df, o + d);
  if (d < n)
    StorePartial(hn::MulAdd(vw, LoadWeightsN(df, v + d, n - d), LoadWeightsN(df, o + d, n - d)), df,
                 o + d, n - d);
}

// Four positions per pass over o: the four fmas into each element stay in position order.
HWY_INLINE void AccumulateValues4(float* HWY_RESTRICT o, const float* HWY_RESTRICT v,
                                  size_t v_stride, const float* HWY_RESTRICT w, size_t n) {
  const DF df;
  const VF w0 = hn::Set(df, w[0]), w1 = hn::Set(df, w[1]), w2 = hn::Set(df, w[2]),
           w3 = hn::Set(df, w[3]);
  size_t d = 0;
  for (; d + kN <= n; d += kN) {
    VF acc = hn::LoadU(df, o + d);
    acc = hn::MulAdd(w0, hn::LoadU(df, v + d), acc);
    acc = hn::MulAdd(w1, hn::LoadU(df, v + v_stride + d), acc);
    acc = hn::MulAdd(w2, hn::LoadU(df, v + 2 * v_stride + d), acc);
    acc = hn::MulAdd(w3, hn::LoadU(df, v + 3 * v_stride + d), acc);
    hn::StoreU(acc, df, o + d);
  }
  if (d < n)
    for (int k = 0; k < 4; ++k) AccumulateValue(o + d, v + k * v_stride + d, w[k], n - d);
}

}  // namespace

void AttentionImpl(float* out, const float* q, const KvRun* runs, size_t n_runs, float* scratch,
                   int n_head, int n_kv_head, int head_dim, int head_begin, int head_end) {
  const DF df;
  const size_t D = head_dim, kv_dim = static_cast<size_t>(n_kv_head) * head_dim;
  const int group = n_head / n_kv_head;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  for (int h = head_begin; h < head_end; ++h) {
    const float* qh = q + h * D;
    const size_t kv_offset = static_cast<size_t>(h / group) * D;
    // Scores q.k / sqrt(D), and their maximum for a stable softmax.
    float max_score = -INFINITY;
    size_t p = 0;
    for (size_t r = 0; r < n_runs; ++r) {
      const float* k = runs[r].k + kv_offset;
      for (int j = 0; j < runs[r].n_positions; ++j, ++p) {
        scratch[p] = Dot(qh, k + j * kv_dim, D) * scale;
        max_score = std::max(max_score, scratch[p]);
      }
    }
    const size_t n_positions = p;
    const float sum = ExpAndSum(scratch, n_positions, max_score);
    // Weighted sum of values, positions in order.
    float* oh = out + h * D;
    std::fill(oh, oh + D, 0.0f);
    p = 0;
    for (size_t r = 0; r < n_runs; ++r) {
      const float* v = runs[r].v + kv_offset;
      const size_t n = runs[r].n_positions;
      size_t j = 0;
      for (; j + 4 <= n; j += 4) AccumulateValues4(oh, v + j * kv_dim, kv_dim, scratch + p + j, D);
      for (; j < n; ++j) AccumulateValue(oh, v + j * kv_dim, scratch[p + j], D);
      p += n;
    }
    const VF inv_sum = hn::Set(df, 1.0f / sum);
    size_t d = 0;
    for (; d + kN <= D; d += kN) hn::StoreU(hn::Mul(hn::LoadU(df, oh + d), inv_sum), df, oh + d);
    if (d < D) StorePartial(hn::Mul(LoadWeightsN(df, oh + d, D - d), inv_sum), df, oh + d, D - d);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace kvlm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvlm {

HWY_EXPORT(AttentionImpl);

void attention_forward(float* out, const float* q, std::span<const KvRun> runs, float* scratch,
                       int n_head, int n_kv_head, int head_dim) {
  HWY_DYNAMIC_DISPATCH(AttentionImpl)
  (out, q, runs.data(), runs.size(), scratch, n_head, n_kv_head, head_dim, 0, n_head);
}

void attention_heads_forward(float* out, const float* q, std::span<const KvRun> runs,
                             float* scratch, int n_head, int n_kv_head, int head_dim,
                             int head_begin, int head_end) {
  HWY_DYNAMIC_DISPATCH(AttentionImpl)
  (out, q, runs.data(), runs.size(), scratch, n_head, n_kv_head, head_dim, std::max(head_begin, 0),
   std::min(head_end, n_head));
}

void attention_reference(float* out, const float* q, std::span<const KvRun> runs, int n_head,
                         int n_kv_head, int head_dim) {
  const size_t kv_dim = static_cast<size_t>(n_kv_head) * head_dim;
  const int group = n_head / n_kv_head;
  for (int h = 0; h < n_head; ++h) {
    const float* qh = q + static_cast<size_t>(h) * head_dim;
    const size_t kv_offset = static_cast<size_t>(h / group) * head_dim;
    std::vector<double> scores;
    for (const KvRun& run : runs)
      for (int j = 0; j < run.n_positions; ++j) {
        double dot = 0.0;
        for (int d = 0; d < head_dim; ++d) dot += double{qh[d]} * run.k[j * kv_dim + kv_offset + d];
        scores.push_back(dot / std::sqrt(static_cast<double>(head_dim)));
      }
    double max_score = -INFINITY, sum = 0.0;
    for (double s : scores) max_score = std::max(max_score, s);
    for (double& s : scores) sum += (s = std::exp(s - max_score));
    std::vector<double> acc(head_dim, 0.0);
    size_t p = 0;
    for (const KvRun& run : runs)
      for (int j = 0; j < run.n_positions; ++j, ++p)
        for (int d = 0; d < head_dim; ++d) acc[d] += scores[p] * run.v[j * kv_dim + kv_offset + d];
    for (int d = 0; d < head_dim; ++d)
      out[static_cast<size_t>(h) * head_dim + d] = static_cast<float>(acc[d] / sum);
  }
}

}  // namespace kvlm
#endif  // HWY_ONCE
