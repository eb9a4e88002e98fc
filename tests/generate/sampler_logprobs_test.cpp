// Log-probabilities for --logprobs: exact values on a known distribution, the top-N list against
// a full sort, and errors.
#include "generate/sampler_logprobs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace kvlm {
namespace {

TEST(LogSoftmax, RecoversLogProbabilities) {
  // Logits shifted by a constant: log-softmax removes the shift.
  const std::vector<float> logits = {std::log(0.1f) + 7, std::log(0.2f) + 7, std::log(0.3f) + 7,
                                     std::log(0.4f) + 7};
  const std::vector<float> lp = log_softmax(logits);
  const double expected[] = {std::log(0.1), std::log(0.2), std::log(0.3), std::log(0.4)};
  for (size_t i = 0; i < lp.size(); ++i) EXPECT_NEAR(lp[i], expected[i], 2e-6);
}

TEST(LogSoftmax, LargeLogitsDoNotOverflow) {
  const std::vector<float> lp = log_softmax(std::vector<float>{1000.0f, 1000.0f, -1e30f});
  EXPECT_NEAR(lp[0], -std::log(2.0), 1e-6);
  EXPECT_NEAR(lp[1], -std::log(2.0), 1e-6);
  EXPECT_LT(lp[2], -1e29f);
}

TEST(TokenLogprobs, ChosenAndTopAlternatives) {
  const std::vector<float> logits = {std::log(0.1f), std::log(0.2f), std::log(0.3f),
                                     std::log(0.4f)};
  auto info = token_logprobs(logits, 1, 2);
  ASSERT_TRUE(info.is_ok()) << info.message();
  EXPECT_EQ(info->chosen.id, 1);
  EXPECT_NEAR(info->chosen.logprob, std::log(0.2), 1e-6);
  ASSERT_EQ(info->top.size(), 2u);
  EXPECT_EQ(info->top[0].id, 3);
  EXPECT_NEAR(info->top[0].logprob, std::log(0.4), 1e-6);
  EXPECT_EQ(info->top[1].id, 2);
  EXPECT_NEAR(info->top[1].logprob, std::log(0.3), 1e-6);

  auto none = token_logprobs(logits, 0, 0);
  ASSERT_TRUE(none.is_ok());
  EXPECT_TRUE(none->top.empty());
  auto capped = token_logprobs(logits, 0, 100);
  ASSERT_TRUE(capped.is_ok());
  EXPECT_EQ(capped->top.size(), 4u);
}

TEST(TokenLogprobs, TopNMatchesAFullSortOnGpt2SizedLogits) {
  Rng rng(17);
  std::vector<float> logits(50257);
  // Coarse values, so ties are common and the id tie-break is exercised.
  for (float& l : logits) l = static_cast<float>(std::floor(rng.uniform01() * 200.0) / 10.0);
  const std::vector<float> lp = log_softmax(logits);
  std::vector<TokenId> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](TokenId a, TokenId b) { return logits[a] > logits[b]; });
  auto info = token_logprobs(logits, 12345, 20);
  ASSERT_TRUE(info.is_ok());
  EXPECT_EQ(info->chosen.logprob, lp[12345]);
  ASSERT_EQ(info->top.size(), 20u);
  for (size_t r = 0; r < 20; ++r) {
    EXPECT_EQ(info->top[r].id, order[r]) << "rank " << r;
    EXPECT_EQ(info->top[r].logprob, lp[order[r]]);
  }
  double total = 0;
  for (float x : lp) total += std::exp(static_cast<double>(x));
  EXPECT_NEAR(total, 1.0, 1e-4);
}

TEST(TokenLogprobs, Errors) {
  const std::vector<float> logits = {0.0f, 1.0f};
  auto bad_token = token_logprobs(logits, 2, 1);
  ASSERT_FALSE(bad_token.is_ok());
  EXPECT_EQ(bad_token.message(), "logprobs: token 2 is outside the vocabulary [0, 2)");
  auto nan = token_logprobs(std::vector<float>{0.0f, std::nanf("")}, 0, 1);
  ASSERT_FALSE(nan.is_ok());
  EXPECT_EQ(nan.message(), "logits[1] is NaN");
}

}  // namespace
}  // namespace kvlm
