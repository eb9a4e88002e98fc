#include "ops/attention.h"

#include <cmath>

namespace kvlm {

void attention_forward(float* out, const float* q, std::span<const KvRun> runs, float* scratch,
                       int n_head, int n_kv_head, int head_dim) {
  const int kv_dim = n_kv_head * head_dim;
  const int group = n_head / n_kv_head;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  for (int h = 0; h < n_head; ++h) {
    const float* qh = q + static_cast<size_t>(h) * head_dim;
    const int kv_offset = (h / group) * head_dim;
    // Scores q.k / sqrt(D), and their maximum for a stable softmax.
    float max_score = -INFINITY;
    int p = 0;
    for (const KvRun& run : runs) {
      for (int j = 0; j < run.n_positions; ++j, ++p) {
        const float* k = run.k + static_cast<size_t>(j) * kv_dim + kv_offset;
        float dot = 0.0f;
        for (int d = 0; d < head_dim; ++d) dot += qh[d] * k[d];
        scratch[p] = dot * scale;
        if (scratch[p] > max_score) max_score = scratch[p];
      }
    }
    const int n_positions = p;
    float sum = 0.0f;
    for (int j = 0; j < n_positions; ++j) {
      scratch[j] = std::exp(scratch[j] - max_score);
      sum += scratch[j];
    }
    // Weighted sum of values, positions in order.
    float* oh = out + static_cast<size_t>(h) * head_dim;
    for (int d = 0; d < head_dim; ++d) oh[d] = 0.0f;
    p = 0;
    for (const KvRun& run : runs) {
      for (int j = 0; j < run.n_positions; ++j, ++p) {
        const float* v = run.v + static_cast<size_t>(j) * kv_dim + kv_offset;
        const float weight = scratch[p];
        for (int d = 0; d < head_dim; ++d) oh[d] += weight * v[d];
      }
    }
    const float inv_sum = 1.0f / sum;
    for (int d = 0; d < head_dim; ++d) oh[d] *= inv_sum;
  }
}

}  // namespace kvlm
