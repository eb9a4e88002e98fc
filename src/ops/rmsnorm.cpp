#include "ops/rmsnorm.h"

#include <cmath>
#include <cstddef>

namespace kvlm {

void rmsnorm_forward(float* out, const float* x, const float* weight, int n_rows, int n_embd,
                     float eps) {
  for (int t = 0; t < n_rows; ++t) {
    const float* row = x + static_cast<size_t>(t) * n_embd;
    float* dst = out + static_cast<size_t>(t) * n_embd;
    float ss = 0.0f;
    for (int i = 0; i < n_embd; ++i) ss += row[i] * row[i];
    ss /= static_cast<float>(n_embd);
    ss += eps;
    const float r = 1.0f / std::sqrt(ss);
    for (int i = 0; i < n_embd; ++i) dst[i] = weight[i] * (r * row[i]);
  }
}

void rmsnorm_reference(float* out, const float* x, const float* weight, int n_rows, int n_embd,
                       float eps) {
  for (int t = 0; t < n_rows; ++t) {
    const float* row = x + static_cast<size_t>(t) * n_embd;
    float* dst = out + static_cast<size_t>(t) * n_embd;
    double ss = 0.0;
    for (int i = 0; i < n_embd; ++i) ss += static_cast<double>(row[i]) * row[i];
    const double r = 1.0 / std::sqrt(ss / n_embd + eps);
    for (int i = 0; i < n_embd; ++i) dst[i] = static_cast<float>(weight[i] * (r * row[i]));
  }
}

}  // namespace kvlm
