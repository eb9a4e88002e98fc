#include "ops/activation.h"

#include <cmath>

namespace kvlm {

void gelu_forward(float* x, size_t n) {
  const float kSqrt2OverPi = 0.7978845608028654f;
  for (size_t i = 0; i < n; ++i) {
    const float v = x[i];
    x[i] = 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * (v + 0.044715f * v * v * v)));
  }
}

}  // namespace kvlm
