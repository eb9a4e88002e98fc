// Column strips (ops/weight_strips.h) attached to a model's matrices at load, shared by the
// architectures' loaders: each matrix that wants_weight_strips() gets a packed copy in `owned`,
// which matmul_forward then reads for prefill and decode (the same bits as the stored matrix).
#pragma once

#include <vector>

#include "model/checkpoint.h"
#include "ops/weight_matrix.h"

namespace kvlm {

// Packs strips for each matrix of `matrices` that wants them, on all of OpenMP's threads.
void attach_weight_strips(const std::vector<WeightMatrix*>& matrices, OwnedTensors& owned);

}  // namespace kvlm
