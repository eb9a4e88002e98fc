// Parallelism settings passed explicitly to kernels (no global thread state). Kernels split
// work over independent outputs only, never inside one output's reduction, so results do not
// depend on n_threads.
#pragma once

#include <algorithm>
#include <cstddef>

#include "ops/thread_team.h"

namespace kvlm {

struct Parallel {
  int n_threads = 1;
};

// The shortest share of an elementwise pass (an activation) a thread is woken for: 8,192 values
// take a few microseconds, about what waking a thread costs.
inline constexpr size_t kMinElementwiseShare = 8192;

// Calls f(begin, end) once per thread on its share of [0, n): contiguous, in whole multiples of
// `align` (the last share ends at n), each at least `min_share` long where n allows (below that
// a share costs less than waking a thread), so short arrays stay on the calling thread. For
// elementwise work, whose results cannot depend on the split.
template <class F>
void for_each_share(size_t n, size_t align, size_t min_share, const Parallel& par, F&& f) {
  const size_t blocks = (n + align - 1) / align;
  const size_t most =
      std::min<size_t>(std::max(par.n_threads, 1), n / std::max<size_t>(min_share, 1));
  const int n_threads = static_cast<int>(std::clamp<size_t>(most, 1, std::max<size_t>(blocks, 1)));
  if (n_threads == 1) {
    f(size_t{0}, n);
    return;
  }
  run_team(n_threads, [&](int t, int nt) {
    const size_t b0 = blocks * t / nt, b1 = blocks * (t + 1) / nt;
    f(std::min(n, b0 * align), std::min(n, b1 * align));
  });
}

}  // namespace kvlm
