// Attention for every new row of a forward step, spread over threads in an order that keeps
// each key/value head's slice of the cache in the core's own cache while it is reused.
//
// A row attends over all its sequence's positions, so a row visiting every head reads
// n_positions x n_kv_head x head_dim x 2 floats (3 MB for GPT-2 at 512 positions): more than a
// core's L2, so row after row would stream the whole cache from L3. Instead, a task is one
// group of heads for a block of consecutive rows: the group's slice (P x head_dim x 2 floats
// per key/value head) is read from L3 once and reused by every row of the block from L2.
//
// A decode step of several sequences (no two rows of one sequence) shares nothing between rows:
// there a task is one row and a slice of its heads, read position by position as one stretch of
// each row (attention_heads_together_forward).
//
// How rows and heads are grouped into tasks never changes a bit: each (row, head) gets the bits
// of attention_heads_forward on the same inputs, whichever task and kernel runs it.
#pragma once

#include <span>

#include "kv/kv_cache.h"
#include "ops/parallel.h"
#include "ops/rope.h"

namespace kvlm {

// One new row: the sequence it belongs to and its position (it attends over [0, pos]).
struct AttentionRow {
  int seq = 0;
  int pos = 0;
};

struct AttentionShape {
  int n_head = 0;
  int n_kv_head = 0;
  int head_dim = 0;
  int sliding_window = 0;  // > 0: a row attends over its last sliding_window positions only
  // Keys stored before rotation (KvCache::keys_unrotated(): a cache window, or q8_0_kc): each
  // row rotates the keys of its view (unrotated_view) to their in-view positions with this table
  // (>= the view's positions). Null for a model without RoPE (GPT-2): keys are only widened.
  const RopeTable* window_rope = nullptr;
};

// The view a row reads when the cache stores keys unrotated: the cache's sinks + window, else
// every position at its own (with a model's own sliding window, Mistral's, its last
// sliding_window positions, renumbered from 0: the same relative positions).
KvWindow unrotated_view(const KvCache& cache, int sliding_window);

// out[r * out_stride + h * head_dim ...] = attention of row r's query (q[r * q_stride ...]) over
// its sequence's cached positions in `layer`, for every row and head. With a cache window, a
// row attends over its view instead (KvCache::window(): the sinks and its last W - S positions,
// keys rotated to positions 0 .. view - 1 as they are read; its query must already be rotated
// to the view's last position). scratch holds
// par.n_threads x scratch_stride floats, scratch_stride >= the longest row's positions.
void attend_rows(float* out, size_t out_stride, const float* q, size_t q_stride,
                 std::span<const AttentionRow> rows, int layer, const KvCache& cache,
                 const AttentionShape& shape, float* scratch, size_t scratch_stride,
                 const Parallel& par);

}  // namespace kvlm
