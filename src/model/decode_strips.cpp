#include "model/decode_strips.h"

#include <omp.h>

#include "ops/weight_strips.h"
#include "util/file_pages.h"

namespace kvlm {

bool weight_strips_fit(size_t strips_bytes, size_t available) {
  return strips_bytes <= available / 4 * 3;
}

void attach_weight_strips(const std::vector<WeightMatrix*>& matrices, OwnedTensors& owned,
                          size_t available) {
  size_t total = 0;
  for (const WeightMatrix* m : matrices)
    if (wants_weight_strips(*m)) total += weight_strips_bytes(*m);
  if (total == 0 || !weight_strips_fit(total, available)) return;
  const int threads = omp_get_max_threads();
  const FileMappings files = FileMappings::current();
  for (WeightMatrix* m : matrices)
    if (wants_weight_strips(*m)) {
      void* strips = owned.allocate(weight_strips_bytes(*m));
      pack_weight_strips(strips, *m, threads);
      m->strips = strips;
      // No kernel reads the stored matrix now (an embedding's lookups, a few rows, fault theirs
      // back): where it is the checkpoint's mapped bytes, they leave the resident set.
      files.drop_pages(m->data, m->n_bytes());
    }
}

}  // namespace kvlm
