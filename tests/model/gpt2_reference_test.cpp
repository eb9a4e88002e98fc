// kvlm's GPT-2 against an independent reference: tests/reference/gpt2_reference.py (numpy,
// float64, padded batch with an attention mask) wrote tiny checkpoints in F32, F16 and BF16
// and its logits. We load the same files and must agree within the fixture's tolerance (1e-4).
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "generate/generate.h"
#include "model/loader.h"
#include "support/test_support.h"

namespace kvlm {
namespace {

nlohmann::json load_fixture() {
  return nlohmann::json::parse(
      test::read_text(test::source_dir() + "/tests/golden/tiny_gpt2_reference.json"));
}

class Gpt2Reference : public ::testing::TestWithParam<std::string> {};

TEST_P(Gpt2Reference, LastLogitsWithinTolerance) {
  const nlohmann::json fixture = load_fixture();
  const double tolerance = fixture["tolerance"].get<double>();
  ASSERT_EQ(tolerance, 1e-4);
  const auto prompts = fixture["prompts"].get<std::vector<std::vector<int32_t>>>();
  const auto& expected = fixture["models"][GetParam()]["last_logits"];
  auto model = load_model(test::source_dir() + "/tests/golden/" + GetParam(), {});
  ASSERT_TRUE(model.is_ok()) << model.message();
  for (bool cached : {true, false}) {
    auto logits = last_logits(*model.value(), prompts, cached, Parallel{2});
    ASSERT_TRUE(logits.is_ok()) << logits.message();
    double max_diff = 0;
    for (size_t s = 0; s < prompts.size(); ++s) {
      ASSERT_EQ(logits.value()[s].size(), expected[s].size());
      for (size_t i = 0; i < expected[s].size(); ++i)
        max_diff =
            std::max(max_diff, std::fabs(logits.value()[s][i] - expected[s][i].get<double>()));
    }
    EXPECT_LT(max_diff, tolerance) << GetParam() << (cached ? " cached" : " uncached");
  }
}

TEST_P(Gpt2Reference, GreedyContinuationMatches) {
  const nlohmann::json fixture = load_fixture();
  const auto prompts = fixture["prompts"].get<std::vector<std::vector<int32_t>>>();
  const auto expected =
      fixture["models"][GetParam()]["greedy"].get<std::vector<std::vector<int32_t>>>();
  auto model = load_model(test::source_dir() + "/tests/golden/" + GetParam(), {});
  ASSERT_TRUE(model.is_ok()) << model.message();
  GenerateOptions options;
  options.max_new_tokens = fixture["n_new"].get<int>();
  auto result = generate(*model.value(), prompts, options, Parallel{2});
  ASSERT_TRUE(result.is_ok()) << result.message();
  EXPECT_EQ(result->tokens, expected);
}

INSTANTIATE_TEST_SUITE_P(Storage, Gpt2Reference,
                         ::testing::Values("tiny_gpt2_f32", "tiny_gpt2_f16", "tiny_gpt2_bf16"));

}  // namespace
}  // namespace kvlm
