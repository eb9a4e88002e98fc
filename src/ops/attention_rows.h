// Several query rows of one sequence attending prefixes of the same cached positions (a prefill
// chunk's rows), a few rows at a time per head: the rows share each key and value row read, and
// their chains run side by side (a row alone runs one fma chain per element of a head's values,
// which waits on the fma latency; four rows keep four times as many in flight). Each row gets
// the bits attention_heads_forward gives it alone: every (row, head, position) is computed with
// the same operations in the same order (attention.h's chunks, Dot4's lane sums), only
// interleaved with other rows'.
#pragma once

#include <cstddef>
#include <span>

#include "ops/attention.h"

namespace kvlm {

// Rows computed together (a caller hands over up to this many at a time).
inline constexpr int kAttentionRowTile = 4;

// Whether rows stored as `format` take this path (f32, f16, bf16 rows; head_dim a whole number
// of the running target's vectors). Otherwise attention_heads_forward row by row.
bool attention_rows_supported(const KvRowFormat& format, int head_dim);

// For rows j < n_rows (at most kAttentionRowTile): out + j * out_stride [H * D] = row j's
// attention (query q + j * q_stride) over the first n_positions[j] positions of `runs`, heads
// [head_begin, head_end) (out and q point at head 0 of each row). The same bits as
// attention_heads_forward of each row over its own positions.
void attention_rows_forward(float* out, size_t out_stride, const float* q, size_t q_stride,
                            const int* n_positions, int n_rows, std::span<const KvRun> runs,
                            const KvRowFormat& format, int n_head, int n_kv_head, int head_dim,
                            int head_begin, int head_end);

}  // namespace kvlm
