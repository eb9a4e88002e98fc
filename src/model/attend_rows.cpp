#include "model/attend_rows.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "model/decoder_model.h"  // ensure_size
#include "ops/attention.h"
#include "ops/attention_rows.h"
#include "ops/attention_split.h"
#include "ops/thread_team.h"

namespace kvlm {

namespace {

// Rows per task: enough that a head's slice read from L3 serves many rows, few enough that
// the causal triangle's uneven tasks still balance over the threads.
constexpr int kRowsPerTask = 16;

// Drops the first `n_skip` positions of `runs` (a sliding window keeps only the newest ones).
void drop_leading_positions(std::vector<KvRun>& runs, int n_skip, size_t row_bytes) {
  size_t first = 0;
  while (n_skip > 0 && first < runs.size()) {
    KvRun& run = runs[first];
    const int take = std::min(n_skip, run.n_positions);
    run.k += static_cast<size_t>(take) * row_bytes;
    run.v += static_cast<size_t>(take) * row_bytes;
    run.n_positions -= take;
    n_skip -= take;
    if (run.n_positions == 0) ++first;
  }
  runs.erase(runs.begin(), runs.begin() + static_cast<std::ptrdiff_t>(first));
}

// Scratch of one thread for a windowed row: its view's keys rotated to their in-view positions
// (and, unless the cache holds fp32 values, its values widened), as fp32 rows of kv_dim.
struct WindowScratch {
  std::vector<float> k;    // [view, kv_dim]
  std::vector<float> v;    // [view, kv_dim]
  std::vector<float> row;  // [kv_dim] one stored key widened to fp32
};

// Widens values [c_begin, c_end) of a stored row to fp32 (kv_decode_value's bits: the windowed
// view then runs the fp32 kernel, so a q8_0 value is scaled here, not per block).
void widen_row(float* out, const std::byte* row, const KvRowFormat& format, const float* scales,
               const float* channel_scales, int kv_dim, int head_dim, int c_begin, int c_end) {
  if (format.dtype == KvDtype::f32) {
    std::memcpy(out + c_begin, reinterpret_cast<const float*>(row) + c_begin,
                sizeof(float) * (c_end - c_begin));
    return;
  }
  for (int c = c_begin; c < c_end; ++c)
    out[c] = kv_decode_value(row, kv_dim, c, format.dtype,
                             scales != nullptr ? scales[c / head_dim] : 1.0f);
  if (channel_scales != nullptr)  // q8_0_kc keys: back to the channel's own scale
    for (int c = c_begin; c < c_end; ++c) out[c] *= channel_scales[c];
}

// One row's attention over its window view (sinks, then its recent positions), heads
// [head_begin, head_end): gathers and rotates the keys those heads read, then runs the plain
// kernel over fp32 rows.
void attend_window_row(float* out, const float* q, const AttentionRow& row, int layer,
                       const KvCache& cache, const AttentionShape& shape, const KvRowFormat& format,
                       int head_begin, int head_end, WindowScratch* ws, std::vector<KvRun>* runs,
                       float* scores) {
  const KvWindow w = unrotated_view(cache, shape.sliding_window);
  const int kv_dim = shape.n_kv_head * shape.head_dim, D = shape.head_dim;
  const int group = shape.n_head / shape.n_kv_head;
  const int g_begin = head_begin / group, g_end = (head_end - 1) / group + 1;
  const int c_begin = g_begin * D, c_end = g_end * D;
  const int64_t recent = w.recent_begin(row.pos);
  const int sink_end = static_cast<int>(std::min<int64_t>(w.sinks, recent));
  const int n_view = w.view_size(row.pos);
  runs->clear();
  cache.range_runs(row.seq, layer, 0, sink_end, runs);
  cache.range_runs(row.seq, layer, static_cast<int>(recent), row.pos + 1, runs);
  ensure_size(ws->k, static_cast<size_t>(n_view) * kv_dim);
  ensure_size(ws->row, kv_dim);
  const bool f32_values = format.dtype == KvDtype::f32;
  if (!f32_values) ensure_size(ws->v, static_cast<size_t>(n_view) * kv_dim);
  std::vector<KvRun> rotated;
  int j = 0;  // in-view position
  for (const KvRun& run : *runs) {
    const float* k_first = ws->k.data() + static_cast<size_t>(j) * kv_dim;
    const float* v_first = f32_values ? reinterpret_cast<const float*>(run.v)
                                      : ws->v.data() + static_cast<size_t>(j) * kv_dim;
    for (int p = 0; p < run.n_positions; ++p, ++j) {
      const size_t at = static_cast<size_t>(p) * format.row_bytes;
      float* k_row = ws->k.data() + static_cast<size_t>(j) * kv_dim;
      if (shape.window_rope != nullptr) {
        widen_row(ws->row.data(), run.k + at, format, format.k_scale, format.k_channel_scale,
                  kv_dim, D, c_begin, c_end);
        rope_rotate_heads(k_row, ws->row.data(), *shape.window_rope, j, g_begin, g_end, D);
      } else {  // no RoPE (GPT-2 with q8_0_kc): widened only
        widen_row(k_row, run.k + at, format, format.k_scale, format.k_channel_scale, kv_dim, D,
                  c_begin, c_end);
      }
      if (!f32_values)
        widen_row(ws->v.data() + static_cast<size_t>(j) * kv_dim, run.v + at, format,
                  format.v_scale, nullptr, kv_dim, D, c_begin, c_end);
    }
    rotated.push_back(f32_run(k_first, v_first, run.n_positions));
  }
  attention_heads_forward(out, q, rotated, f32_rows(kv_dim), scores, shape.n_head, shape.n_kv_head,
                          D, head_begin, head_end);
}

// True when no two rows share a sequence (a decode step): no row's slice of the cache is
// reused by another, so nothing is gained by grouping rows per head.
bool one_row_per_sequence(std::span<const AttentionRow> rows) {
  std::vector<int> seqs;
  seqs.reserve(rows.size());
  for (const AttentionRow& row : rows) seqs.push_back(row.seq);
  std::sort(seqs.begin(), seqs.end());
  return std::adjacent_find(seqs.begin(), seqs.end()) == seqs.end();
}

// Decode rows of several sequences: a task is one row and a contiguous slice of its heads (all
// of them when there are enough rows to share out), computed in one pass over its positions
// (attention_heads_together_forward), so each position's keys and values for the task's heads
// are read as one stretch of the row instead of a few cache lines per head per pass. GPT-2
// 124M shape, F16 weights, 8 sequences, perf samples in attention a step: 25-40% fewer. (One
// row alone keeps the per-head tasks: at 900 cached, heads together was 10% slower there.)
void attend_decode_rows(float* out, size_t out_stride, const float* q, size_t q_stride,
                        std::span<const AttentionRow> rows, int layer, const KvCache& cache,
                        const AttentionShape& shape, const KvRowFormat& format,
                        const Parallel& par) {
  const int n_rows = static_cast<int>(rows.size());
  // Slices of whole key/value heads (query heads sharing one read it once), enough tasks for
  // two per thread.
  const int want = (2 * par.n_threads + n_rows - 1) / n_rows;
  const int n_slices = std::clamp(want, 1, shape.n_kv_head);
  const int n_tasks = n_rows * n_slices;
  const int group = shape.n_head / shape.n_kv_head;
  int max_positions = 0;
  for (const AttentionRow& row : rows) max_positions = std::max(max_positions, row.pos + 1);
  const int max_heads = ((shape.n_kv_head + n_slices - 1) / n_slices) * group;
  TaskCounter tasks;
  run_team(std::min(par.n_threads, n_tasks), [&](int, int) {
    std::vector<KvRun> runs;
    std::vector<float> scores(static_cast<size_t>(max_heads) * (max_positions + shape.head_dim));
    for (int task = tasks.claim(); task < n_tasks; task = tasks.claim()) {
      const int r = task / n_slices, slice = task % n_slices;
      const int head_begin = shape.n_kv_head * slice / n_slices * group;
      const int head_end = shape.n_kv_head * (slice + 1) / n_slices * group;
      runs.clear();
      cache.runs(rows[r].seq, layer, rows[r].pos + 1, &runs);
      const int n_positions = rows[r].pos + 1;
      if (shape.sliding_window > 0 && n_positions > shape.sliding_window)
        drop_leading_positions(runs, n_positions - shape.sliding_window, format.row_bytes);
      attention_heads_together_forward(out + r * out_stride, q + r * q_stride, runs, format,
                                       scores.data(), shape.n_head, shape.n_kv_head, shape.head_dim,
                                       head_begin, head_end);
    }
  });
}

// Where each split row's positions and its buffers' parts are.
struct SplitRow {
  int first = 0;  // first position attended (a sliding window drops older ones)
  int n_positions = 0;
  int n_chunks = 0;
  size_t scores = 0, partial = 0, sums = 0;  // offsets into the buffers of attend_decode_split
};
struct SplitPlan {
  std::vector<SplitRow> rows;
  size_t n_scores = 0, n_partial = 0, n_sums = 0;  // floats each buffer holds
};

SplitPlan plan_split(std::span<const AttentionRow> rows, const AttentionShape& shape) {
  const int C = static_cast<int>(kAttentionChunk), H = shape.n_head, D = shape.head_dim;
  SplitPlan plan;
  for (const AttentionRow& row : rows) {
    SplitRow s;
    const int all = row.pos + 1;
    s.n_positions = shape.sliding_window > 0 ? std::min(all, shape.sliding_window) : all;
    s.first = all - s.n_positions;
    s.n_chunks = (s.n_positions + C - 1) / C;
    s.scores = plan.n_scores;
    s.partial = plan.n_partial;
    s.sums = plan.n_sums;
    plan.n_scores += static_cast<size_t>(H) * s.n_positions;
    plan.n_partial += static_cast<size_t>(s.n_chunks) * H * D;
    plan.n_sums += static_cast<size_t>(s.n_chunks) * H;
    plan.rows.push_back(s);
  }
  return plan;
}

// Decode rows fewer than the threads: each row's positions split over the threads in whole
// chunks (attention_scores_part, _values_part, _combine_chunks). A thread then reads a run of
// whole rows of the cache, which the hardware streams at the bus's rate, where a head at a time
// reads 256 bytes of rows 3 KB apart (GPT-2, one row, 900 positions cached, 12 layers of attention
// on 2 threads: 19-30 GB/s per head, 37-45 GB/s split, the bus 39-49). The same bits as a row
// computed alone: the chunking is the kernel's own.
void attend_decode_split(float* out, size_t out_stride, const float* q, size_t q_stride,
                         std::span<const AttentionRow> rows, int layer, const KvCache& cache,
                         const AttentionShape& shape, const KvRowFormat& format,
                         const Parallel& par) {
  const int n_rows = static_cast<int>(rows.size()), H = shape.n_head, D = shape.head_dim;
  const int n_parts = (par.n_threads + n_rows - 1) / n_rows;
  const int C = static_cast<int>(kAttentionChunk);
  const SplitPlan plan = plan_split(rows, shape);
  const std::vector<SplitRow>& plans = plan.rows;
  // Reused from layer to layer (the caller's thread owns them).
  thread_local std::vector<float> scores, partial, sums, part_max;
  ensure_size(scores, plan.n_scores);
  ensure_size(partial, plan.n_partial);
  ensure_size(sums, plan.n_sums);
  ensure_size(part_max, static_cast<size_t>(n_rows) * n_parts * H);
  // Part k of a row: chunks [n_chunks * k / n_parts, n_chunks * (k + 1) / n_parts).
  auto part_chunks = [&](int r, int k) {
    const int n = plans[r].n_chunks;
    return std::pair<int, int>{n * k / n_parts, n * (k + 1) / n_parts};
  };
  const int n_tasks = n_rows * n_parts;
  float* scores_data = scores.data();
  float* partial_data = partial.data();
  float* sums_data = sums.data();
  float* max_data = part_max.data();
  const int n_members = std::max(1, std::min(par.n_threads, n_tasks));
  TeamBarrier barrier(n_members);
  run_team(n_members, [&](int t, int nt) {
    std::vector<KvRun> runs;
    std::vector<float> row_max(H);
    const auto [task_begin, task_end] = static_share(n_tasks, t, nt);
    auto part_runs = [&](int r, int c0, int c1) {
      const SplitRow& row = plans[r];
      runs.clear();
      cache.range_runs(rows[r].seq, layer, row.first + c0 * C,
                       row.first + std::min(c1 * C, row.n_positions), &runs);
    };
    for (int task = task_begin; task < task_end; ++task) {
      const int r = task / n_parts, k = task % n_parts;
      const auto [c0, c1] = part_chunks(r, k);
      float* max_out = max_data + static_cast<size_t>(task) * H;
      std::fill(max_out, max_out + H, -INFINITY);
      if (c0 == c1) continue;
      part_runs(r, c0, c1);
      attention_scores_part(scores_data + plans[r].scores + static_cast<size_t>(c0) * C,
                            plans[r].n_positions, max_out, q + r * q_stride, runs, format, H,
                            shape.n_kv_head, D);
    }
    barrier.arrive_and_wait();  // every part's maxima stored
    for (int task = task_begin; task < task_end; ++task) {
      const int r = task / n_parts, k = task % n_parts;
      const auto [c0, c1] = part_chunks(r, k);
      if (c0 == c1) continue;
      for (int h = 0; h < H; ++h) {  // the largest score of the whole row: exact in any order
        row_max[h] = -INFINITY;
        for (int j = 0; j < n_parts; ++j)
          row_max[h] =
              std::max(row_max[h], max_data[(static_cast<size_t>(r) * n_parts + j) * H + h]);
      }
      part_runs(r, c0, c1);
      attention_values_part(partial_data + plans[r].partial + static_cast<size_t>(c0) * H * D,
                            sums_data + plans[r].sums + static_cast<size_t>(c0) * H,
                            scores_data + plans[r].scores + static_cast<size_t>(c0) * C,
                            plans[r].n_positions, row_max.data(), runs, format, H, shape.n_kv_head,
                            D);
    }
    barrier.arrive_and_wait();  // every part's partial sums stored
    for (int task = task_begin; task < task_end;
         ++task) {  // each part combines a share of the heads
      const int r = task / n_parts, k = task % n_parts;
      attention_combine_chunks(out + r * out_stride, partial_data + plans[r].partial,
                               sums_data + plans[r].sums, plans[r].n_chunks, H, D, H * k / n_parts,
                               H * (k + 1) / n_parts);
    }
  });
}

// How many rows from rows[r] on (before r_end, at most kAttentionRowTile) attend prefixes of
// the same sequence's positions: rows of one sequence that no sliding window cuts at the front.
int rows_together(std::span<const AttentionRow> rows, int r, int r_end, int sliding_window) {
  auto whole = [&](int i) { return sliding_window <= 0 || rows[i].pos + 1 <= sliding_window; };
  if (!whole(r)) return 1;
  int n = 1;
  while (n < kAttentionRowTile && r + n < r_end && rows[r + n].seq == rows[r].seq && whole(r + n))
    ++n;
  return n;
}

// Rows of one sequence (rows_together) through attention_rows_forward: the runs of the longest.
void attend_rows_together(float* out, size_t out_stride, const float* q, size_t q_stride,
                          std::span<const AttentionRow> rows, int layer, const KvCache& cache,
                          const AttentionShape& shape, const KvRowFormat& format, int head_begin,
                          int head_end, std::vector<KvRun>* runs) {
  int n_positions[kAttentionRowTile], n_max = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    n_positions[i] = rows[i].pos + 1;
    n_max = std::max(n_max, n_positions[i]);
  }
  runs->clear();
  cache.runs(rows[0].seq, layer, n_max, runs);
  attention_rows_forward(out, out_stride, q, q_stride, n_positions, static_cast<int>(rows.size()),
                         *runs, format, shape.n_head, shape.n_kv_head, shape.head_dim, head_begin,
                         head_end);
}

}  // namespace

