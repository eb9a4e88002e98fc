// Causal attention of one query row over a sequence's cached keys and values.
//
// The cache may hold a sequence's positions in one contiguous run (contiguous cache) or in
// several runs (one per block of a paged cache); the kernel walks the runs in position order,
// and its reduction over positions is fixed by the positions alone (chunks of kAttentionChunk,
// below), so how the positions are split into runs, or a row's chunks over threads, never
// changes a bit of the result. Prefill and decode compute the same function, which is why
// cached and uncached logits are identical.
//
// Dimension letters: H = n_head query heads, G = n_kv_head key/value heads (each serves
// H / G query heads), D = head_dim, P = positions attended (the query's own included).
#pragma once

#include <cstddef>
#include <span>

#include "ops/kv_format.h"

namespace kvlm {

// A run of consecutive cached positions: rows of G * D values stored as the KvRowFormat given
// with the runs says (fp32, 16-bit, q8_0 or fp8), format.row_bytes apart.
struct KvRun {
  const std::byte* k = nullptr;  // [n_positions] rows of K
  const std::byte* v = nullptr;  // [n_positions] rows of V
  int n_positions = 0;
};
// A run over fp32 rows (tests, benchmarks).
inline KvRun f32_run(const float* k, const float* v, int n_positions) {
  return {reinterpret_cast<const std::byte*>(k), reinterpret_cast<const std::byte*>(v),
          n_positions};
}

// out [H * D] = softmax(q k^T / sqrt(D)) v for every head, over all positions of `runs`, whose
// rows are stored as `format` says and are widened to fp32 in registers (each value to the bits
// kv_decode_value gives). scratch must hold P floats. Heads are independent; positions are
// reduced in chunks of kAttentionChunk, in order. SIMD, dispatched at run time.
void attention_forward(float* out, const float* q, std::span<const KvRun> runs,
                       const KvRowFormat& format, float* scratch, int n_head, int n_kv_head,
                       int head_dim);

// The same for query heads [head_begin, head_end) only (out and q still point at head 0 of
// the row): lets a caller spread one row's heads over threads. Each head's result is the same
// bits whichever call computes it. fetch_ahead: prefetch each row a few positions before it is
// read, for rows in memory (a decode row); a prefill row reads rows just written or just read
// by its neighbours, in cache, where the prefetches only cost issue slots. Never changes a bit.
void attention_heads_forward(float* out, const float* q, std::span<const KvRun> runs,
                             const KvRowFormat& format, float* scratch, int n_head, int n_kv_head,
                             int head_dim, int head_begin, int head_end, bool fetch_ahead = true);

// The same heads in one pass over the positions (each position's keys, then values, for all of
// them read as one stretch of its row) where the stored type allows (f32, f16, bf16, q8_0;
// head_dim a whole number of vectors), else head by head: the bits attention_heads_forward
// gives. For rows whose cache nothing else reads at the same time (batched decode), where a head
// at a time reads a few cache lines of every row per pass. scratch must hold (head_end -
// head_begin) x (P + D) floats.
void attention_heads_together_forward(float* out, const float* q, std::span<const KvRun> runs,
                                      const KvRowFormat& format, float* scratch, int n_head,
                                      int n_kv_head, int head_dim, int head_begin, int head_end);

// Positions are reduced in chunks of this many, in order: each chunk's softmax terms and each
// output element's weighted sum of its values are summed from zero, then the chunks' sums are
// added in order from zero. Fixed, so a row's bits never depend on how its positions are split
// over runs or threads, only on the positions themselves: what lets a decode row be split by
// positions over threads (attention_split.h) and still match prefill bit for bit.
inline constexpr size_t kAttentionChunk = 32;

// Scalar reference (double precision over kv_decode_value's values), to check the fast kernel
// against.
void attention_reference(float* out, const float* q, std::span<const KvRun> runs,
                         const KvRowFormat& format, int n_head, int n_kv_head, int head_dim);

}  // namespace kvlm
