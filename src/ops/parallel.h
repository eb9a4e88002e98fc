// Parallelism settings passed explicitly to kernels (no global thread state). Kernels split
// work over independent outputs only, never inside one output's reduction, so results do not
// depend on n_threads.
#pragma once

namespace kvlm {

struct Parallel {
  int n_threads = 1;
};

}  // namespace kvlm
