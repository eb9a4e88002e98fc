// Rotary position embeddings (RoPE) in llama2.c's layout: within each head, the pair of
// elements (2i, 2i+1) is rotated by the angle pos * inv_freq[i]. Hugging Face checkpoints
// store q_proj and k_proj with the rows of each head permuted so that their code can rotate
// the halves (i, i + D/2) instead; kvlm undoes that permutation when it loads them, so this
// one kernel serves both formats. The cache keeps keys after rotation.
//
// Dimension letters: H = query heads, G = key/value heads, D = head_dim (even).
#pragma once

#include <vector>

namespace kvlm {

// inv_freq [D/2]: theta^(-2i/D), computed as run.c does (1 / powf(theta, 2i / (float)D)).
void rope_frequencies(float* inv_freq, int head_dim, float theta);

// Rotates q [H * D] and k [G * D] of one token at position `pos`, in place. k may be null.
// Per pair: v0' = v0 cos - v1 sin, v1' = v0 sin + v1 cos, angle = (float)pos * inv_freq[i],
// cos and sin taken in float (cosf, sinf) as run.c does.
void rope_forward(float* q, float* k, const float* inv_freq, int pos, int n_head, int n_kv_head,
                  int head_dim);

// cos and sin of every (position, pair) for positions [0, n_positions): the very values
// rope_forward computes (cosf((float)pos * inv_freq[i])), kept for the sliding window, whose keys
// are rotated to their in-window position each time a row reads them (positions < W only).
struct RopeTable {
  int n_positions = 0;
  int half = 0;            // D / 2
  std::vector<float> cos;  // [n_positions, D/2]
  std::vector<float> sin;  // [n_positions, D/2]
};
RopeTable rope_table(const float* inv_freq, int head_dim, int n_positions);

// out = in rotated to position `pos` (pos < table.n_positions), for heads [head_begin, head_end)
// of a row of n_heads * D values (other heads of `out` untouched). Bitwise what rope_forward
// does to a key at `pos`.
void rope_rotate_heads(float* out, const float* in, const RopeTable& table, int pos, int head_begin,
                       int head_end, int head_dim);

// Scalar reference in double precision (angles, cos and sin in double), for tests.
void rope_reference(float* q, float* k, const float* inv_freq, int pos, int n_head, int n_kv_head,
                    int head_dim);

}  // namespace kvlm
