// Attention of one query row over the cache, vectorised over head_dim, compiled per Highway
// target and dispatched at run time. Per head: scores q.k (four positions at a time, each a
// fixed reduction over D), softmax with a vectorised exp, then the weighted sum of values as one
// fma chain per element in position order. Every step depends only on the positions attended, never
// on how the cache splits them into runs or on which other rows are being computed, so prefill and
// decode give the same bits.
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

// q.k for four positions at once, q loaded once per vector for all four. Per position: one fma
// chain over the elements in order (full vectors, then the zero-padded partial one); then a
// transposing lane sum: within each 128-bit block lanes (0 + 2) and (1 + 3), then those two,
// then the blocks in order. Each lane of every step holds one position's own partial sums, so
// a score is the same bits whichever positions share its group (or pad it): a function of D
// and the target only.
HWY_INLINE void Dot4(float* HWY_RESTRICT out, const float* HWY_RESTRICT q,
                     const float* const* HWY_RESTRICT k, size_t D) {
  const DF df;
  VF a0 = hn::Zero(df), a1 = a0, a2 = a0, a3 = a0;
  size_t d = 0;
  for (; d + kN <= D; d += kN) {
    const VF qv = hn::LoadU(df, q + d);
    a0 = hn::MulAdd(qv, hn::LoadU(df, k[0] + d), a0);
    a1 = hn::MulAdd(qv, hn::LoadU(df, k[1] + d), a1);
    a2 = hn::MulAdd(qv, hn::LoadU(df, k[2] + d), a2);
    a3 = hn::MulAdd(qv, hn::LoadU(df, k[3] + d), a3);
  }
  if (d < D) {
    const size_t n = D - d;
    const VF qv = LoadWeightsN(df, q + d, n);
    a0 = hn::MulAdd(qv, LoadWeightsN(df, k[0] + d, n), a0);
    a1 = hn::MulAdd(qv, LoadWeightsN(df, k[1] + d, n), a1);
    a2 = hn::MulAdd(qv, LoadWeightsN(df, k[2] + d, n), a2);
    a3 = hn::MulAdd(qv, LoadWeightsN(df, k[3] + d, n), a3);
  }
#if HWY_TARGET == HWY_SCALAR
  // One lane: each chain is already its position's whole sum.
  out[0] = hn::GetLane(a0);
  out[1] = hn::GetLane(a1);
  out[2] = hn::GetLane(a2);
  out[3] = hn::GetLane(a3);
}
#else
  // Per block: [x0 + x2, y0 + y2, x1 + x3, y1 + y3] for positions x, y.
  const VF p01 = hn::Add(hn::InterleaveLower(df, a0, a1), hn::InterleaveUpper(df, a0, a1));
  const VF p23 = hn::Add(hn::InterleaveLower(df, a2, a3), hn::InterleaveUpper(df, a2, a3));
  const hn::Repartition<uint64_t, DF> du64;
  const auto b01 = hn::BitCast(du64, p01), b23 = hn::BitCast(du64, p23);
  // Per block: the four positions' block sums.
  const VF t = hn::Add(hn::BitCast(df, hn::InterleaveLower(du64, b01, b23)),
                       hn::BitCast(df, hn::InterleaveUpper(du64, b01, b23)));
  HWY_ALIGN float blocks[kN];
  hn::Store(t, df, blocks);
  const hn::Full128<float> d4;
  auto sum = hn::Load(d4, blocks);
  for (size_t b = 4; b < kN; b += 4) sum = hn::Add(sum, hn::Load(d4, blocks + b));
  hn::StoreU(sum, d4, out);
}
#endif

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
    // Scores q.k / sqrt(D), four positions at a time across run boundaries, and their
    // maximum for a stable softmax.
    float max_score = -INFINITY;
    size_t p = 0;
    const float* k_rows[4];
    int n_group = 0;
    auto score_group = [&]() HWY_ATTR {
      for (int j = n_group; j < 4; ++j) k_rows[j] = k_rows[n_group - 1];  // padding, discarded
      float dots[4];
      Dot4(dots, qh, k_rows, D);
      for (int j = 0; j < n_group; ++j, ++p) {
        scratch[p] = dots[j] * scale;
        max_score = std::max(max_score, scratch[p]);
      }
      n_group = 0;
    };
    for (size_t r = 0; r < n_runs; ++r) {
      const float* k = runs[r].k + kv_offset;
      const int n = runs[r].n_positions;
      for (int j = 0; j < n; ++j) {
        if (j + kPrefetchAhead < n) PrefetchRow(k + (j + kPrefetchAhead) * kv_dim, D);
        k_rows[n_group++] = k + j * kv_dim;
        if (n_group == 4) score_group();
      }
    }
    if (n_group > 0) score_group();
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
