// One decode row's attention split by positions over threads, in three steps that give
// attention_forward's bits (src/model/attend_rows.cpp runs them when a decode step has fewer
// rows than threads). A part is a whole number of attention's chunks (kAttentionChunk, in
// attention.h) from the row's first position, the last one possibly short; all heads of the row
// at once, each of the part's cached rows read as one stretch, so threads stream disjoint runs
// of whole rows instead of a head's few cache lines of every row.
#pragma once

#include <cstddef>
#include <span>

#include "ops/attention.h"

namespace kvlm {

// Whether a row stored as `format` can be split (f32, f16, bf16, q8_0 rows; head_dim a whole
// number of the running target's vectors). Otherwise attention_heads_forward per head.
bool attention_split_supported(const KvRowFormat& format, int head_dim);

// 1. scores[h * stride + j] = q.k / sqrt(D) of head h and the part's j-th position (the
// positions of `runs`), and max_out[h] the largest of them.
void attention_scores_part(float* scores, size_t stride, float* max_out, const float* q,
                           std::span<const KvRun> runs, const KvRowFormat& format, int n_head,
                           int n_kv_head, int head_dim);

// 2. Given each head's largest score over the whole row: the part's scores become their
// softmax terms exp(s - max), and for each chunk c of the part, chunk_sums[c * H + h] their sum
// and partial[(c * H + h) * D + d] the weighted sum of its values from zero.
void attention_values_part(float* partial, float* chunk_sums, float* scores, size_t stride,
                           const float* max_score, std::span<const KvRun> runs,
                           const KvRowFormat& format, int n_head, int n_kv_head, int head_dim);

// 3. out[h * D + d] = (partials summed over the row's chunks in order) / (chunk sums likewise),
// for heads [head_begin, head_end) (out points at head 0). Like 1 and 2, for a head_dim that
// attention_split_supported takes (vectors across a head's dimensions).
void attention_combine_chunks(float* out, const float* partial, const float* chunk_sums,
                              int n_chunks, int n_head, int head_dim, int head_begin, int head_end);

}  // namespace kvlm
