// The kernel variants behind matmul_forward, exposed so tests can check that they give the
// same bits and benchmarks can time each (not part of the ops API).
#pragma once

#include "ops/matmul.h"

namespace kvlm {

enum class MatmulPath {
  kAuto,       // what matmul_forward does: the strips where w has them, else by the row count
  kRowStream,  // kInOut: streams weight rows once, accumulators in L1 (decode, few rows)
  kTiled,      // kInOut: cache-sized blocks of packed rows and weight panels, register tiles
               // whose fma chains continue from one reduction block to the next (prefill)
};

// matmul_forward with the variant forced. For kOutIn weights kRowStream means the dot-product
// tiles (its decode kernel) and kTiled the lane-class register tiles (its prefill kernel).
void matmul_forward_path(float* out, const float* x, const WeightMatrix& w, const float* bias,
                         int n_rows, const Parallel& par, MatmulPath path);

// The block-quantized kernels (routed in matmul_quant.cpp): w.dtype Q8_0, Q5_0, Q4_0, Q4_K or
// Q6_K, layout kOutIn, n_in a whole number of blocks. matmul_forward calls it for those types.
void matmul_quant_forward(float* out, const float* x, const WeightMatrix& w, const float* bias,
                          int n_rows, const Parallel& par);

}  // namespace kvlm
