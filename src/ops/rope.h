// Rotary position embeddings (RoPE) in llama2.c's layout: within each head, the pair of
// elements (2i, 2i+1) is rotated by the angle pos * inv_freq[i]. Hugging Face checkpoints
// store q_proj and k_proj with the rows of each head permuted so that their code can rotate
// the halves (i, i + D/2) instead; kvlm undoes that permutation when it loads them, so this
// one kernel serves both formats. The cache keeps keys after rotation.
//
// Dimension letters: H = query heads, G = key/value heads, D = head_dim (even).
#pragma once

namespace kvlm {

// inv_freq [D/2]: theta^(-2i/D), computed as run.c does (1 / powf(theta, 2i / (float)D)).
void rope_frequencies(float* inv_freq, int head_dim, float theta);

// Rotates q [H * D] and k [G * D] of one token at position `pos`, in place. k may be null.
// Per pair: v0' = v0 cos - v1 sin, v1' = v0 sin + v1 cos, angle = (float)pos * inv_freq[i],
// cos and sin taken in float (cosf, sinf) as run.c does.
void rope_forward(float* q, float* k, const float* inv_freq, int pos, int n_head, int n_kv_head,
                  int head_dim);

// Scalar reference in double precision (angles, cos and sin in double), for tests.
void rope_reference(float* q, float* k, const float* inv_freq, int pos, int n_head, int n_kv_head,
                    int head_dim);

}  // namespace kvlm
