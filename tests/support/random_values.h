// Random test inputs drawn from the caller's engine, so a test's values follow from its seed.
#pragma once

#include <random>
#include <vector>

namespace kvlm::test {

// n values from a normal distribution of mean 0 and the given standard deviation.
inline std::vector<float> random_normals(size_t n, std::mt19937& rng, float stddev = 1.0f) {
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> v(n);
  for (float& f : v) f = normal(rng);
  return v;
}

}  // namespace kvlm::test
