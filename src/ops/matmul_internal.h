// Kernel variants behind matmul_forward's dispatch (not part of the ops API).
#pragma once

#include "ops/matmul.h"

namespace kvlm {

void matmul_portable(float* out, const float* x, const WeightMatrix& w, const float* bias,
                     int n_rows, const Parallel& par);

}  // namespace kvlm
