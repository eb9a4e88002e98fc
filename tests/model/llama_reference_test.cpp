// kvlm's Llama against an independent reference: tests/reference/llama_reference.py (numpy,
// float64, the published Llama math in both its llama2.c and Hugging Face spellings, checked
// against each other) wrote tiny checkpoints (a llama2.c model.bin and Hugging Face folders:
// GQA with a tied head in F32, MQA with an untied head, rope_theta 500000 and eps 1e-6 in BF16)
// and their logits. We load the same files and must agree within the fixture's tolerance (1e-4).
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
      test::read_text(test::source_dir() + "/tests/golden/tiny_llama_reference.json"));
}

class LlamaReference : public ::testing::TestWithParam<std::string> {};

TEST_P(LlamaReference, LastLogitsWithinTolerance) {
  const nlohmann::json fixture = load_fixture();
  const double tolerance = fixture["tolerance"].get<double>();
  ASSERT_EQ(tolerance, 1e-4);
  const auto prompts = fixture["prompts"].get<std::vector<std::vector<int32_t>>>();
  ASSERT_TRUE(fixture["models"].contains(GetParam())) << GetParam();
  const auto& expected = fixture["models"][GetParam()]["last_logits"];
  auto model = load_model(test::source_dir() + "/tests/golden/" + GetParam(), {});
  ASSERT_TRUE(model.is_ok()) << model.message();
  ASSERT_EQ(model.value()->config().arch, Architecture::kLlama);
  for (bool cached : {true, false}) {
    auto logits = last_logits(*model.value(), prompts, cached, Parallel{1});
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

TEST_P(LlamaReference, GreedyContinuationMatches) {
  const nlohmann::json fixture = load_fixture();
  const auto prompts = fixture["prompts"].get<std::vector<std::vector<int32_t>>>();
  const auto expected =
      fixture["models"][GetParam()]["greedy"].get<std::vector<std::vector<int32_t>>>();
  auto model = load_model(test::source_dir() + "/tests/golden/" + GetParam(), {});
  ASSERT_TRUE(model.is_ok()) << model.message();
  GenerateOptions options;
  options.max_new_tokens = fixture["n_new"].get<int>();
  auto result = generate(*model.value(), prompts, options, Parallel{1});
  ASSERT_TRUE(result.is_ok()) << result.message();
  EXPECT_EQ(result->tokens, expected);
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, LlamaReference,
                         ::testing::Values("tiny_llama_gqa.bin", "tiny_llama_gqa_hf",
                                           "tiny_llama_mqa_untied_hf"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (c == '.') c = '_';
                           return name;
                         });

TEST(LlamaReferenceFiles, ShapesAreWhatTheScriptSays) {
  auto gqa = load_model(test::source_dir() + "/tests/golden/tiny_llama_gqa.bin", {});
  ASSERT_TRUE(gqa.is_ok()) << gqa.message();
  EXPECT_EQ(gqa.value()->config().n_head, 4);
  EXPECT_EQ(gqa.value()->config().n_kv_head, 2);
  EXPECT_TRUE(gqa.value()->config().tied_embeddings);
  auto mqa = load_model(test::source_dir() + "/tests/golden/tiny_llama_mqa_untied_hf", {});
  ASSERT_TRUE(mqa.is_ok()) << mqa.message();
  EXPECT_EQ(mqa.value()->config().n_kv_head, 1);
  EXPECT_FALSE(mqa.value()->config().tied_embeddings);
  EXPECT_EQ(mqa.value()->config().rope_theta, 500000.0f);
  EXPECT_EQ(mqa.value()->config().norm_eps, 1e-6f);
  EXPECT_EQ(mqa.value()->weight_dtype(), "BF16");
}

}  // namespace
}  // namespace kvlm
