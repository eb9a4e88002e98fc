// Layer normalisation over the last dimension (GPT-2's ln_1, ln_2, ln_f). C = n_embd.
#pragma once

namespace kvlm {

// out [T, C] = (x - mean) / sqrt(var + eps) * weight + bias, per row. out may equal x.
// SIMD, dispatched at run time; each row's result depends only on that row.
void layernorm_forward(float* out, const float* x, const float* weight, const float* bias,
                       int n_rows, int n_embd, float eps);

// Scalar reference (double precision), to check the fast kernel against.
void layernorm_reference(float* out, const float* x, const float* weight, const float* bias,
                         int n_rows, int n_embd, float eps);

}  // namespace kvlm
