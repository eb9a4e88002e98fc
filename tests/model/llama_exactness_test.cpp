// The cache's promise on the Llama path: cached generation is bitwise identical to uncached at
// every step, a sequence's logits do not depend on its batch or on the thread count, and the
// same weights give the same logits whether they come from a llama2.c model.bin or from a
// Hugging Face folder (q/k rows permuted as Hugging Face stores them, undone on load). The
// models are seeded random weights written as real files and loaded back through load_model.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "generate/generate.h"
#include "model/llama.h"
#include "model/llama_random.h"
#include "model/loader.h"
#include "support/test_support.h"

namespace kvlm {
namespace {

const std::vector<std::vector<int32_t>> kPrompts = {
    {7, 3, 19, 1, 25, 8, 11, 4, 2, 15}, {9, 2}, {1, 6, 4, 22}, {47}};

struct StepLogits {
  std::vector<std::vector<std::vector<float>>> logits;  // [step][seq][vocab]
  std::vector<std::vector<int32_t>> tokens;
};

StepLogits run(Model& model, const std::vector<std::vector<int32_t>>& prompts, bool cached,
               int n_new, int threads, int paged_block_size = 0) {
  StepLogits out;
  GenerateOptions options;
  options.max_new_tokens = n_new;
  options.use_cache = cached;
  if (paged_block_size > 0) {
    PagedGenerateOptions paged;
    paged.block_size = paged_block_size;
    options.paged = paged;
  }
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

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = a.size() == b.size() ? 0.0f : INFINITY;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// One variant of the architecture: GQA, MQA, MHA, untied head, and how it is stored.
struct Variant {
  const char* name;
  int n_kv_head;
  bool tied;
  bool hf;  // Hugging Face folder (else llama2.c model.bin)
  int n_shards;
  DType dtype;
};

LlamaConfig variant_config(const Variant& v) {
  LlamaConfig lc = tiny_llama_config();
  lc.model.n_kv_head = v.n_kv_head;
  lc.model.tied_embeddings = v.tied;
  return lc;
}

// Writes the variant's files into `dir` and loads them.
std::unique_ptr<Model> write_and_load(const Variant& v, const test::TempDir& dir,
                                      uint64_t seed = 42) {
  const LlamaHostWeights w = random_llama_weights(variant_config(v), seed);
  std::string path;
  if (v.hf) {
    HfWriteOptions options;
    options.dtype = v.dtype;
    options.n_shards = v.n_shards;
    EXPECT_TRUE(write_llama_hf(dir.path(), w, options).is_ok());
    path = dir.path();
  } else {
    path = dir.file("model.bin");
    EXPECT_TRUE(write_llama2c(path, w).is_ok());
  }
  auto model = load_model(path, LoadOptions{});
  EXPECT_TRUE(model.is_ok()) << model.message();
  return model ? std::move(model.value()) : nullptr;
}

class LlamaExactness : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override {
    model_ = write_and_load(GetParam(), dir_);
    ASSERT_NE(model_, nullptr);
    ASSERT_EQ(model_->config().arch, Architecture::kLlama);
    ASSERT_EQ(model_->config().n_kv_head, GetParam().n_kv_head);
    ASSERT_EQ(model_->weight_dtype(), dtype_name(GetParam().dtype));
  }
  test::TempDir dir_;
  std::unique_ptr<Model> model_;
};

TEST_P(LlamaExactness, CachedEqualsUncachedBitwiseAtEveryStep) {
  const StepLogits uncached = run(*model_, kPrompts, false, 12, 1);
  const StepLogits cached = run(*model_, kPrompts, true, 12, 1);
  ASSERT_EQ(uncached.logits.size(), 12u);
  ASSERT_EQ(cached.logits.size(), 12u);
  EXPECT_EQ(cached.tokens, uncached.tokens);
  for (size_t step = 0; step < cached.logits.size(); ++step)
    for (size_t s = 0; s < kPrompts.size(); ++s)
      EXPECT_TRUE(bitwise_equal(cached.logits[step][s], uncached.logits[step][s]))
          << "step " << step << " seq " << s << " max diff "
          << max_abs_diff(cached.logits[step][s], uncached.logits[step][s]);
}

// The paged cache hands attention several runs of positions (one per block); the Llama path
// must give the same bits as with one contiguous run, shared prompt prefixes included.
TEST_P(LlamaExactness, PagedCacheEqualsContiguousBitwise) {
  std::vector<std::vector<int32_t>> prompts = kPrompts;
  prompts.push_back({7, 3, 19, 1, 25, 8, 11, 4, 30});  // shares a prefix with prompt 1
  const StepLogits contiguous = run(*model_, prompts, true, 10, 1);
  for (int block : {1, 3, 4}) {
    const StepLogits paged = run(*model_, prompts, true, 10, 1, block);
    EXPECT_EQ(paged.tokens, contiguous.tokens) << "block " << block;
    for (size_t step = 0; step < paged.logits.size(); ++step)
      for (size_t s = 0; s < prompts.size(); ++s)
        EXPECT_TRUE(bitwise_equal(paged.logits[step][s], contiguous.logits[step][s]))
            << "block " << block << " step " << step << " seq " << s;
  }
}

TEST_P(LlamaExactness, BatchAndThreadInvariantBitwise) {
  const StepLogits batched = run(*model_, kPrompts, true, 8, 2);
  for (size_t s = 0; s < kPrompts.size(); ++s) {
    const StepLogits alone = run(*model_, {kPrompts[s]}, true, 8, 1);
    ASSERT_EQ(alone.tokens.size(), 1u);
    EXPECT_EQ(alone.tokens[0], batched.tokens[s]) << "seq " << s;
    for (size_t step = 0; step < alone.logits.size(); ++step)
      EXPECT_TRUE(bitwise_equal(alone.logits[step][0], batched.logits[step][s]))
          << "step " << step << " seq " << s;
  }
  // The same prompts in the opposite order.
  std::vector<std::vector<int32_t>> reversed(kPrompts.rbegin(), kPrompts.rend());
  const StepLogits other = run(*model_, reversed, true, 8, 2);
  for (size_t s = 0; s < kPrompts.size(); ++s)
    EXPECT_TRUE(
        bitwise_equal(other.logits.back()[kPrompts.size() - 1 - s], batched.logits.back()[s]));
}

TEST_P(LlamaExactness, LogitsAreFiniteAndNotFlat) {
  auto logits = last_logits(*model_, kPrompts, true, Parallel{1});
  ASSERT_TRUE(logits.is_ok()) << logits.message();
  for (const auto& row : logits.value()) {
    float lo = INFINITY, hi = -INFINITY;
    for (float x : row) {
      ASSERT_TRUE(std::isfinite(x));
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
    EXPECT_GT(hi - lo, 0.5f);  // a model whose weights were misbound tends to go flat or NaN
  }
}

INSTANTIATE_TEST_SUITE_P(
    Variants, LlamaExactness,
    ::testing::Values(Variant{"gqa_bin", 2, true, false, 1, DType::kF32},
                      Variant{"mqa_untied_bin", 1, false, false, 1, DType::kF32},
                      Variant{"mha_bin", 4, true, false, 1, DType::kF32},
                      Variant{"gqa_hf", 2, true, true, 1, DType::kF32},
                      Variant{"gqa_untied_hf_sharded", 2, false, true, 3, DType::kF32},
                      Variant{"mqa_hf_bf16", 1, true, true, 1, DType::kBF16},
                      Variant{"gqa_hf_f16", 2, false, true, 2, DType::kF16}),
    [](const auto& info) { return std::string(info.param.name); });

// The same fp32 weights through both formats: after the q/k permutation is undone the matrices
// are identical, and the same kernels run in the same order, so the logits agree bit for bit.
TEST(LlamaFormats, HuggingFaceFolderEqualsLlama2cBinBitwise) {
  for (const auto& [kv, tied] :
       std::vector<std::pair<int, bool>>{{2, true}, {1, false}, {4, true}}) {
    test::TempDir bin_dir, hf_dir;
    auto bin = write_and_load({"bin", kv, tied, false, 1, DType::kF32}, bin_dir, 7);
    auto hf = write_and_load({"hf", kv, tied, true, 2, DType::kF32}, hf_dir, 7);
    ASSERT_NE(bin, nullptr);
    ASSERT_NE(hf, nullptr);
    const StepLogits a = run(*bin, kPrompts, true, 6, 1);
    const StepLogits b = run(*hf, kPrompts, true, 6, 1);
    EXPECT_EQ(a.tokens, b.tokens);
    for (size_t step = 0; step < a.logits.size(); ++step)
      for (size_t s = 0; s < kPrompts.size(); ++s)
        EXPECT_TRUE(bitwise_equal(a.logits[step][s], b.logits[step][s]))
            << "kv " << kv << " step " << step << " seq " << s << " max diff "
            << max_abs_diff(a.logits[step][s], b.logits[step][s]);
  }
}

// Loading a Hugging Face folder without undoing the permutation would rotate the wrong pairs:
// check the loader really changed the rows (the logits would otherwise match only by luck).
TEST(LlamaFormats, PermutationIsUndoneOnLoad) {
  test::TempDir dir;
  const LlamaHostWeights w = random_llama_weights(tiny_llama_config(), 3);
  ASSERT_TRUE(write_llama_hf(dir.path(), w, HfWriteOptions{}).is_ok());
  auto model = load_model(dir.path(), {});
  ASSERT_TRUE(model.is_ok()) << model.message();
  const auto* llama = dynamic_cast<const LlamaModel*>(model.value().get());
  ASSERT_NE(llama, nullptr);
  const ModelConfig& c = llama->config();
  const LlamaLayer& L = llama->weights().layers[1];
  const size_t q_size = static_cast<size_t>(c.q_dim()) * c.n_embd;
  const size_t k_size = static_cast<size_t>(c.kv_dim()) * c.n_embd;
  EXPECT_EQ(std::memcmp(L.wq.data, w.wq.data() + q_size, q_size * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(L.wk.data, w.wk.data() + k_size, k_size * sizeof(float)), 0);
}

// Grouped-query attention's lever: the cache stores n_kv_head heads, so it shrinks by
// n_head / n_kv_head against multi-head K/V, and the numbers come from the loaded model.
TEST(LlamaFormats, CacheBytesFollowKvHeads) {
  for (int kv : {4, 2, 1}) {
    test::TempDir dir;
    auto model = write_and_load({"bin", kv, true, false, 1, DType::kF32}, dir);
    ASSERT_NE(model, nullptr);
    GenerateOptions options;
    options.max_new_tokens = 4;
    auto result = generate(*model, {{1, 2, 3}}, options, Parallel{1});
    ASSERT_TRUE(result.is_ok()) << result.message();
    // 2 (K, V) * 2 layers * kv heads * 6 head_dim * 4 bytes * (3 + 4 - 1) positions
    EXPECT_EQ(result->stats.kv_bytes_formula, 2 * 2 * kv * 6 * 4 * 6);
    EXPECT_EQ(result->stats.kv_bytes_allocated, result->stats.kv_bytes_formula);
  }
}

// Mistral's sliding window: a window at least as long as the sequence changes nothing; a short
// one changes the logits past it and keeps cached == uncached.
TEST(LlamaFormats, SlidingWindow) {
  const std::vector<std::vector<int32_t>> prompts = {{5, 9, 13, 2, 7, 30, 31, 3, 8, 1, 44, 6}};
  auto load_with_window = [&](int window, const test::TempDir& dir) {
    LlamaConfig lc = tiny_llama_config();
    const LlamaHostWeights w = random_llama_weights(lc, 5);
    EXPECT_TRUE(write_llama_hf(dir.path(), w, HfWriteOptions{}).is_ok());
    std::string config = test::read_text(dir.file("config.json"));
    const std::string from = "\"model_type\": \"llama\"";
    config.replace(config.find(from), from.size(),
                   "\"model_type\": \"mistral\", \"sliding_window\": " +
                       (window > 0 ? std::to_string(window) : std::string("null")));
    test::write_text(dir.file("config.json"), config);
    auto model = load_model(dir.path(), {});
    EXPECT_TRUE(model.is_ok()) << model.message();
    return std::move(model.value());
  };
  test::TempDir none_dir, long_dir, short_dir;
  auto none = load_with_window(0, none_dir);
  auto wide = load_with_window(32, long_dir);
  auto narrow = load_with_window(4, short_dir);
  const StepLogits a = run(*none, prompts, true, 6, 1);
  const StepLogits b = run(*wide, prompts, true, 6, 1);
  const StepLogits c = run(*narrow, prompts, true, 6, 1);
  const StepLogits c_uncached = run(*narrow, prompts, false, 6, 1);
  const StepLogits c_paged = run(*narrow, prompts, true, 6, 1, 3);  // window cuts inside blocks
  for (size_t step = 0; step < a.logits.size(); ++step) {
    EXPECT_TRUE(bitwise_equal(a.logits[step][0], b.logits[step][0])) << step;
    EXPECT_GT(max_abs_diff(a.logits[step][0], c.logits[step][0]), 1e-4f) << step;
    EXPECT_TRUE(bitwise_equal(c.logits[step][0], c_uncached.logits[step][0])) << step;
    EXPECT_TRUE(bitwise_equal(c.logits[step][0], c_paged.logits[step][0])) << step;
  }
}

TEST(LlamaFormats, ConvertedWeightsRunCloseToFp32) {
  test::TempDir dir;
  const LlamaHostWeights w = random_llama_weights(tiny_llama_config(), 9);
  ASSERT_TRUE(write_llama2c(dir.file("m.bin"), w).is_ok());
  auto f32 = load_model(dir.file("m.bin"), {});
  LoadOptions to_bf16;
  to_bf16.convert_weights = DType::kBF16;
  auto bf16 = load_model(dir.file("m.bin"), to_bf16);
  ASSERT_TRUE(f32.is_ok() && bf16.is_ok());
  EXPECT_EQ(bf16.value()->weight_dtype(), "BF16");
  auto a = last_logits(*f32.value(), kPrompts, true, Parallel{1});
  auto b = last_logits(*bf16.value(), kPrompts, true, Parallel{1});
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  for (size_t s = 0; s < kPrompts.size(); ++s) {
    const float diff = max_abs_diff(a.value()[s], b.value()[s]);
    EXPECT_GT(diff, 0.0f);  // really converted
    EXPECT_LT(diff, 0.2f);  // and still the same model
  }
}

}  // namespace
}  // namespace kvlm
