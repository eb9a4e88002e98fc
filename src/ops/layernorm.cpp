#include "ops/layernorm.h"

#include <cmath>

namespace kvlm {

void layernorm_forward(float* out, const float* x, const float* weight, const float* bias,
                       int n_rows, int n_embd, float eps) {
  for (int t = 0; t < n_rows; ++t) {
    const float* row = x + static_cast<size_t>(t) * n_embd;
    float* dst = out + static_cast<size_t>(t) * n_embd;
    float sum = 0.0f;
    for (int i = 0; i < n_embd; ++i) sum += row[i];
    const float mean = sum / n_embd;
    float sq = 0.0f;
    for (int i = 0; i < n_embd; ++i) {
      const float d = row[i] - mean;
      sq += d * d;
    }
    const float rstd = 1.0f / std::sqrt(sq / n_embd + eps);
    for (int i = 0; i < n_embd; ++i) dst[i] = (row[i] - mean) * rstd * weight[i] + bias[i];
  }
}

}  // namespace kvlm
