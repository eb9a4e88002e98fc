#include "model/attend_rows.h"

#include <omp.h>

#include <algorithm>
#include <vector>

#include "ops/attention.h"

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

}  // namespace

void attend_rows(float* out, size_t out_stride, const float* q, size_t q_stride,
                 std::span<const AttentionRow> rows, int layer, const KvCache& cache,
                 const AttentionShape& shape, float* scratch, size_t scratch_stride,
                 const Parallel& par) {
  const int n_rows = static_cast<int>(rows.size());
  if (n_rows == 0) return;
  const KvRowFormat format = cache.row_format(layer);
  const int n_blocks = (n_rows + kRowsPerTask - 1) / kRowsPerTask;
  // Heads go in groups sharing a key/value head (they read the same slice); when that leaves
  // fewer tasks than two per thread (decoding few sequences of a model with few KV heads),
  // every query head is its own group so that all threads work.
  int n_groups = shape.n_kv_head;
  if (n_groups * n_blocks < 2 * par.n_threads) n_groups = shape.n_head;
  const int n_tasks = n_groups * n_blocks;
#pragma omp parallel num_threads(std::max(1, std::min(par.n_threads, n_tasks)))
  {
    std::vector<KvRun> runs;
    float* my_scratch = scratch + static_cast<size_t>(omp_get_thread_num()) * scratch_stride;
#pragma omp for schedule(dynamic)
    for (int task = 0; task < n_tasks; ++task) {
      const int g = task / n_blocks, block = task % n_blocks;
      const int head_begin = shape.n_head * g / n_groups;
      const int head_end = shape.n_head * (g + 1) / n_groups;
      const int r_end = std::min(n_rows, (block + 1) * kRowsPerTask);
      for (int r = block * kRowsPerTask; r < r_end; ++r) {
        runs.clear();
        cache.runs(rows[r].seq, layer, rows[r].pos + 1, &runs);
        const int n_positions = rows[r].pos + 1;
        if (shape.sliding_window > 0 && n_positions > shape.sliding_window)
          drop_leading_positions(runs, n_positions - shape.sliding_window, format.row_bytes);
        attention_heads_forward(out + r * out_stride, q + r * q_stride, runs, format, my_scratch,
                                shape.n_head, shape.n_kv_head, shape.head_dim, head_begin,
                                head_end);
      }
    }
  }
}

}  // namespace kvlm
