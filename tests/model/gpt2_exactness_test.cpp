// The cache's promise, in tests: cached generation is bitwise identical to uncached, a
// sequence's logits do not depend on its batch or on the thread count, and all of it holds for
// weights stored as F32, F16 and BF16. The models are written as real files and loaded back.
#include <gtest/gtest.h>

#include <cstring>

#include "generate/generate.h"
#include "kv/contiguous_kv_cache.h"
#include "model/loader.h"
#include "support/test_support.h"

namespace kvlm {
namespace {

const std::vector<std::vector<int32_t>> kSeedPrompts = {
    {7, 3, 19, 1, 25, 8, 11, 4, 2, 15}, {9, 2}, {1, 6, 4, 22}};

struct StepLogits {
  // logits[step][seq] = that step's last-position logits
  std::vector<std::vector<std::vector<float>>> logits;
  std::vector<std::vector<int32_t>> tokens;
};

StepLogits run(Model& model, const std::vector<std::vector<int32_t>>& prompts, bool cached,
               int n_new, int threads) {
  StepLogits out;
  GenerateOptions options;
  options.max_new_tokens = n_new;
  options.use_cache = cached;
  options.observe = [&](int step, int seq, std::span<const float> logits) {
    if (out.logits.size() <= static_cast<size_t>(step)) out.logits.resize(step + 1);
    auto& row = out.logits[step];
    if (row.size() <= static_cast<size_t>(seq)) row.resize(seq + 1);
    row[seq].assign(logits.begin(), logits.end());
  };
  auto result = generate(model, prompts, options, Parallel{threads});
  EXPECT_TRUE(result.is_ok()) << result.message();
  if (result) out.tokens = result->tokens;
  return out;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class Gpt2Exactness : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    RandomGpt2Options options;
    options.seed = 42;
    options.dtype = GetParam();
    ASSERT_TRUE(write_random_gpt2(dir_.path(), test::tiny_gpt2_config(), options).is_ok());
    auto model = load_model(dir_.path(), LoadOptions{});
    ASSERT_TRUE(model.is_ok()) << model.message();
    model_ = std::move(model.value());
    ASSERT_EQ(model_->weight_dtype(), dtype_name(GetParam()));
  }
  test::TempDir dir_;
  std::unique_ptr<Model> model_;
};

// The seed's test: three prompts batched, 20 new tokens, cached vs uncached: identical
// tokens and identical logits (max difference exactly 0) at every step.
TEST_P(Gpt2Exactness, CachedEqualsUncachedBitwiseAtEveryStep) {
  const StepLogits uncached = run(*model_, kSeedPrompts, false, 20, 2);
  const StepLogits cached = run(*model_, kSeedPrompts, true, 20, 2);
  ASSERT_EQ(uncached.logits.size(), 20u);
  ASSERT_EQ(cached.logits.size(), 20u);
  EXPECT_EQ(cached.tokens, uncached.tokens);
  for (size_t step = 0; step < 20; ++step)
    for (size_t s = 0; s < kSeedPrompts.size(); ++s)
      EXPECT_TRUE(bitwise_equal(cached.logits[step][s], uncached.logits[step][s]))
          << "step " << step << " sequence " << s;
}

// Each prompt's logits in the batch equal the same prompt run alone, bit for bit.
TEST_P(Gpt2Exactness, BatchInvariance) {
  const StepLogits batched = run(*model_, kSeedPrompts, true, 8, 2);
  for (size_t s = 0; s < kSeedPrompts.size(); ++s) {
    const StepLogits alone = run(*model_, {kSeedPrompts[s]}, true, 8, 2);
    EXPECT_EQ(alone.tokens[0], batched.tokens[s]);
    for (size_t step = 0; step < 8; ++step)
      EXPECT_TRUE(bitwise_equal(alone.logits[step][0], batched.logits[step][s]))
          << "step " << step << " sequence " << s;
  }
  // Order within the batch does not matter either.
  const StepLogits reversed =
      run(*model_, {kSeedPrompts[2], kSeedPrompts[1], kSeedPrompts[0]}, true, 8, 2);
  for (size_t step = 0; step < 8; ++step)
    EXPECT_TRUE(bitwise_equal(reversed.logits[step][2], batched.logits[step][0]));
}

TEST_P(Gpt2Exactness, ThreadCountInvariance) {
  const StepLogits one = run(*model_, kSeedPrompts, true, 6, 1);
  for (int threads : {2, 3, 5}) {
    const StepLogits many = run(*model_, kSeedPrompts, true, 6, threads);
    for (size_t step = 0; step < 6; ++step)
      for (size_t s = 0; s < kSeedPrompts.size(); ++s)
        EXPECT_TRUE(bitwise_equal(one.logits[step][s], many.logits[step][s]))
            << threads << " threads, step " << step << " sequence " << s;
  }
}

// Splitting the prompt into several prefill chunks (or feeding it token by token) must not
// change a bit either: each position's computation is independent of how rows are grouped.
TEST_P(Gpt2Exactness, ChunkedPrefillEqualsOnePass) {
  const std::vector<int32_t>& prompt = kSeedPrompts[0];
  const ModelConfig& c = model_->config();
  std::vector<float> whole(c.n_vocab), pieces(c.n_vocab);
  ContiguousKvCache cache_a(c.n_layer, c.kv_dim(), {static_cast<int>(prompt.size())});
  SequenceChunk all{0, 0, prompt};
  ASSERT_TRUE(model_->forward(whole.data(), {&all, 1}, cache_a, Parallel{2}).is_ok());
  ContiguousKvCache cache_b(c.n_layer, c.kv_dim(), {static_cast<int>(prompt.size())});
  for (size_t t = 0; t < prompt.size(); t += 3) {
    const size_t n = std::min<size_t>(3, prompt.size() - t);
    SequenceChunk part{0, static_cast<int>(t), std::span<const int32_t>(prompt).subspan(t, n)};
    ASSERT_TRUE(model_->forward(pieces.data(), {&part, 1}, cache_b, Parallel{1}).is_ok());
  }
  EXPECT_TRUE(bitwise_equal(whole, pieces));
}

TEST_P(Gpt2Exactness, CacheSizeIsTheSeedFormula) {
  GenerateOptions options;
  options.max_new_tokens = 20;
  auto result = generate(*model_, kSeedPrompts, options, Parallel{1});
  ASSERT_TRUE(result.is_ok());
  const ModelConfig& c = model_->config();
  // 2 * n_layer * n_head * head_dim * tokens * sizeof(float), tokens = prompt + 19 per sequence
  const int64_t tokens = (10 + 19) + (2 + 19) + (4 + 19);
  const int64_t expected = 2LL * c.n_layer * c.n_head * c.head_dim * tokens * 4;
  EXPECT_EQ(result->stats.kv_bytes_formula, expected);
  EXPECT_EQ(result->stats.kv_bytes_allocated, expected);
  EXPECT_EQ(result->stats.rows_computed, 16 + 19 * 3);
}

INSTANTIATE_TEST_SUITE_P(Storage, Gpt2Exactness,
                         ::testing::Values(DType::kF32, DType::kF16, DType::kBF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Fine-tunes save tensors under "transformer." and may store lm_head.weight untied: both load,
// and an untied head is really used.
TEST(Gpt2Loading, PrefixedNamesAndSeparateHead) {
  test::TempDir plain, prefixed, untied;
  RandomGpt2Options options;
  ASSERT_TRUE(write_random_gpt2(plain.path(), test::tiny_gpt2_config(), options).is_ok());
  options.transformer_prefix = true;
  ASSERT_TRUE(write_random_gpt2(prefixed.path(), test::tiny_gpt2_config(), options).is_ok());
  options.separate_lm_head = true;
  ASSERT_TRUE(write_random_gpt2(untied.path(), test::tiny_gpt2_config(), options).is_ok());
  auto a = load_model(plain.path(), {});
  auto b = load_model(prefixed.path(), {});
  auto c = load_model(untied.path(), {});
  ASSERT_TRUE(a.is_ok() && b.is_ok() && c.is_ok()) << a.message() << b.message() << c.message();
  EXPECT_TRUE(a.value()->config().tied_embeddings);
  EXPECT_FALSE(c.value()->config().tied_embeddings);
  auto la = last_logits(*a.value(), {{1, 2, 3}}, true, Parallel{1});
  auto lb = last_logits(*b.value(), {{1, 2, 3}}, true, Parallel{1});
  auto lc = last_logits(*c.value(), {{1, 2, 3}}, true, Parallel{1});
  ASSERT_TRUE(la.is_ok() && lb.is_ok() && lc.is_ok());
  EXPECT_TRUE(bitwise_equal(la.value()[0], lb.value()[0]));
  EXPECT_FALSE(bitwise_equal(la.value()[0], lc.value()[0]));
}

// --weights converts on load: a BF16 conversion of an F32 file equals the BF16 file.
TEST(Gpt2Loading, ConvertOnLoadMatchesStoredType) {
  test::TempDir f32, bf16;
  RandomGpt2Options options;
  ASSERT_TRUE(write_random_gpt2(f32.path(), test::tiny_gpt2_config(), options).is_ok());
  options.dtype = DType::kBF16;
  ASSERT_TRUE(write_random_gpt2(bf16.path(), test::tiny_gpt2_config(), options).is_ok());
  LoadOptions convert;
  convert.convert_weights = DType::kBF16;
  auto converted = load_model(f32.path(), convert);
  auto stored = load_model(bf16.path(), {});
  ASSERT_TRUE(converted.is_ok() && stored.is_ok());
  EXPECT_EQ(converted.value()->weight_dtype(), "BF16");
  auto a = last_logits(*converted.value(), {{5, 6, 7}}, true, Parallel{1});
  auto b = last_logits(*stored.value(), {{5, 6, 7}}, true, Parallel{1});
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  // Norms and biases stay F32 in the converted model but are BF16-rounded in the stored one,
  // so the two agree closely rather than bitwise.
  for (size_t i = 0; i < a.value()[0].size(); ++i)
    EXPECT_NEAR(a.value()[0][i], b.value()[0][i], 2e-2);
}

}  // namespace
}  // namespace kvlm
