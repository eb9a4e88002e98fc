// The random number generator that sampling draws from: xoshiro256** seeded through
// splitmix64, written here (not std::mt19937 + std::uniform_real_distribution) so that a seed
// gives the same tokens with every compiler and standard library. There is no global
// generator: each sequence owns an Rng seeded with sequence_seed(request seed, its index), so
// its draws do not depend on which other sequences share the batch or on the thread count.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "util/splitmix64.h"

namespace kvlm {

// The seed of sequence `sequence_index` of a request seeded with `request_seed`. For a fixed
// request seed, distinct indices give distinct seeds (the map is a bijection of the index).
uint64_t sequence_seed(uint64_t request_seed, size_t sequence_index);

class Rng {
 public:
  explicit Rng(uint64_t seed);
  // Raw state, for tests that pin the reference outputs; must not be all zero.
  static Rng from_state(const std::array<uint64_t, 4>& state);

  uint64_t next_u64();
  // Uniform in [0, 1): 53 random bits for the double, 24 for the float.
  double uniform01() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  float uniform01f() { return static_cast<float>(next_u64() >> 40) * 0x1.0p-24f; }

  const std::array<uint64_t, 4>& state() const { return s_; }

 private:
  Rng() = default;
  std::array<uint64_t, 4> s_{};  // xoshiro256** state
};

}  // namespace kvlm
