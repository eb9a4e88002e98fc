// Samplers, statistically: on a fixed small logits vector, the empirical frequencies of 200,000
// draws through the real chain must match the distribution that an independent double-precision
// reference (written here from the definitions) predicts after each sampler, by a chi-square
// goodness-of-fit test.
//
// Threshold: the chi-square critical value at p = 1e-4 for the degrees of freedom (number of
// tokens with non-zero expected probability, minus one), i.e. a correct sampler fails a given
// check once in 10,000 seeds. The seeds are fixed, so the test is deterministic. Tokens the
// reference gives zero probability must never be drawn. A power check shows that the test
// does reject a slightly wrong distribution.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "generate/sampler.h"

namespace kvlm {
namespace {

constexpr int kDraws = 200000;

// Critical values of the chi-square distribution at p = 1e-4, for 1..10 degrees of freedom
// (computed with the regularized upper incomplete gamma function; they match published tables).
constexpr double kCritical[] = {0,      15.137, 18.421, 21.108, 23.513, 25.745,
                                27.856, 29.878, 31.828, 33.720, 35.564};

const std::vector<float> kLogits = {1.0f, 2.0f, 0.5f, -1.0f, 1.5f, 0.0f, 2.5f, -0.5f};

// The reference: the documented chain, from the definitions, in double.
std::vector<double> reference(const SamplingParams& sp, const std::vector<TokenId>& prompt,
                              const std::vector<TokenId>& generated) {
  const size_t n = kLogits.size();
  std::vector<double> l(kLogits.begin(), kLogits.end());
  for (size_t i = 0; i < n; ++i) {
    const bool seen = std::count(prompt.begin(), prompt.end(), TokenId(i)) +
                          std::count(generated.begin(), generated.end(), TokenId(i)) >
                      0;
    if (seen) l[i] = l[i] < 0 ? l[i] * sp.repetition_penalty : l[i] / sp.repetition_penalty;
    const auto count = std::count(generated.begin(), generated.end(), TokenId(i));
    l[i] -= count * sp.frequency_penalty + (count > 0 ? sp.presence_penalty : 0.0);
  }
  std::vector<double> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = std::exp(l[i] / sp.temperature);
  auto normalize = [&] {
    const double z = std::accumulate(p.begin(), p.end(), 0.0);
    for (double& x : p) x /= z;
  };
  normalize();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
  if (sp.top_k > 0) {
    for (size_t r = sp.top_k; r < n; ++r) p[order[r]] = 0;
    normalize();
  }
  if (sp.top_p < 1) {
    double cumulative = 0;
    size_t r = 0;
    for (; r < n && cumulative < sp.top_p; ++r) cumulative += p[order[r]];
    for (; r < n; ++r) p[order[r]] = 0;
    normalize();
  }
  if (sp.min_p > 0) {
    const double cut = sp.min_p * *std::max_element(p.begin(), p.end());
    for (double& x : p) x = x < cut ? 0 : x;
    normalize();
  }
  return p;
}

std::vector<int> draw_counts(const SamplingParams& sp, const std::vector<TokenId>& prompt,
                             const std::vector<TokenId>& generated, uint64_t seed) {
  auto chain = SamplerChain::from_params(sp);
  EXPECT_TRUE(chain.is_ok()) << chain.message();
  Rng rng(seed);
  std::vector<int> counts(kLogits.size(), 0);
  for (int i = 0; i < kDraws; ++i) {
    auto t = chain->sample(kLogits, {prompt, generated}, rng);
    EXPECT_TRUE(t.is_ok());
    ++counts[*t];
  }
  return counts;
}

// Returns chi-square and its degrees of freedom; fails if a zero-probability token was drawn.
std::pair<double, int> chi_square(const std::vector<int>& counts,
                                  const std::vector<double>& expected) {
  double chi2 = 0;
  int categories = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (expected[i] == 0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " has probability 0 but was drawn";
      continue;
    }
    const double e = expected[i] * kDraws;
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
    ++categories;
  }
  return {chi2, categories - 1};
}

void check_distribution(const SamplingParams& sp, int expected_kept,
                        const std::vector<TokenId>& prompt = {},
                        const std::vector<TokenId>& generated = {}) {
  const std::vector<double> expected = reference(sp, prompt, generated);
  const std::vector<int> counts = draw_counts(sp, prompt, generated, /*seed=*/20240601);
  const auto [chi2, df] = chi_square(counts, expected);
  ASSERT_EQ(df + 1, expected_kept) << "the reference kept an unexpected number of tokens";
  ASSERT_GE(df, 1);
  EXPECT_LT(chi2, kCritical[df]) << "df " << df;
}

TEST(SamplerStatistics, PlainSoftmax) {
  check_distribution(SamplingParams{}, 8);
}

TEST(SamplerStatistics, Temperature) {
  SamplingParams cold;
  cold.temperature = 0.7f;
  check_distribution(cold, 8);
  SamplingParams hot;
  hot.temperature = 1.6f;
  check_distribution(hot, 8);
}

TEST(SamplerStatistics, TopK) {
  SamplingParams sp;
  sp.top_k = 3;
  check_distribution(sp, 3);
}

TEST(SamplerStatistics, TopP) {
  SamplingParams sp;
  sp.top_p = 0.8f;  // cumulative 0.40, 0.64, 0.79, 0.88: four tokens
  check_distribution(sp, 4);
}

TEST(SamplerStatistics, MinP) {
  SamplingParams sp;
  sp.min_p = 0.2f;  // cut at 0.2 * e^2.5: e^1 stays, e^0.5 goes
  check_distribution(sp, 4);
}

TEST(SamplerStatistics, FullChain) {
  SamplingParams sp;
  sp.repetition_penalty = 1.3f;
  sp.presence_penalty = 0.3f;
  sp.frequency_penalty = 0.2f;
  sp.temperature = 0.8f;
  sp.top_k = 6;
  sp.top_p = 0.9f;
  sp.min_p = 0.05f;
  check_distribution(sp, 5, /*prompt=*/{6, 3}, /*generated=*/{1, 1, 4});
}

TEST(SamplerStatistics, TheTestRejectsAWrongDistribution) {
  // Power: draws at temperature 1 tested against the temperature 0.95 distribution must fail.
  SamplingParams drawn;
  SamplingParams claimed;
  claimed.temperature = 0.95f;
  const std::vector<int> counts = draw_counts(drawn, {}, {}, 20240601);
  const auto [chi2, df] = chi_square(counts, reference(claimed, {}, {}));
  EXPECT_GT(chi2, kCritical[df]);
}

}  // namespace
}  // namespace kvlm
