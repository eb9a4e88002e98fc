#include "ops/swiglu.h"

#include <cmath>

namespace kvlm {

void swiglu_forward(float* out, const float* gate, const float* up, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    float g = gate[i];
    g *= 1.0f / (1.0f + std::exp(-g));
    out[i] = g * up[i];
  }
}

void swiglu_forward(float* out, const float* gate, const float* up, size_t n, const Parallel& par) {
  for_each_share(n, 64, kMinElementwiseShare, par, [&](size_t begin, size_t end) {
    swiglu_forward(out + begin, gate + begin, up + begin, end - begin);
  });
}

void swiglu_reference(float* out, const float* gate, const float* up, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const double g = gate[i];
    out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

}  // namespace kvlm
