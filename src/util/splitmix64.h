// splitmix64 (Vigna), the one small mixing function kvlm uses wherever it needs a reproducible
// stream or hash of 64-bit words: seeding the sampler's RNG (generate/rng.h), the random test
// and demo weights (model/normal_rng.h), benchmark workloads, and the paged cache's block
// hashes. Written once here so every user gets the same bits on every platform.
#pragma once

#include <cstdint>

namespace kvlm {

inline constexpr uint64_t kSplitmixGamma = 0x9e3779b97f4a7c15ULL;  // 2^64 / golden ratio, odd

// splitmix64's output function: a bijection on 64-bit words that mixes every input bit.
inline uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// One step of splitmix64: advances *state by the gamma and returns the mixed state.
inline uint64_t splitmix64_next(uint64_t* state) {
  *state += kSplitmixGamma;
  return splitmix64_mix(*state);
}

}  // namespace kvlm
