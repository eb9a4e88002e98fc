#include "model/decode_strips.h"

#include <omp.h>

#include "ops/weight_strips.h"

namespace kvlm {

void attach_weight_strips(const std::vector<WeightMatrix*>& matrices, OwnedTensors& owned) {
  const int threads = omp_get_max_threads();
  for (WeightMatrix* m : matrices)
    if (wants_weight_strips(*m)) {
      void* strips = owned.allocate(weight_strips_bytes(*m));
      pack_weight_strips(strips, *m, threads);
      m->strips = strips;
    }
}

}  // namespace kvlm
