// generate()'s own decisions, apart from any transformer: greedy selection breaks ties to the
// lowest id (llama2.c's contract, as run.c's -t 0; the stories260K golden depends on it), and
// the loop feeds each chosen token back (a scripted model whose logits are a function of the
// last token makes every step's tie known in advance).
#include "generate/generate.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "support/test_models.h"

namespace kvlm {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(Argmax, TiesGoToTheLowestId) {
  EXPECT_EQ(argmax(std::vector<float>{1.0f, 3.0f, 3.0f, 2.0f}), 1);
  EXPECT_EQ(argmax(std::vector<float>{5.0f, 5.0f, 5.0f}), 0);
  EXPECT_EQ(argmax(std::vector<float>{0.0f, 2.0f, -1.0f, 2.0f, 2.0f}), 1);
  EXPECT_EQ(argmax(std::vector<float>{-kInf, -7.0f, -kInf, -7.0f}), 1);
  EXPECT_EQ(argmax(std::vector<float>{-0.0f, 0.0f}), 0);  // -0 == +0: a tie, not a larger value
  EXPECT_EQ(argmax(std::vector<float>{4.0f}), 0);
  EXPECT_EQ(argmax(std::vector<float>{1.0f, 2.0f, 9.0f}), 2);  // a unique maximum at the end
}

// Logits that depend only on the sequence's last token t: ids (t + 3) % V and (t + 5) % V tie
// for the maximum, every other id is lower. Greedy must take the smaller of the two.
class TieModel final : public Model {
 public:
  TieModel() {
    config_.arch = Architecture::kGpt2;
    config_.n_vocab = 8;
    config_.n_ctx = 32;
    config_.n_embd = 4;
    config_.n_layer = 1;
    config_.n_head = 1;
    config_.n_kv_head = 1;
    config_.head_dim = 4;
    config_.n_ff = 4;
  }
  const ModelConfig& config() const override { return config_; }
  Status forward(float* logits, std::span<const SequenceChunk> chunks, KvCache&,
                 const Parallel&) override {
    const int V = config_.n_vocab;
    for (size_t k = 0; k < chunks.size(); ++k) {
      const int32_t t = chunks[k].tokens.back();
      for (int i = 0; i < V; ++i) logits[k * V + i] = static_cast<float>(i) * 0.01f;
      logits[k * V + (t + 3) % V] = 2.0f;
      logits[k * V + (t + 5) % V] = 2.0f;
    }
    return Status::ok();
  }
  size_t weight_bytes() const override { return 0; }
  std::string weight_dtype() const override { return "F32"; }

 private:
  ModelConfig config_;
};

// The lower of (t + 3) % 8 and (t + 5) % 8.
int32_t lower_tied(int32_t t) {
  return std::min((t + 3) % 8, (t + 5) % 8);
}

TEST(GenerateGreedy, EveryStepsTieGoesToTheLowestId) {
  TieModel model;
  for (bool cached : {true, false}) {
    GenerateOptions options;
    options.max_new_tokens = 6;
    options.use_cache = cached;
    auto result = generate(model, {{0}, {4, 6}}, options, Parallel{1});
    ASSERT_TRUE(result.is_ok()) << result.message();
    for (size_t s = 0; s < 2; ++s) {
      int32_t last = s == 0 ? 0 : 6;
      std::vector<int32_t> expected;
      for (int i = 0; i < 6; ++i) expected.push_back(last = lower_tied(last));
      EXPECT_EQ(result->tokens[s], expected) << "sequence " << s << (cached ? " cached" : "");
    }
  }
  // The first steps written out: 0 -> {3, 5} -> 3 -> {6, 0} -> 0 -> 3 ...
  GenerateOptions options;
  options.max_new_tokens = 3;
  auto result = generate(model, {{0}}, options, Parallel{1});
  ASSERT_TRUE(result.is_ok()) << result.message();
  EXPECT_EQ(result->tokens[0], (std::vector<int32_t>{3, 0, 3}));
}

// Prefill computes every prompt position once, then one row per sequence and step. (The cache
// bytes of the same run, the seed's formula, are
// EngineStatsTest.BlocksOfOnePositionHoldExactlyTheSeedsFormula: `kvlm demo` runs on the engine.)
TEST(GenerateStats, RowsComputedArePromptsOnceThenOnePerStep) {
  test::TempDir dir;
  auto model = test::write_and_load(test::llama_spec(test::ModelFormat::kLlama2cBin, 2), dir);
  ASSERT_TRUE(model.is_ok()) << model.message();
  GenerateOptions options;
  options.max_new_tokens = 20;
  auto result =
      generate(*model.value(), {{7, 3, 19, 1, 25, 8, 11, 4, 2, 15}, {9, 2}, {1, 6, 4, 22}}, options,
               Parallel{1});
  ASSERT_TRUE(result.is_ok()) << result.message();
  EXPECT_EQ(result->stats.rows_computed, 16 + 19 * 3);
}

}  // namespace
}  // namespace kvlm
