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
#include "hwy/cache_control.h"
#include "hwy/contrib/math/math-inl.h"
#include "ops/simd_weights-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kvlm {
namespace HWY_NAMESPACE {
namespace {

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
constexpr size_t kN = hn::MaxLanes(DF());

// q.k over n elements: four accumulator chains over consecutive vectors (short fma latency
// chains), the last full vectors and the zero-padded partial one in fixed slots, then
// (s0 + s1) + (s2 + s3) and the target's fixed lane sum. A function of n and the target only.
HWY_INLINE float Dot(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b, size_t n) {
  const DF df;
  VF s[4] = {hn::Zero(df), hn::Zero(df), hn::Zero(df), hn::Zero(df)};
  size_t i = 0;
  for (; i + 4 * kN <= n; i += 4 * kN)
    for (int k = 0; k < 4; ++k)
      s[k] = hn::MulAdd(hn::LoadU(df, a + i + k * kN), hn::LoadU(df, b + i + k * kN), s[k]);
  int k = 0;
  for (; i + kN <= n; i += kN, ++k)
    s[k] = hn::MulAdd(hn::LoadU(df, a + i), hn::LoadU(df, b + i), s[k]);
  if (i < n)
    s[3] = hn::MulAdd(LoadWeightsN(df, a + i, n - i), LoadWeightsN(df, b + i, n - i), s[3]);
  return hn::GetLane(hn::SumOfLanes(df, hn::Add(hn::Add(s[0], s[1]), hn::Add(s[2], s[3]))));
}

// A head's part of a K or V row is a few cache lines, and rows sit kv_dim floats apart: a new
// 4 KB page every position or two, where the hardware prefetchers stop. So each row is fetched
// kPrefetchAhead positions before its use, which hides the L2/L3 latency (measured: decode
// attention over 900 positions was bound by it). Prefetches never change a result.
constexpr int kPrefetchAhead = 6;
HWY_INLINE void PrefetchRow(const float* row, size_t n) {
  for (size_t i = 0; i < n; i += 64 / sizeof(float)) hwy::Prefetch(row + i);
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

// o[0, n_cols) = sum over positions p in order of w[p] * v_p[0, n_cols), one fma chain per
// element starting at zero, in NV registers (n_cols <= NV * kN; kPartial: the last vector is
// n_cols % kN wide and goes through buffers). `v` points at column 0 of position 0's row.
template <int NV, bool kPartial>
HWY_INLINE void WeightedValues(float* HWY_RESTRICT o, const KvRun* runs, size_t n_runs,
                               size_t kv_dim, size_t column, const float* HWY_RESTRICT w,
                               size_t n_cols) {
  const DF df;
  VF acc[NV];
  for (int v = 0; v < NV; ++v) acc[v] = hn::Zero(df);
  const size_t tail = n_cols - (NV - 1) * kN;
  for (size_t r = 0; r < n_runs; ++r) {
    const float* row = runs[r].v + column;
    const int n = runs[r].n_positions;
    for (int j = 0; j < n; ++j, row += kv_dim, ++w) {
      if (j + kPrefetchAhead < n) PrefetchRow(row + kPrefetchAhead * kv_dim, n_cols);
      const VF vw = hn::Set(df, *w);
      for (int v = 0; v < NV; ++v) {
        const VF x = kPartial && v == NV - 1 ? LoadWeightsN(df, row + v * kN, tail)
                                             : hn::LoadU(df, row + v * kN);
        acc[v] = hn::MulAdd(vw, x, acc[v]);
      }
    }
  }
  for (int v = 0; v < NV; ++v) {
    if (kPartial && v == NV - 1) {
      StorePartial(acc[v], df, o + v * kN, tail);
    } else {
      hn::StoreU(acc[v], df, o + v * kN);
    }
  }
}

constexpr int kValueVecs = 8;  // vectors of one head's output kept in registers at a time

// One head's weighted sum of values over columns [0, D), kValueVecs vectors at a time.
void WeightedValuesHead(float* o, const KvRun* runs, size_t n_runs, size_t kv_dim, size_t kv_offset,
                        const float* w, size_t D) {
  for (size_t d0 = 0; d0 < D; d0 += kValueVecs * kN) {
    const size_t n = std::min(kValueVecs * kN, D - d0);
    const size_t nv = (n + kN - 1) / kN;
    const bool partial = n % kN != 0;
#define KVLM_WEIGHTED_VALUES(NV)                                                     \
  case NV:                                                                           \
    if (partial) {                                                                   \
      WeightedValues<NV, true>(o + d0, runs, n_runs, kv_dim, kv_offset + d0, w, n);  \
    } else {                                                                         \
      WeightedValues<NV, false>(o + d0, runs, n_runs, kv_dim, kv_offset + d0, w, n); \
    }                                                                                \
    break;
    switch (nv) {
      KVLM_WEIGHTED_VALUES(1)
      KVLM_WEIGHTED_VALUES(2)
      KVLM_WEIGHTED_VALUES(3)
      KVLM_WEIGHTED_VALUES(4)
      KVLM_WEIGHTED_VALUES(5)
      KVLM_WEIGHTED_VALUES(6)
      KVLM_WEIGHTED_VALUES(7)
      KVLM_WEIGHTED_VALUES(8)
    }
#undef KVLM_WEIGHTED_VALUES
  }
}
static_assert(kValueVecs == 8, "WeightedValuesHead's switch covers 1..8 vectors");

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
      const int n = runs[r].n_positions;
      for (int j = 0; j < n; ++j, ++p) {
        if (j + kPrefetchAhead < n) PrefetchRow(k + (j + kPrefetchAhead) * kv_dim, D);
        scratch[p] = Dot(qh, k + j * kv_dim, D) * scale;
        max_score = std::max(max_score, scratch[p]);
      }
    }
    const size_t n_positions = p;
    const float sum = ExpAndSum(scratch, n_positions, max_score);
    // Weighted sum of values, positions in order.
    float* oh = out + h * D;
    WeightedValuesHead(oh, runs, n_runs, kv_dim, kv_offset, scratch, D);
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
