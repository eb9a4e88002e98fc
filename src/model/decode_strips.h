// Column strips (ops/weight_strips.h) attached to a model's matrices at load, shared by the
// architectures' loaders: each matrix that wants_weight_strips() gets a packed copy in `owned`,
// which matmul_forward then reads for prefill and decode (the same bits as the stored matrix).
#pragma once

#include <cstddef>
#include <vector>

#include "model/checkpoint.h"
#include "ops/weight_matrix.h"
#include "util/available_memory.h"

namespace kvlm {

// Whether strips of `strips_bytes` in all fit beside what else runs: at most three quarters of
// the `available` memory. The strips are anonymous memory; the stored matrices, mapped from
// the checkpoint, are read once to pack them and can then be dropped by the kernel (only an
// embedding's rows are read again), so a model whose strips do not fit would only thrash.
bool weight_strips_fit(size_t strips_bytes, size_t available);

// Packs strips for each matrix of `matrices` that wants them, on all of OpenMP's threads, when
// their bytes fit in `available` memory (weight_strips_fit); otherwise none, and every kernel
// reads the stored matrices (the same bits, slower).
void attach_weight_strips(const std::vector<WeightMatrix*>& matrices, OwnedTensors& owned,
                          size_t available = available_memory_bytes());

}  // namespace kvlm
