// Query rows of one sequence together, head by head (attention_rows.h). Per head and tile of up
// to four rows: the scores of four positions for all the rows at once (16 chains over D whose
// lane sums, on 512-bit targets, share one transposition network: the same adds in the same
// order as Dot4's LaneSums4), each row's softmax (ExpAndSumChunks), then the weighted values
// with every row's chains in registers side by side, chunk by chunk (attention.h), the rows'
// ragged ends (each attends its own prefix) finished row by row.
//
// Why (GPT-2 124M shape, BF16 weights, prefill of 512 tokens, 2 threads, Zen 5): attention was
// a third of the prefill's samples, a row's weighted values one fma chain per element, waiting on
// the fma latency, and its scores' lane sums a store and four loads per four positions.
#include "ops/attention_rows.h"

#include <algorithm>
#include <cmath>
#include <vector>

// Highway: simd_targets.h before any hwy header, then foreach_target.h re-includes this
// file once per target (HWY_TARGET_INCLUDE).
// clang-format off
#include "ops/simd_targets.h"
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/attention_rows.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format on
#include "ops/attention_parts-inl.h"  // Readers, Dot4, LaneSums16, ExpAndSumChunks, kChunk

HWY_BEFORE_NAMESPACE();
namespace kvlm {
namespace HWY_NAMESPACE {
namespace {

constexpr int kRows = kAttentionRowTile;
static_assert(kRows == 4, "the score tile is four rows by four positions");

// Where position p's K and V rows are: one run (a contiguous cache), or a table of rows.
struct OneRun {
  const std::byte* k;
  const std::byte* v;
  size_t row_bytes;
  HWY_INLINE const std::byte* K(int p) const { return k + p * row_bytes; }
  HWY_INLINE const std::byte* V(int p) const { return v + p * row_bytes; }
};
struct RowTable {
  const std::byte* const* k;
  const std::byte* const* v;
  HWY_INLINE const std::byte* K(int p) const { return k[p]; }
  HWY_INLINE const std::byte* V(int p) const { return v[p]; }
};

// scores[i * stride + p] = q_i . k_p * scale for p < n[i] (rows i < kRows; padding rows repeat a
// real one and are dropped), and max_out[i] the largest, over positions p < n_max.
template <class Pos, class R>
HWY_INLINE void ScoreRows(float* HWY_RESTRICT scores, size_t stride, float* max_out,
                          const float* const (&qh)[kRows], const int (&n)[kRows], int n_max,
                          const Pos& rows, size_t kv_offset, size_t D, float scale, const R& rd) {
  for (int i = 0; i < kRows; ++i) max_out[i] = -INFINITY;
  int n_min = n[0];
  for (int i = 1; i < kRows; ++i) n_min = std::min(n_min, n[i]);
#if KVLM_LANE_SUMS16
  const DF df;
  VF vmax = hn::Set(df, -INFINITY);  // lane 4 i + j: row i's largest over whole groups
#endif
  for (int p = 0; p < n_max; p += 4) {
    const std::byte* k[4];
    for (int j = 0; j < 4; ++j) k[j] = rows.K(std::min(p + j, n_max - 1));
    float dots[kRows][4];  // scaled
#if KVLM_LANE_SUMS16
    {
      VF a[kRows][4];
      for (int i = 0; i < kRows; ++i)
        for (int j = 0; j < 4; ++j) a[i][j] = hn::Zero(df);
      for (size_t d = 0; d < D; d += kN) {  // Dot4's chains, four rows' of them
        VF kv[4];
        for (int j = 0; j < 4; ++j) kv[j] = rd.Load(k[j], kv_offset + d);
        for (int i = 0; i < kRows; ++i) {
          const VF qv = hn::LoadU(df, qh[i] + d);
          for (int j = 0; j < 4; ++j) a[i][j] = hn::MulAdd(qv, kv[j], a[i][j]);
        }
      }
      const VF s = hn::Mul(LaneSums16(a), hn::Set(df, scale));
      if (p + 4 <= n_min) {  // all four positions of every row: block i to row i
        _mm_storeu_ps(scores + p, _mm512_extractf32x4_ps(s.raw, 0));
        _mm_storeu_ps(scores + stride + p, _mm512_extractf32x4_ps(s.raw, 1));
        _mm_storeu_ps(scores + 2 * stride + p, _mm512_extractf32x4_ps(s.raw, 2));
        _mm_storeu_ps(scores + 3 * stride + p, _mm512_extractf32x4_ps(s.raw, 3));
        vmax = hn::Max(vmax, s);
        continue;
      }
      hn::StoreU(s, df, &dots[0][0]);
    }
#else
    for (int i = 0; i < kRows; ++i) {
      Dot4(dots[i], qh[i], k, kv_offset, D, rd);
      for (int j = 0; j < 4; ++j) dots[i][j] *= scale;
    }
#endif
    for (int i = 0; i < kRows; ++i)
      for (int j = 0; j < 4 && p + j < n[i]; ++j) {
        scores[i * stride + p + j] = dots[i][j];
        max_out[i] = std::max(max_out[i], dots[i][j]);
      }
  }
#if KVLM_LANE_SUMS16
  HWY_ALIGN float lanes[kRows * 4];
  hn::Store(vmax, df, lanes);
  for (int i = 0; i < kRows; ++i)
    for (int j = 0; j < 4; ++j) max_out[i] = std::max(max_out[i], lanes[4 * i + j]);
#endif
}

// Vectors of a head's output per row in registers at once: RT rows x this many accumulators.
constexpr size_t kValuePassVecs = kVecRegs == 32 ? 4 : 2;

// Columns [c, c + NV * kN) of rows i < RT's weighted values: o_i = (sum over chunks, in order from
// zero, of each chunk's fma chain from zero over its positions) * inv_sum[i], as
// WeightedValues then AttendHead's scaling give. Positions [0, n_min) for all rows at once, then
// each row's own rest.
template <int RT, int NV, class Pos, class R>
HWY_INLINE void ValueColumns(float* const (&o)[kRows], const float* HWY_RESTRICT w, size_t stride,
                             const int (&n)[kRows], const float (&inv_sum)[kRows], const Pos& rows,
                             size_t column, const R& rd) {
  const DF df;
  int n_min = n[0];
  for (int i = 1; i < RT; ++i) n_min = std::min(n_min, n[i]);
  VF acc[RT][NV], total[RT][NV];
  for (int i = 0; i < RT; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v] = total[i][v] = hn::Zero(df);
  auto end_chunk = [&](int i) HWY_ATTR {
    for (int v = 0; v < NV; ++v) {
      total[i][v] = hn::Add(total[i][v], acc[i][v]);
      acc[i][v] = hn::Zero(df);
    }
  };
  for (int p = 0; p < n_min; ++p) {
    VF x[NV];
    for (int v = 0; v < NV; ++v) x[v] = rd.Load(rows.V(p), column + v * kN);
    for (int i = 0; i < RT; ++i) {
      const VF vw = hn::Set(df, w[i * stride + p]);
      for (int v = 0; v < NV; ++v) acc[i][v] = hn::MulAdd(vw, x[v], acc[i][v]);
    }
    if ((p + 1) % kChunk == 0)
      for (int i = 0; i < RT; ++i) end_chunk(i);
  }
  for (int i = 0; i < RT; ++i) {
    for (int p = n_min; p < n[i]; ++p) {
      const VF vw = hn::Set(df, w[i * stride + p]);
      for (int v = 0; v < NV; ++v)
        acc[i][v] = hn::MulAdd(vw, rd.Load(rows.V(p), column + v * kN), acc[i][v]);
      if ((p + 1) % kChunk == 0) end_chunk(i);
    }
    if (n[i] % kChunk != 0) end_chunk(i);
    const VF scale = hn::Set(df, inv_sum[i]);
    for (int v = 0; v < NV; ++v) hn::StoreU(hn::Mul(total[i][v], scale), df, o[i] + v * kN);
  }
}

// All of a head's D columns for rows i < RT, kValuePassVecs vectors at a time.
template <int RT, class Pos, class R>
void ValueRows(float* const (&o)[kRows], const float* w, size_t stride, const int (&n)[kRows],
               const float (&inv_sum)[kRows], const Pos& rows, size_t kv_offset, size_t D,
               const R& rd) {
  for (size_t d = 0; d < D; d += kValuePassVecs * kN) {
    float* od[kRows];
    for (int i = 0; i < kRows; ++i) od[i] = o[i] + d;
    if (D - d >= kValuePassVecs * kN) {
      ValueColumns<RT, kValuePassVecs>(od, w, stride, n, inv_sum, rows, kv_offset + d, rd);
    } else {  // D a whole number of vectors, fewer than a pass
      for (size_t c = d; c < D; c += kN) {
        for (int i = 0; i < kRows; ++i) od[i] = o[i] + c;
        ValueColumns<RT, 1>(od, w, stride, n, inv_sum, rows, kv_offset + c, rd);
      }
    }
  }
}

// Heads [h0, h1) of the rows, positions found through `rows`.
template <class Pos, class R>
void AttendRowsAt(float* out, size_t out_stride, const float* q, size_t q_stride, int n_rows,
                  const int (&n)[kRows], int n_max, const Pos& rows, int h0, int h1, int group,
                  size_t D, const R& rd) {
  thread_local std::vector<float> scores_buffer;  // [kRows][n_max], reused from call to call
  const size_t stride = static_cast<size_t>(n_max);
  if (scores_buffer.size() < kRows * stride) scores_buffer.resize(kRows * stride);
  float* scores = scores_buffer.data();
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  for (int h = h0; h < h1; ++h) {
    const size_t kv_offset = static_cast<size_t>(h / group) * D;
    const float* qh[kRows];
    float* oh[kRows];
    for (int i = 0; i < kRows; ++i) {
      const size_t row = static_cast<size_t>(std::min(i, n_rows - 1));
      qh[i] = q + row * q_stride + h * D;
      oh[i] = out + row * out_stride + h * D;
    }
    float max_score[kRows], inv_sum[kRows];
    ScoreRows(scores, stride, max_score, qh, n, n_max, rows, kv_offset, D, scale, rd);
    for (int i = 0; i < n_rows; ++i)
      inv_sum[i] = 1.0f / ExpAndSumChunks(scores + i * stride, n[i], max_score[i]);
    switch (n_rows) {
      case 1:
        ValueRows<1>(oh, scores, stride, n, inv_sum, rows, kv_offset, D, rd);
        break;
      case 2:
        ValueRows<2>(oh, scores, stride, n, inv_sum, rows, kv_offset, D, rd);
        break;
      case 3:
        ValueRows<3>(oh, scores, stride, n, inv_sum, rows, kv_offset, D, rd);
        break;
      default:
        ValueRows<4>(oh, scores, stride, n, inv_sum, rows, kv_offset, D, rd);
        break;
    }
  }
}

template <class R>
void AttendRows(float* out, size_t out_stride, const float* q, size_t q_stride, const int* n_pos,
                int n_rows, const KvRun* runs, size_t n_runs, size_t row_bytes, int h0, int h1,
                int group, size_t D, const R& rd) {
  int n[kRows], n_max = 0;
  for (int i = 0; i < kRows; ++i) {
    n[i] = n_pos[std::min(i, n_rows - 1)];
    n_max = std::max(n_max, n[i]);
  }
  if (n_runs == 1 && runs[0].n_positions >= n_max) {
    const OneRun rows{runs[0].k, runs[0].v, row_bytes};
    return AttendRowsAt(out, out_stride, q, q_stride, n_rows, n, n_max, rows, h0, h1, group, D, rd);
  }
  thread_local std::vector<const std::byte*> k_rows, v_rows;  // reused from call to call
  k_rows.clear();
  v_rows.clear();
  for (size_t r = 0; r < n_runs && static_cast<int>(k_rows.size()) < n_max; ++r)
    for (int j = 0; j < runs[r].n_positions && static_cast<int>(k_rows.size()) < n_max; ++j) {
      k_rows.push_back(runs[r].k + j * row_bytes);
      v_rows.push_back(runs[r].v + j * row_bytes);
    }
  const RowTable rows{k_rows.data(), v_rows.data()};
  AttendRowsAt(out, out_stride, q, q_stride, n_rows, n, n_max, rows, h0, h1, group, D, rd);
}

}  // namespace

// Readers whose values are their Load's bits (no per-head scale), heads of whole vectors.
bool RowsSupportedImpl(KvDtype dtype, int head_dim) {
  const bool type = dtype == KvDtype::f32 || dtype == KvDtype::f16 || dtype == KvDtype::bf16;
  return type && head_dim % kN == 0;
}

void AttendRowsImpl(float* out, size_t out_stride, const float* q, size_t q_stride,
                    const int* n_positions, int n_rows, const KvRun* runs, size_t n_runs,
                    const KvRowFormat& format, int n_head, int n_kv_head, int head_dim,
                    int head_begin, int head_end) {
  const int group = n_head / n_kv_head;
  const size_t D = head_dim, rb = format.row_bytes;
  switch (format.dtype) {
    case KvDtype::f32:
      return AttendRows(out, out_stride, q, q_stride, n_positions, n_rows, runs, n_runs, rb,
                        head_begin, head_end, group, D, F32Reader{});
    case KvDtype::f16:
      return AttendRows(out, out_stride, q, q_stride, n_positions, n_rows, runs, n_runs, rb,
                        head_begin, head_end, group, D, Half16Reader<hwy::float16_t>{});
    case KvDtype::bf16:
      return AttendRows(out, out_stride, q, q_stride, n_positions, n_rows, runs, n_runs, rb,
                        head_begin, head_end, group, D, Half16Reader<hwy::bfloat16_t>{});
    default:
      break;  // attention_rows_supported is false
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace kvlm
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvlm {

HWY_EXPORT(RowsSupportedImpl);
HWY_EXPORT(AttendRowsImpl);

bool attention_rows_supported(const KvRowFormat& format, int head_dim) {
  return HWY_DYNAMIC_DISPATCH(RowsSupportedImpl)(format.dtype, head_dim);
}

void attention_rows_forward(float* out, size_t out_stride, const float* q, size_t q_stride,
                            const int* n_positions, int n_rows, std::span<const KvRun> runs,
                            const KvRowFormat& format, int n_head, int n_kv_head, int head_dim,
                            int head_begin, int head_end) {
  if (n_rows <= 0) return;
  HWY_DYNAMIC_DISPATCH(AttendRowsImpl)
  (out, out_stride, q, q_stride, n_positions, std::min(n_rows, kAttentionRowTile), runs.data(),
   runs.size(), format, n_head, n_kv_head, head_dim, std::max(head_begin, 0),
   std::min(head_end, n_head));
}

}  // namespace kvlm
#endif  // HWY_ONCE
