// The exactness contract per KV cache dtype (f16, bf16, q8_0, fp8; f32 is the other suites'):
// with a given dtype, cached generation is bitwise identical to uncached (which writes and
// reads a cache of the same dtype), and a sequence's logits do not depend on paging, prefix
// sharing, its batch or the thread count. GPT-2 and Llama (GQA) tiny random models, written as
// real files and loaded back.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <ostream>
#include <string>

#include "generate/generate.h"
#include "model/llama_random.h"
#include "model/loader.h"
#include "model/random_gpt2.h"
#include "support/test_support.h"

namespace kvlm {
namespace {

struct Param {
  bool llama;
  KvDtype dtype;
};

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return std::string(info.param.llama ? "llama_" : "gpt2_") + kv_dtype_name(info.param.dtype);
}
void PrintTo(const Param& p, std::ostream* os) {
  *os << (p.llama ? "llama_" : "gpt2_") << kv_dtype_name(p.dtype);
}

struct StepLogits {
  std::vector<std::vector<std::vector<float>>> logits;  // [step][seq][vocab]
  std::vector<std::vector<int32_t>> tokens;
};

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Prompts 0 and 4 share 9 tokens (two blocks of 4); prompt 5 repeats prompt 2 (whole-prompt hit).
const std::vector<std::vector<int32_t>> kPrompts = {
    {7, 3, 19, 1, 25, 8, 11, 4, 2, 15},     {9, 2},          {1, 6, 4, 22, 5}, {47},
    {7, 3, 19, 1, 25, 8, 11, 4, 2, 30, 31}, {1, 6, 4, 22, 5}};

class KvDtypeExactness : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    std::string path = dir_.path();
    if (GetParam().llama) {
      path = dir_.file("model.bin");
      ASSERT_TRUE(write_llama2c(path, random_llama_weights(tiny_llama_config(), 42)).is_ok());
    } else {
      RandomGpt2Options options;
      options.seed = 42;
      ASSERT_TRUE(write_random_gpt2(path, test::tiny_gpt2_config(), options).is_ok());
    }
    auto model = load_model(path, LoadOptions{});
    ASSERT_TRUE(model.is_ok()) << model.message();
    model_ = std::move(model.value());
    if (GetParam().llama) {
      ASSERT_LT(model_->config().n_kv_head, model_->config().n_head);  // GQA
    }
  }

  StepLogits run(const std::vector<std::vector<int32_t>>& prompts, bool cached, int threads,
                 int block_size = 0, bool share = true, KvDtype dtype = KvDtype::f32,
                 bool use_param_dtype = true) {
    StepLogits out;
    GenerateOptions options;
    options.max_new_tokens = 8;
    options.use_cache = cached;
    options.kv_storage.dtype = use_param_dtype ? GetParam().dtype : dtype;
    if (block_size > 0) options.paged = PagedGenerateOptions{block_size, 0, share};
    options.observe = [&](int step, int seq, std::span<const float> logits) {
      if (out.logits.size() <= static_cast<size_t>(step)) out.logits.resize(step + 1);
      auto& row = out.logits[step];
      if (row.size() <= static_cast<size_t>(seq)) row.resize(seq + 1);
      row[seq].assign(logits.begin(), logits.end());
    };
    auto result = generate(*model_, prompts, options, Parallel{threads});
    EXPECT_TRUE(result.is_ok()) << result.message();
    if (result) out.tokens = result->tokens;
    return out;
  }

  void expect_same(const StepLogits& a, const StepLogits& b, const std::string& what) {
    ASSERT_EQ(a.logits.size(), b.logits.size()) << what;
    EXPECT_EQ(a.tokens, b.tokens) << what;
    for (size_t step = 0; step < a.logits.size(); ++step)
      for (size_t s = 0; s < a.logits[step].size(); ++s)
        ASSERT_TRUE(bitwise_equal(a.logits[step][s], b.logits[step][s]))
            << what << ": step " << step << " seq " << s;
  }

  test::TempDir dir_;
  std::unique_ptr<Model> model_;
};

TEST_P(KvDtypeExactness, CachedEqualsUncachedBitwise) {
  const StepLogits cached = run(kPrompts, true, 1);
  ASSERT_EQ(cached.logits.size(), 8u);
  expect_same(cached, run(kPrompts, false, 1), "uncached");
}

// The dtype is really applied: the logits move off the f32 cache's, but only a little.
TEST_P(KvDtypeExactness, LogitsDifferFromF32OnlyByTheStoredPrecision) {
  const StepLogits quantized = run({kPrompts[0]}, true, 1);
  const StepLogits f32 = run({kPrompts[0]}, true, 1, 0, true, KvDtype::f32, false);
  ASSERT_EQ(quantized.logits.size(), f32.logits.size());
  // Step 0 (the prompt's own pass) compares like for like; later steps follow each cache's own
  // greedy tokens, which may part.
  const auto& a = quantized.logits[0][0];
  const auto& b = f32.logits[0][0];
  EXPECT_FALSE(bitwise_equal(a, b)) << "the cache dtype changed nothing";
  float max_diff = 0, max_abs = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(a[i] - b[i]));
    max_abs = std::max(max_abs, std::fabs(b[i]));
  }
  // A sanity bound only (the dtype did not wreck the model): how each dtype stores a row is
  // pinned exactly by KvFormat.CachesStoreRowsAsTheirDtype, .Q8_0IsGgmlsBlockScaleAndRounding,
  // .E4m3RoundTripsEveryCodeAndRoundsToNearestEven and .EachTypeDecodesWithinItsPrecision.
  EXPECT_LT(max_diff, 0.1f * max_abs) << "max |logit| " << max_abs;
}

TEST_P(KvDtypeExactness, PagingAndPrefixSharingChangeNoBit) {
  const StepLogits contiguous = run(kPrompts, true, 1);
  for (int block : {1, 3, 4, 16})
    for (bool share : {false, true})
      expect_same(run(kPrompts, true, 1, block, share), contiguous,
                  "block " + std::to_string(block) + (share ? " shared" : " unshared"));
}

TEST_P(KvDtypeExactness, BatchOrderAndThreadsChangeNoBit) {
  const StepLogits batch = run(kPrompts, true, 1);
  expect_same(run(kPrompts, true, 3), batch, "3 threads");
  for (size_t s = 0; s < kPrompts.size(); ++s) {
    const StepLogits alone = run({kPrompts[s]}, true, 2);
    for (size_t step = 0; step < alone.logits.size(); ++step)
      ASSERT_TRUE(bitwise_equal(alone.logits[step][0], batch.logits[step][s]))
          << "prompt " << s << " alone, step " << step;
  }
  std::vector<std::vector<int32_t>> reversed(kPrompts.rbegin(), kPrompts.rend());
  const StepLogits backwards = run(reversed, true, 1, 4);
  for (size_t step = 0; step < backwards.logits.size(); ++step)
    for (size_t s = 0; s < kPrompts.size(); ++s)
      ASSERT_TRUE(
          bitwise_equal(backwards.logits[step][kPrompts.size() - 1 - s], batch.logits[step][s]))
          << "reversed batch, prompt " << s << " step " << step;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, KvDtypeExactness,
                         ::testing::Values(Param{false, KvDtype::f16}, Param{false, KvDtype::bf16},
                                           Param{false, KvDtype::q8_0}, Param{false, KvDtype::fp8},
                                           Param{true, KvDtype::f16}, Param{true, KvDtype::bf16},
                                           Param{true, KvDtype::q8_0}, Param{true, KvDtype::fp8}),
                         param_name);

}  // namespace
}  // namespace kvlm
