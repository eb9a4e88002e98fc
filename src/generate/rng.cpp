#include "generate/rng.h"

namespace kvlm {

namespace {

uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

}  // namespace

uint64_t sequence_seed(uint64_t request_seed, size_t sequence_index) {
  // Index -> mix64(index * gamma + gamma) is a bijection (gamma is odd), and so is xoring the
  // request seed and mixing again: distinct indices of one request never share a stream.
  const uint64_t index_word =
      splitmix64_mix((static_cast<uint64_t>(sequence_index) + 1) * kSplitmixGamma);
  return splitmix64_mix(request_seed ^ index_word);
}

Rng::Rng(uint64_t seed) {
  // The xoshiro authors' recommended seeding: four splitmix64 outputs. They are distinct
  // (splitmix64 is a bijection of its counter), so the state is never all zero.
  uint64_t sm = seed;
  for (uint64_t& word : s_) word = splitmix64_next(&sm);
}

Rng Rng::from_state(const std::array<uint64_t, 4>& state) {
  Rng rng;
  rng.s_ = state;
  return rng;
}

uint64_t Rng::next_u64() {
  // xoshiro256** 1.0 (Blackman and Vigna, public domain reference xoshiro256starstar.c).
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

}  // namespace kvlm
