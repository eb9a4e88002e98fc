// SwiGLU, the gated feed-forward activation of the Llama family:
//   out = silu(gate) * up, silu(g) = g * sigmoid(g)
// where gate = x @ gate_proj (w1) and up = x @ up_proj (w3). Elementwise, so it never depends
// on how rows are batched.
#pragma once

#include <cstddef>

#include "ops/parallel.h"

namespace kvlm {

// out [n] = (gate * (1 / (1 + exp(-gate)))) * up, in float in that order (run.c's). out may
// equal gate or up.
void swiglu_forward(float* out, const float* gate, const float* up, size_t n);
// The same bits, split over par's threads when n is long enough to repay waking them.
void swiglu_forward(float* out, const float* gate, const float* up, size_t n, const Parallel& par);

// Scalar reference in double precision, for tests.
void swiglu_reference(float* out, const float* gate, const float* up, size_t n);

}  // namespace kvlm
