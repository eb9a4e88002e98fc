// Elementwise activations.
#pragma once

#include <cstddef>

#include "ops/parallel.h"

namespace kvlm {

// GPT-2's gelu_new (tanh form): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in place.
// SIMD, dispatched at run time; each element's result depends only on its value.
void gelu_forward(float* x, size_t n);
// The same bits, split over par's threads when n is long enough to repay waking them (a batch
// of decode rows or a prefill; one decode row's 3,072 values stay on one thread).
void gelu_forward(float* x, size_t n, const Parallel& par);

// Scalar reference (std::tanh), to check the fast kernel against.
void gelu_reference(float* x, size_t n);

}  // namespace kvlm
