// One decode row's attention split by positions over threads (attention_split.h): every head
// at once over a part of the row's positions, so each of the part's cached rows is read as one
// stretch (keys, then values) and the threads read disjoint stretches of the cache. The
// arithmetic per (head, position) is attention.cpp's, from the same attention_parts-inl.h.
#include "ops/attention_split.h"

#include <algorithm>
#include <cmath>

// Highway: simd_targets.h before any hwy header, then foreach_target.h re-includes this
// file once per target (HWY_TARGET_INCLUDE).
// clang-format off
#include "ops/simd_targets.h"
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/attention_split.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format on
#include "ops/attention_parts-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kvlm {
namespace HWY_NAMESPACE {
namespace {

// Rows of 16-bit caches are fetched this many positions ahead, keys and values in the scores
// pass (the values pass then finds its rows in L2); fp32 rows are not (FetchAhead).
constexpr int kSplitAhead = 8;

template <class R>
void ScoresPart(float* HWY_RESTRICT scores, size_t stride, float* HWY_RESTRICT max_out,
                const float* HWY_RESTRICT q, const KvRun* runs, size_t n_runs, size_t row_bytes,
                int n_head, int group, size_t D, const R& rd) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const size_t span_bytes = static_cast<size_t>(n_head / group) * D * R::kBytes;
  ScoreHeadsTogether(scores, stride, max_out, q, runs, n_runs, row_bytes, 0, n_head, group, D,
                     scale, 0, span_bytes, FetchAhead<R>(kSplitAhead), rd);
}

template <class R>
void ValuesPart(float* HWY_RESTRICT partial, float* HWY_RESTRICT sums, float* HWY_RESTRICT scores,
                size_t stride, const float* HWY_RESTRICT max_score, const KvRun* runs,
                size_t n_runs, size_t row_bytes, int n_head, int group, size_t D, const R& rd) {
  const DF df;
  size_t n_pos = 0;
  for (size_t r = 0; r < n_runs; ++r) n_pos += runs[r].n_positions;
  const size_t n_chunks = (n_pos + kChunk - 1) / kChunk;
  for (int h = 0; h < n_head; ++h)
    for (size_t c = 0; c < n_chunks; ++c)
      sums[c * n_head + h] = ExpAndSum(scores + h * stride + c * kChunk,
                                       std::min(kChunk, n_pos - c * kChunk), max_score[h]);
  for (size_t i = 0; i < n_chunks * n_head * D; i += kN) hn::StoreU(hn::Zero(df), df, partial + i);
  auto chunk_acc = [&](size_t p) { return partial + (p / kChunk) * n_head * D; };
  AddValueRuns(runs, n_runs, row_bytes, scores, stride, 0, n_head, group, D, 0, 0, 0, rd, chunk_acc,
               [] {});
}

}  // namespace

// Readers with no per-head state (not fp8's per-head scale), heads of whole vectors (q8_0: so
// no vector straddles a block, and its scales go on a block's partial sums as AttendHead's do).
bool SplitSupportedImpl(KvDtype dtype, int head_dim) {
  const bool type = dtype == KvDtype::f32 || dtype == KvDtype::f16 || dtype == KvDtype::bf16 ||
                    dtype == KvDtype::q8_0;
  return type && head_dim % kN == 0;
}

#define KVLM_SPLIT_DISPATCH(CALL)                   \
  switch (format.dtype) {                           \
    case KvDtype::f32:                              \
      return CALL(F32Reader{});                     \
    case KvDtype::f16:                              \
      return CALL(Half16Reader<hwy::float16_t>{});  \
    case KvDtype::bf16:                             \
      return CALL(Half16Reader<hwy::bfloat16_t>{}); \
    case KvDtype::q8_0:                             \
      return CALL(Q8Reader{kv_dim});                \
    default:                                        \
      return;                                       \
  }

