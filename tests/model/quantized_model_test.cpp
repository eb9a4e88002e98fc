// Quantized weights keep the engine's exactness contract: a Llama and a GPT-2 quantized at load
// (`--weights q8_0|q4_0`) give bitwise-identical logits cached and uncached, alone or batched, on
// a paged cache, at 1 or 3 threads; and a GGUF written by write_gguf in Q8_0 / Q4_0 loads to the
// very same bits as quantizing the safetensors model at load (same quantizer, same kernels).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "generate/generate.h"
#include "model/gguf_export.h"
#include "model/llama_random.h"
#include "model/loader.h"
#include "support/test_support.h"

namespace kvlm {

namespace {

const std::vector<std::vector<int32_t>> kPrompts = {
    {7, 3, 19, 1, 25, 8, 11, 4, 2, 15}, {9, 2}, {1, 6, 4, 22}, {7, 3, 19, 1, 25, 30}};

using Logits = std::vector<std::vector<std::vector<float>>>;  // [step][seq][vocab]

Logits run(Model& model, const std::vector<std::vector<int32_t>>& prompts, bool cached, int threads,
           int block_size = 0) {
  Logits out;
  GenerateOptions options;
  options.max_new_tokens = 8;
  options.use_cache = cached;
  if (block_size > 0) {
    PagedGenerateOptions paged;
    paged.block_size = block_size;
    options.paged = paged;
  }
  options.observe = [&](int step, int seq, std::span<const float> logits) {
    if (out.size() <= static_cast<size_t>(step)) out.resize(step + 1);
    if (out[step].size() <= static_cast<size_t>(seq)) out[step].resize(seq + 1);
    out[step][seq].assign(logits.begin(), logits.end());
  };
  auto result = generate(model, prompts, options, Parallel{threads});
  EXPECT_TRUE(result.is_ok()) << result.message();
  return out;
}

void expect_same_bits(const Logits& a, const Logits& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t step = 0; step < a.size(); ++step) {
    ASSERT_EQ(a[step].size(), b[step].size()) << what;
    for (size_t s = 0; s < a[step].size(); ++s)
      EXPECT_EQ(0, std::memcmp(a[step][s].data(), b[step][s].data(), a[step][s].size() * 4))
          << what << ": step " << step << " seq " << s;
  }
}

// A Llama whose widths are whole Q8_0/Q4_0 blocks: 64 wide, 4 heads of 16 sharing 2 KV heads,
// 96 hidden.
LlamaConfig block_llama_config() {
  LlamaConfig c = tiny_llama_config();
  c.model.n_embd = 64;
  c.model.n_head = 4;
  c.model.n_kv_head = 2;
  c.model.head_dim = 16;
  c.model.n_ff = 96;
  return c;
}

std::unique_ptr<Model> load(const std::string& path, std::optional<DType> weights) {
  LoadOptions options;
  options.convert_weights = weights;
  auto model = load_model(path, options);
  EXPECT_TRUE(model.is_ok()) << model.message();
  return model ? std::move(model.value()) : nullptr;
}

class QuantizedLlama : public ::testing::TestWithParam<DType> {};

TEST_P(QuantizedLlama, ExactnessContractHolds) {
  test::TempDir dir;
  ASSERT_TRUE(
      write_llama_hf(dir.path(), random_llama_weights(block_llama_config(), 3), {}).is_ok());
  auto model = load(dir.path(), GetParam());
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->weight_dtype(), dtype_name(GetParam()));
  const Logits cached = run(*model, kPrompts, true, 1);
  expect_same_bits(cached, run(*model, kPrompts, false, 1), "uncached");
  expect_same_bits(cached, run(*model, kPrompts, true, 3), "3 threads");
  expect_same_bits(cached, run(*model, kPrompts, true, 1, 4), "paged, blocks of 4");
  for (size_t s = 0; s < kPrompts.size(); ++s) {  // each prompt alone
    const Logits alone = run(*model, {kPrompts[s]}, true, 2);
    for (size_t step = 0; step < alone.size(); ++step)
      EXPECT_EQ(
          0, std::memcmp(alone[step][0].data(), cached[step][s].data(), alone[step][0].size() * 4))
          << "prompt " << s << " alone, step " << step;
  }
  // The same quantization written as GGUF and loaded back: the same bits.
  const std::string gguf = dir.file("model.gguf");
  auto f32 = load(dir.path(), std::nullopt);
  ASSERT_NE(f32, nullptr);
  ASSERT_TRUE(write_gguf(*f32, nullptr, GetParam(), gguf).is_ok());
  auto from_gguf = load(gguf, std::nullopt);
  ASSERT_NE(from_gguf, nullptr);
  EXPECT_EQ(from_gguf->weight_dtype(), dtype_name(GetParam()));
  expect_same_bits(cached, run(*from_gguf, kPrompts, true, 1), "GGUF");
  // And near the F32 model it came from: this random model amplifies weight noise (2.4% of the
  // largest logit for Q8_0, 34% for Q4_0: the 16x of their step sizes); a wrong layout or scale
  // would be off by the logits' whole size.
  const Logits exact = run(*f32, {kPrompts[0]}, false, 1);
  float max_diff = 0.0f, max_logit = 0.0f;
  for (size_t v = 0; v < exact[0][0].size(); ++v) {
    max_diff = std::max(max_diff, std::fabs(exact[0][0][v] - cached[0][0][v]));
    max_logit = std::max(max_logit, std::fabs(exact[0][0][v]));
  }
  EXPECT_LT(max_diff / max_logit, GetParam() == DType::kQ8_0 ? 0.05f : 0.6f)
      << "max |logit| " << max_logit << ", max difference " << max_diff;
}

INSTANTIATE_TEST_SUITE_P(Types, QuantizedLlama, ::testing::Values(DType::kQ8_0, DType::kQ4_0),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(QuantizedGpt2, CachedEqualsUncachedAndThreadInvariant) {
  test::TempDir dir;
  ASSERT_TRUE(write_random_gpt2(dir.path(), test::tiny_gpt2_config(), {}).is_ok());
  auto model = load(dir.path(), DType::kQ8_0);
  ASSERT_NE(model, nullptr);
  const Logits cached = run(*model, kPrompts, true, 1);
  expect_same_bits(cached, run(*model, kPrompts, false, 1), "uncached");
  expect_same_bits(cached, run(*model, kPrompts, true, 3), "3 threads");
}

}  // namespace
}  // namespace kvlm
