// RMS normalisation over the last dimension (Llama's input_layernorm, post_attention_layernorm
// and final norm): out = weight * (x / sqrt(mean(x^2) + eps)). C = n_embd.
//
// Order per row (llama2.c's run.c rmsnorm, kept so that our greedy text matches its output):
//   ss = 0; for i: ss = ss + x[i] * x[i]; ss = ss / C; ss = ss + eps; r = 1 / sqrt(ss);
//   out[i] = weight[i] * (r * x[i])
// It depends only on the row, never on n_rows, so batching never changes a bit.
#pragma once

namespace kvlm {

// out [T, C] = rmsnorm(x [T, C]) * weight [C]. out may equal x.
void rmsnorm_forward(float* out, const float* x, const float* weight, int n_rows, int n_embd,
                     float eps);

// Scalar reference in double precision, for tests of the kernel above and its future SIMD forms.
void rmsnorm_reference(float* out, const float* x, const float* weight, int n_rows, int n_embd,
                       float eps);

}  // namespace kvlm