void ScoresPartImpl(float* scores, size_t stride, float* max_out, const float* q, const KvRun* runs,
                    size_t n_runs, const KvRowFormat& format, int n_head, int n_kv_head,
                    int head_dim) {
  const size_t kv_dim = static_cast<size_t>(n_kv_head) * head_dim;
#define KVLM_SCORES(READER)                                                      \
  ScoresPart(scores, stride, max_out, q, runs, n_runs, format.row_bytes, n_head, \
             n_head / n_kv_head, head_dim, READER)
  KVLM_SPLIT_DISPATCH(KVLM_SCORES)
#undef KVLM_SCORES
}

void ValuesPartImpl(float* partial, float* sums, float* scores, size_t stride,
                    const float* max_score, const KvRun* runs, size_t n_runs,
                    const KvRowFormat& format, int n_head, int n_kv_head, int head_dim) {
  const size_t kv_dim = static_cast<size_t>(n_kv_head) * head_dim;
#define KVLM_VALUES(READER)                                                                    \
  ValuesPart(partial, sums, scores, stride, max_score, runs, n_runs, format.row_bytes, n_head, \
             n_head / n_kv_head, head_dim, READER)
  KVLM_SPLIT_DISPATCH(KVLM_VALUES)
#undef KVLM_VALUES
}
#undef KVLM_SPLIT_DISPATCH

// attention_combine_chunks: each output's sum over the chunks in order, vectors across the head's
// dimensions (each lane the scalar chain of its output: the same bits). As a scalar loop its 29
// dependent adds per output at 900 positions took 9-12 us of a layer's 135-215 (GPT-2, 2
// threads).
void CombineChunksImpl(float* out, const float* partial, const float* chunk_sums, int n_chunks,
                       int n_head, int head_dim, int head_begin, int head_end) {
  const DF df;
  const size_t D = head_dim, H = n_head;
  for (size_t h = head_begin; h < static_cast<size_t>(head_end); ++h) {
    float sum = 0.0f;
    for (int c = 0; c < n_chunks; ++c) sum += chunk_sums[c * H + h];
    const VF inv_sum = hn::Set(df, 1.0f / sum);
    for (size_t d = 0; d < D; d += kN) {
      VF o = hn::Zero(df);
      for (int c = 0; c < n_chunks; ++c)
        o = hn::Add(o, hn::LoadU(df, partial + (c * H + h) * D + d));
      hn::StoreU(hn::Mul(o, inv_sum), df, out + h * D + d);
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace kvlm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvlm {

HWY_EXPORT(SplitSupportedImpl);
HWY_EXPORT(ScoresPartImpl);
HWY_EXPORT(ValuesPartImpl);
HWY_EXPORT(CombineChunksImpl);

bool attention_split_supported(const KvRowFormat& format, int head_dim) {
  return HWY_DYNAMIC_DISPATCH(SplitSupportedImpl)(format.dtype, head_dim);
}

void attention_scores_part(float* scores, size_t stride, float* max_out, const float* q,
                           std::span<const KvRun> runs, const KvRowFormat& format, int n_head,
                           int n_kv_head, int head_dim) {
  HWY_DYNAMIC_DISPATCH(ScoresPartImpl)
  (scores, stride, max_out, q, runs.data(), runs.size(), format, n_head, n_kv_head, head_dim);
}

void attention_values_part(float* partial, float* chunk_sums, float* scores, size_t stride,
                           const float* max_score, std::span<const KvRun> runs,
                           const KvRowFormat& format, int n_head, int n_kv_head, int head_dim) {
  HWY_DYNAMIC_DISPATCH(ValuesPartImpl)
  (partial, chunk_sums, scores, stride, max_score, runs.data(), runs.size(), format, n_head,
   n_kv_head, head_dim);
}

void attention_combine_chunks(float* out, const float* partial, const float* chunk_sums,
                              int n_chunks, int n_head, int head_dim, int head_begin,
                              int head_end) {
  HWY_DYNAMIC_DISPATCH(CombineChunksImpl)
  (out, partial, chunk_sums, n_chunks, n_head, head_dim, std::max(head_begin, 0),
   std::min(head_end, n_head));
}

}  // namespace kvlm
#endif  // HWY_ONCE
