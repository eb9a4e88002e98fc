// Attention of one query row over the cache, vectorised over head_dim, compiled per Highway
// target and dispatched at run time. K/V rows are read in the cache's storage type (f32, f16,
// bf16, q8_0, fp8) and widened to fp32 in registers by a Reader, one template instance each. Per
// head: scores q.k (four positions at a time, each a fixed reduction over D), softmax with a
// vectorised exp, then the weighted sum of values as one fma chain per element and chunk of
// positions (kAttentionChunk), chunks added in order. Every step depends only on the positions
// attended, never on how the cache splits them into runs or on which other rows are being
// computed, so prefill and decode give the same bits. The pieces shared with the split decode
// path (attention_split.cpp) are in attention_parts-inl.h.
#include "ops/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
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
#include "ops/attention_parts-inl.h"  // Readers, Dot4, ExpAndSumChunks, ScoreHeadsTogether

HWY_BEFORE_NAMESPACE();
namespace kvlm {
namespace HWY_NAMESPACE {
namespace {

// o[0, n_cols) = sum over the chunks of kChunk positions, in order from zero, of each chunk's
// sum over its positions p in order of w[p] * v_p[column, column + n_cols): per element one fma
// chain from zero per chunk, in NV registers (n_cols <= NV * kN; kPartial: the last vector is
// n_cols % kN wide), added to the running total (on the stack) as the chunk ends. q8_0 with no
// vector straddling a block (column a multiple of kN): the chain's term is (w[p] * block scale,
// one fp32 rounding) times the raw int8 value, so a value costs a widen and an fma instead of a
// widen, a multiply and an fma.
template <int NV, bool kPartial, class R>
HWY_INLINE void WeightedValues(float* HWY_RESTRICT o, const KvRun* runs, size_t n_runs,
                               size_t row_bytes, size_t column, const float* HWY_RESTRICT w,
                               size_t n_cols, bool fetch_ahead, const R& rd) {
  const DF df;
  VF acc[NV];
  for (int v = 0; v < NV; ++v) acc[v] = hn::Zero(df);
  HWY_ALIGN float total[NV * kN] = {};
  size_t in_chunk = 0;  // positions of the current chunk done
  auto end_chunk = [&]() HWY_ATTR {
    for (int v = 0; v < NV; ++v) {
      hn::Store(hn::Add(hn::Load(df, total + v * kN), acc[v]), df, total + v * kN);
      acc[v] = hn::Zero(df);
    }
    in_chunk = 0;
  };
  const size_t tail = n_cols - (NV - 1) * kN;
  for (size_t r = 0; r < n_runs; ++r) {
    const std::byte* row = runs[r].v;
    const int n = runs[r].n_positions;
    for (int j = 0; j < n; ++j, row += row_bytes, ++w) {
      if (fetch_ahead && j + kPrefetchAhead < n)
        PrefetchRow(rd.At(row + kPrefetchAhead * row_bytes, column), n_cols * R::kBytes);
      bool done = false;
      if constexpr (R::kBlockScaled && !kPartial) {
        if (column % kN == 0) {  // no vector straddles a block
          size_t block = ~size_t{0};
          VF ws = hn::Zero(df);
          for (int v = 0; v < NV; ++v) {
            const size_t c = column + v * kN;
            if (c / kQ8BlockSize != block) {
              block = c / kQ8BlockSize;
              ws = hn::Set(df, *w * rd.Scale(row, block));
            }
            acc[v] = hn::MulAdd(ws, rd.LoadRaw(row, c), acc[v]);
          }
          done = true;
        }
      }
      if (!done) {
        const VF vw = hn::Set(df, *w);
        auto values = rd.Row(row);
        for (int v = 0; v < NV; ++v) {
          const VF x = kPartial && v == NV - 1 ? values.LoadN(column + v * kN, tail)
                                               : values.Load(column + v * kN);
          acc[v] = hn::MulAdd(vw, x, acc[v]);
        }
      }
      if (++in_chunk == kChunk) end_chunk();
    }
  }
  if (in_chunk > 0) end_chunk();
  for (int v = 0; v < NV; ++v) {
    if (kPartial && v == NV - 1) {
      StorePartial(hn::Load(df, total + v * kN), df, o + v * kN, tail);
    } else {
      hn::StoreU(hn::Load(df, total + v * kN), df, o + v * kN);
    }
  }
}

constexpr int kValueVecs = 8;  // vectors of one head's output kept in registers at a time

// One head's weighted sum of values over columns [0, D), kValueVecs vectors at a time.
template <class R>
void WeightedValuesHead(float* o, const KvRun* runs, size_t n_runs, size_t row_bytes,
                        size_t kv_offset, const float* w, size_t D, bool fetch_ahead, const R& rd) {
  for (size_t d0 = 0; d0 < D; d0 += kValueVecs * kN) {
    const size_t n = std::min(kValueVecs * kN, D - d0);
    const size_t nv = (n + kN - 1) / kN;
    const bool partial = n % kN != 0;
#define KVLM_WEIGHTED_VALUES(NV)                                                                   \
  case NV:                                                                                         \
    if (partial) {                                                                                 \
      WeightedValues<NV, true>(o + d0, runs, n_runs, row_bytes, kv_offset + d0, w, n, fetch_ahead, \
                               rd);                                                                \
    } else {                                                                                       \
      WeightedValues<NV, false>(o + d0, runs, n_runs, row_bytes, kv_offset + d0, w, n,             \
                                fetch_ahead, rd);                                                  \
    }                                                                                              \
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

// One query head over all positions: keys read by rk, values by rv; rows fetched ahead into L2
// when fetch_ahead (rows nothing has just read).
template <class R>
void AttendHead(float* HWY_RESTRICT oh, const float* HWY_RESTRICT qh, const KvRun* runs,
                size_t n_runs, size_t row_bytes, size_t kv_offset, float* scratch, size_t D,
                float scale, bool fetch_ahead, const R& rk, const R& rv) {
  const DF df;
  // Scores q.k / sqrt(D), four positions at a time across run boundaries, and their maximum
  // for a stable softmax.
  float max_score = -INFINITY;
  size_t p = 0;
  const bool blocks = R::kBlockScaled && D % kN == 0;  // q8_0: scales applied per block
  const std::byte* k_rows[4];
  int n_group = 0;
  auto score_group = [&]() HWY_ATTR {
    for (int j = n_group; j < 4; ++j) k_rows[j] = k_rows[n_group - 1];  // padding, discarded
    float dots[4];
    if constexpr (R::kBlockScaled) {
      if (blocks) {
        DotBlocks4(dots, qh, k_rows, kv_offset, D, rk,
                   [&](int j, size_t block) { return rk.Scale(k_rows[j], block); });
      } else {
        Dot4(dots, qh, k_rows, kv_offset, D, rk);
      }
    } else {
      Dot4(dots, qh, k_rows, kv_offset, D, rk);
    }
    for (int j = 0; j < n_group; ++j, ++p) {
      scratch[p] = dots[j] * scale;
      max_score = std::max(max_score, scratch[p]);
    }
    n_group = 0;
  };
  for (size_t r = 0; r < n_runs; ++r) {
    const std::byte* k = runs[r].k;
    const int n = runs[r].n_positions;
    for (int j = 0; j < n; ++j) {
      if (fetch_ahead && j + kPrefetchAhead < n)
        PrefetchRow(rk.At(k + (j + kPrefetchAhead) * row_bytes, kv_offset), D * R::kBytes);
      k_rows[n_group++] = k + j * row_bytes;
      if (n_group == 4) score_group();
    }
  }
  if (n_group > 0) score_group();
  const float sum = ExpAndSumChunks(scratch, p, max_score);
  // Weighted sum of values, positions in order.
  WeightedValuesHead(oh, runs, n_runs, row_bytes, kv_offset, scratch, D, fetch_ahead, rv);
  const VF inv_sum = hn::Set(df, 1.0f / sum);
  size_t d = 0;
  for (; d + kN <= D; d += kN) hn::StoreU(hn::Mul(hn::LoadU(df, oh + d), inv_sum), df, oh + d);
  if (d < D) StorePartial(hn::Mul(LoadWeightsN(df, oh + d, D - d), inv_sum), df, oh + d, D - d);
}

// Query heads [h0, h1) of one row in one pass over the positions per phase: each position's
// keys (then values) for all those heads are one contiguous stretch of its row, read once, where
// AttendHead reads a head's few cache lines of every row and then comes back for the next head's
// (batched decode, 8 sequences' caches that nothing else reuses, was bound by those strided
// reads). The arithmetic per (head, position) is AttendHead's, in the same order: the same Dot4
// (q8_0: DotBlocks4) per group of four positions, the same ExpAndSum, and each output element's
// weighted sum one fma chain from zero in position order (kept in `out` between positions: the
// same chain; q8_0 with the block's scale on the weight, as WeightedValues), then the same
// multiply by 1 / sum. So every head gets AttendHead's bits. Readers with no per-head state
// (f32, f16, bf16, q8_0; not fp8's per-head scales), D a whole number of vectors.
// scratch holds (h1 - h0) x (P + D) floats.
template <class R>
void AttendHeadsTogether(float* HWY_RESTRICT out, const float* HWY_RESTRICT q, const KvRun* runs,
                         size_t n_runs, size_t row_bytes, int h0, int h1, int group, size_t D,
                         float* HWY_RESTRICT scratch, float scale, const R& rd) {
  const DF df;
  size_t n_pos = 0;
  for (size_t r = 0; r < n_runs; ++r) n_pos += runs[r].n_positions;
  // The stretch of a row the heads read: their key/value heads' slices, contiguous.
  const size_t first_col = static_cast<size_t>(h0 / group) * D;
  const size_t span_bytes = (static_cast<size_t>((h1 - 1) / group + 1) * D - first_col) * R::kBytes;
  // Rows of 16-bit caches fetched this many positions ahead (none for fp32 rows: FetchAhead): a
  // row's stretch is many cache lines, so fewer rows ahead than AttendHead's per-head slices.
  constexpr int kAhead = FetchAhead<R>(3);
  constexpr int kMaxHeads = 64;  // heads per pass (their maxima and sums on the stack)
  for (int hb = h0; hb < h1; hb += kMaxHeads) {
    const int he = std::min(h1, hb + kMaxHeads), nh = he - hb;
    float max_score[kMaxHeads], sum[kMaxHeads];
    ScoreHeadsTogether(scratch, n_pos, max_score, q, runs, n_runs, row_bytes, hb, nh, group, D,
                       scale, first_col, span_bytes, kAhead, rd);
    for (int h = 0; h < nh; ++h) sum[h] = ExpAndSumChunks(scratch + h * n_pos, n_pos, max_score[h]);
    // Weighted sums of values, positions in order: each element's chain of a chunk kept in
    // `chunk` (after the scores in scratch), added to its total in out as the chunk ends.
    float* HWY_RESTRICT chunk = scratch + static_cast<size_t>(nh) * n_pos;
    for (int h = hb; h < he; ++h)
      for (size_t d = 0; d < D; d += kN) hn::StoreU(hn::Zero(df), df, out + h * D + d);
    for (size_t i = 0; i < nh * D; i += kN) hn::StoreU(hn::Zero(df), df, chunk + i);
    auto end_chunk = [&]() HWY_ATTR {
      for (int h = 0; h < nh; ++h) {
        float* o = out + static_cast<size_t>(hb + h) * D;
        for (size_t d = 0; d < D; d += kN) {
          hn::StoreU(hn::Add(hn::LoadU(df, o + d), hn::LoadU(df, chunk + h * D + d)), df, o + d);
          hn::StoreU(hn::Zero(df), df, chunk + h * D + d);
        }
      }
    };
    auto chunk_acc = [&](size_t) { return chunk; };  // every chunk's chains start in `chunk`
    AddValueRuns(runs, n_runs, row_bytes, scratch, n_pos, hb, nh, group, D, first_col, span_bytes,
                 kAhead, rd, chunk_acc, end_chunk);
    for (int h = 0; h < nh; ++h) {
      const VF inv_sum = hn::Set(df, 1.0f / sum[h]);
      float* o = out + static_cast<size_t>(hb + h) * D;
      for (size_t d = 0; d < D; d += kN)
        hn::StoreU(hn::Mul(hn::LoadU(df, o + d), inv_sum), df, o + d);
    }
  }
}

}  // namespace

void AttentionImpl(float* out, const float* q, const KvRun* runs, size_t n_runs,
                   const KvRowFormat& format, float* scratch, int n_head, int n_kv_head,
                   int head_dim, int head_begin, int head_end, bool fetch_ahead) {
  const size_t D = head_dim, kv_dim = static_cast<size_t>(n_kv_head) * head_dim;
  const int group = n_head / n_kv_head;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  for (int h = head_begin; h < head_end; ++h) {
    const int g = h / group;
    const size_t kv_offset = static_cast<size_t>(g) * D;
    float* oh = out + h * D;
    const float* qh = q + h * D;
    const size_t rb = format.row_bytes;
    switch (format.dtype) {
      case KvDtype::f32:
        AttendHead(oh, qh, runs, n_runs, rb, kv_offset, scratch, D, scale, fetch_ahead, F32Reader{},
                   F32Reader{});
        break;
      case KvDtype::f16:
        AttendHead(oh, qh, runs, n_runs, rb, kv_offset, scratch, D, scale, fetch_ahead,
                   Half16Reader<hwy::float16_t>{}, Half16Reader<hwy::float16_t>{});
        break;
      case KvDtype::bf16:
        AttendHead(oh, qh, runs, n_runs, rb, kv_offset, scratch, D, scale, fetch_ahead,
                   Half16Reader<hwy::bfloat16_t>{}, Half16Reader<hwy::bfloat16_t>{});
        break;
      case KvDtype::q8_0:
      case KvDtype::q8_0_kc:  // as q8_0 (the model reads q8_0_kc keys through attend_rows'
                              // widening)
        AttendHead(oh, qh, runs, n_runs, rb, kv_offset, scratch, D, scale, fetch_ahead,
                   Q8Reader{kv_dim}, Q8Reader{kv_dim});
        break;
      case KvDtype::fp8:
        AttendHead(oh, qh, runs, n_runs, rb, kv_offset, scratch, D, scale, fetch_ahead,
                   Fp8Reader{format.k_scale[g]}, Fp8Reader{format.v_scale[g]});
        break;
      case KvDtype::int8:
        break;  // not storable: no cache hands out such rows
    }
  }
}

// Heads [head_begin, head_end) of one row together (AttendHeadsTogether) where the format allows,
// else one head at a time; the same bits either way.
void AttentionTogetherImpl(float* out, const float* q, const KvRun* runs, size_t n_runs,
                           const KvRowFormat& format, float* scratch, int n_head, int n_kv_head,
                           int head_dim, int head_begin, int head_end) {
  const size_t D = head_dim;
  const int group = n_head / n_kv_head;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  if (head_begin >= head_end) return;
  if (D % kN == 0) {
    const size_t rb = format.row_bytes;
    switch (format.dtype) {
      case KvDtype::f32:
        return AttendHeadsTogether(out, q, runs, n_runs, rb, head_begin, head_end, group, D,
                                   scratch, scale, F32Reader{});
      case KvDtype::f16:
        return AttendHeadsTogether(out, q, runs, n_runs, rb, head_begin, head_end, group, D,
                                   scratch, scale, Half16Reader<hwy::float16_t>{});
      case KvDtype::bf16:
        return AttendHeadsTogether(out, q, runs, n_runs, rb, head_begin, head_end, group, D,
                                   scratch, scale, Half16Reader<hwy::bfloat16_t>{});
      case KvDtype::q8_0:
        return AttendHeadsTogether(out, q, runs, n_runs, rb, head_begin, head_end, group, D,
                                   scratch, scale, Q8Reader{static_cast<size_t>(n_kv_head) * D});
      default:
        break;
    }
  }
  AttentionImpl(out, q, runs, n_runs, format, scratch, n_head, n_kv_head, head_dim, head_begin,
                head_end, /*fetch_ahead=*/true);
}

}  // namespace HWY_NAMESPACE
}  // namespace kvlm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvlm {

HWY_EXPORT(AttentionImpl);
HWY_EXPORT(AttentionTogetherImpl);

void attention_forward(float* out, const float* q, std::span<const KvRun> runs,
                       const KvRowFormat& format, float* scratch, int n_head, int n_kv_head,
                       int head_dim) {
  HWY_DYNAMIC_DISPATCH(AttentionImpl)
  (out, q, runs.data(), runs.size(), format, scratch, n_head, n_kv_head, head_dim, 0, n_head,
   /*fetch_ahead=*/true);
}

void attention_heads_forward(float* out, const float* q, std::span<const KvRun> runs,
                             const KvRowFormat& format, float* scratch, int n_head, int n_kv_head,
                             int head_dim, int head_begin, int head_end, bool fetch_ahead) {
  HWY_DYNAMIC_DISPATCH(AttentionImpl)
  (out, q, runs.data(), runs.size(), format, scratch, n_head, n_kv_head, head_dim,
   std::max(head_begin, 0), std::min(head_end, n_head), fetch_ahead);
}

void attention_heads_together_forward(float* out, const float* q, std::span<const KvRun> runs,
                                      const KvRowFormat& format, float* scratch, int n_head,
                                      int n_kv_head, int head_dim, int head_begin, int head_end) {
  HWY_DYNAMIC_DISPATCH(AttentionTogetherImpl)
  (out, q, runs.data(), runs.size(), format, scratch, n_head, n_kv_head, head_dim,
   std::max(head_begin, 0), std::min(head_end, n_head));
}

void attention_reference(float* out, const float* q, std::span<const KvRun> runs,
                         const KvRowFormat& format, int n_head, int n_kv_head, int head_dim) {
  const size_t kv_dim = static_cast<size_t>(n_kv_head) * head_dim;
  const int group = n_head / n_kv_head;
  for (int h = 0; h < n_head; ++h) {
    const float* qh = q + static_cast<size_t>(h) * head_dim;
    const int g = h / group;
    const size_t kv_offset = static_cast<size_t>(g) * head_dim;
    const float k_scale = format.k_scale ? format.k_scale[g] : 1.0f;
    const float v_scale = format.v_scale ? format.v_scale[g] : 1.0f;
    auto value = [&](const std::byte* rows, int j, int d, float s) {
      return double{
          kv_decode_value(rows + j * format.row_bytes, kv_dim, kv_offset + d, format.dtype, s)};
    };
    std::vector<double> scores;
    for (const KvRun& run : runs)
      for (int j = 0; j < run.n_positions; ++j) {
        double dot = 0.0;
        for (int d = 0; d < head_dim; ++d) dot += double{qh[d]} * value(run.k, j, d, k_scale);
        scores.push_back(dot / std::sqrt(static_cast<double>(head_dim)));
      }
    double max_score = -INFINITY, sum = 0.0;
    for (double s : scores) max_score = std::max(max_score, s);
    for (double& s : scores) sum += (s = std::exp(s - max_score));
    std::vector<double> acc(head_dim, 0.0);
    size_t p = 0;
    for (const KvRun& run : runs)
      for (int j = 0; j < run.n_positions; ++j, ++p)
        for (int d = 0; d < head_dim; ++d) acc[d] += scores[p] * value(run.v, j, d, v_scale);
    for (int d = 0; d < head_dim; ++d)
      out[static_cast<size_t>(h) * head_dim + d] = static_cast<float>(acc[d] / sum);
  }
}

}  // namespace kvlm
#endif  // HWY_ONCE
