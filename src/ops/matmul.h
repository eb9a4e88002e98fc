// Matrix products: out = x @ W (+ bias), for prefill (many rows) and decode (one row per
// sequence) alike.
//
// Exactness contract (the engine's bitwise guarantees rest on it): each output element is
// reduced over n_in in an order that depends only on n_in and the weight layout, never on
// n_rows, on which row of the batch it is, on the column block, or on the thread count. So a
// token's logits are the same whether it is computed in a prefill of 500 rows, in a decode
// step of one, or next to other sequences.
//
// Dimension letters: T rows (tokens), I = n_in, O = n_out.
#pragma once

#include "ops/parallel.h"
#include "ops/weight_matrix.h"

namespace kvlm {

// out [T, O] = x [T, I] @ W + bias [O] (bias may be null). Dispatches to the fastest kernel
// for this machine.
void matmul_forward(float* out, const float* x, const WeightMatrix& w, const float* bias,
                    int n_rows, const Parallel& par);

// Scalar reference: the plain definition, used to check the fast kernels.
void matmul_reference(float* out, const float* x, const WeightMatrix& w, const float* bias,
                      int n_rows);

}  // namespace kvlm
