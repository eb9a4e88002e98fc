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

RopeTable rope_table(const float* inv_freq, int head_dim, int n_positions) {
  RopeTable t;
  t.n_positions = n_positions;
  t.half = head_dim / 2;
  t.cos.resize(static_cast<size_t>(n_positions) * t.half);
  t.sin.resize(t.cos.size());
  for (int pos = 0; pos < n_positions; ++pos)
    for (int i = 0; i < t.half; ++i) {
      const float angle = static_cast<float>(pos) * inv_freq[i];
      t.cos[static_cast<size_t>(pos) * t.half + i] = std::cos(angle);
      t.sin[static_cast<size_t>(pos) * t.half + i] = std::sin(angle);
    }
  return t;
}

void rope_rotate_heads(float* out, const float* in, const RopeTable& table, int pos, int head_begin,
                       int head_end, int head_dim) {
  const float* c = table.cos.data() + static_cast<size_t>(pos) * table.half;
  const float* s = table.sin.data() + static_cast<size_t>(pos) * table.half;
  for (int h = head_begin; h < head_end; ++h) {
    const size_t base = static_cast<size_t>(h) * head_dim;
    for (int i = 0; i < table.half; ++i) {
      // The expressions of rotate_heads<float>, so the bits match rope_forward's.
      const float v0 = in[base + 2 * i], v1 = in[base + 2 * i + 1];
      out[base + 2 * i] = v0 * c[i] - v1 * s[i];
      out[base + 2 * i + 1] = v0 * s[i] + v1 * c[i];
    }
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