KvWindow unrotated_view(const KvCache& cache, int sliding_window) {
  const KvWindow w = cache.window();
  if (w.enabled()) return w;
  return {sliding_window > 0 ? sliding_window : INT_MAX, 0};
}

void attend_rows(float* out, size_t out_stride, const float* q, size_t q_stride,
                 std::span<const AttentionRow> rows, int layer, const KvCache& cache,
                 const AttentionShape& shape, float* scratch, size_t scratch_stride,
                 const Parallel& par) {
  const int n_rows = static_cast<int>(rows.size());
  if (n_rows == 0) return;
  const KvRowFormat format = cache.row_format(layer);
  const bool windowed = cache.keys_unrotated();
  if (!windowed && n_rows < par.n_threads && attention_split_supported(format, shape.head_dim) &&
      one_row_per_sequence(rows)) {
    attend_decode_split(out, out_stride, q, q_stride, rows, layer, cache, shape, format, par);
    return;
  }
  if (!windowed && n_rows > 1 && one_row_per_sequence(rows)) {
    attend_decode_rows(out, out_stride, q, q_stride, rows, layer, cache, shape, format, par);
    return;
  }
  // A row alone in its sequence (decode) reads its cache from memory, so its rows are fetched
  // ahead; a prefill chunk's rows read positions just written or just read by the row before.
  std::vector<int> seqs;
  for (const AttentionRow& row : rows) seqs.push_back(row.seq);
  std::sort(seqs.begin(), seqs.end());
  auto alone = [&](int seq) {
    const auto [first, last] = std::equal_range(seqs.begin(), seqs.end(), seq);
    return last - first == 1;
  };
  const int n_blocks = (n_rows + kRowsPerTask - 1) / kRowsPerTask;
  // Heads go in groups sharing a key/value head (they read the same slice); when that leaves
  // fewer tasks than two per thread (decoding few sequences of a model with few KV heads),
  // every query head is its own group so that all threads work.
  int n_groups = shape.n_kv_head;
  if (n_groups * n_blocks < 2 * par.n_threads) n_groups = shape.n_head;
  const int n_tasks = n_groups * n_blocks;
  // A prefill chunk's rows of one sequence go up to four at a time (attention_rows.h): they
  // share each key and value read and run their chains side by side; the bits of each alone.
  const bool together = !windowed && attention_rows_supported(format, shape.head_dim);
  TaskCounter tasks;
  run_team(std::min(par.n_threads, n_tasks), [&](int t, int) {
    std::vector<KvRun> runs;
    WindowScratch window_scratch;
    float* my_scratch = scratch + static_cast<size_t>(t) * scratch_stride;
    for (int task = tasks.claim(); task < n_tasks; task = tasks.claim()) {
      const int g = task / n_blocks, block = task % n_blocks;
      const int head_begin = shape.n_head * g / n_groups;
      const int head_end = shape.n_head * (g + 1) / n_groups;
      const int r_end = std::min(n_rows, (block + 1) * kRowsPerTask);
      for (int r = block * kRowsPerTask; r < r_end; ++r) {
        if (together) {
          const int n = rows_together(rows, r, r_end, shape.sliding_window);
          if (n > 1) {
            attend_rows_together(out + r * out_stride, out_stride, q + r * q_stride, q_stride,
                                 rows.subspan(r, n), layer, cache, shape, format, head_begin,
                                 head_end, &runs);
            r += n - 1;
            continue;
          }
        }
        if (windowed) {
          attend_window_row(out + r * out_stride, q + r * q_stride, rows[r], layer, cache, shape,
                            format, head_begin, head_end, &window_scratch, &runs, my_scratch);
          continue;
        }
        runs.clear();
        cache.runs(rows[r].seq, layer, rows[r].pos + 1, &runs);
        const int n_positions = rows[r].pos + 1;
        if (shape.sliding_window > 0 && n_positions > shape.sliding_window)
          drop_leading_positions(runs, n_positions - shape.sliding_window, format.row_bytes);
        attention_heads_forward(out + r * out_stride, q + r * q_stride, runs, format, my_scratch,
                                shape.n_head, shape.n_kv_head, shape.head_dim, head_begin, head_end,
                                alone(rows[r].seq));
      }
    }
  });
}

}  // namespace kvlm
