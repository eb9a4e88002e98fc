// NormalRng: seeded normal samples for the random test and demo models (splitmix64 +
// Box-Muller), our own so the weights are the same on every platform and standard library.
#pragma once

#include <cmath>
#include <cstdint>

#include "util/splitmix64.h"

namespace kvlm {

class NormalRng {
 public:
  explicit NormalRng(uint64_t seed) : state_(seed) {}
  uint64_t next() { return splitmix64_next(&state_); }
  double uniform() { return ((next() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
  float normal(float stddev) {
    const double u1 = uniform(), u2 = uniform();
    return static_cast<float>(stddev * std::sqrt(-2.0 * std::log(u1)) *
                              std::cos(6.283185307179586 * u2));
  }

 private:
  uint64_t state_;
};

}  // namespace kvlm
