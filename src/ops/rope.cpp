#include "ops/rope.h"

#include <cmath>
#include <cstddef>

namespace kvlm {

void rope_frequencies(float* inv_freq, int head_dim, float theta) {
  for (int i = 0; i < head_dim / 2; ++i)
    inv_freq[i] = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(head_dim));
}

namespace {

template <typename Real>
void rotate_heads(float* x, int n_heads, int head_dim, int i, Real c, Real s) {
  for (int h = 0; h < n_heads; ++h) {
    float* pair = x + static_cast<size_t>(h) * head_dim + 2 * i;
    const Real v0 = pair[0], v1 = pair[1];
    pair[0] = static_cast<float>(v0 * c - v1 * s);
    pair[1] = static_cast<float>(v0 * s + v1 * c);
  }
}

}  // namespace

void rope_forward(float* q, float* k, const float* inv_freq, int pos, int n_head, int n_kv_head,
                  int head_dim) {
  for (int i = 0; i < head_dim / 2; ++i) {
    const float angle = static_cast<float>(pos) * inv_freq[i];
    const float c = std::cos(angle), s = std::sin(angle);
    rotate_heads<float>(q, n_head, head_dim, i, c, s);
    if (k != nullptr) rotate_heads<float>(k, n_kv_head, head_dim, i, c, s);
  }
}

void rope_reference(float* q, float* k, const float* inv_freq, int pos, int n_head, int n_kv_head,
                    int head_dim) {
  for (int i = 0; i < head_dim / 2; ++i) {
    const double angle = static_cast<double>(pos) * inv_freq[i];
    const double c = std::cos(angle), s = std::sin(angle);
    rotate_heads<double>(q, n_head, head_dim, i, c, s);
    if (k != nullptr) rotate_heads<double>(k, n_kv_head, head_dim, i, c, s);
  }
}

}  // namespace kvlm
