// Llama 3.1 rope scaling, both forms: config.json's rope_scaling {rope_type "llama3", factor,
// low_freq_factor, high_freq_factor, original_max_position_embeddings} (Hugging Face's
// inverse frequencies) and GGUF's rope_freqs.weight (llama.cpp's per-frequency divisors).
// Both against tests/golden/llama3_rope_reference.json, a float64 restatement of the two
// formulas (tests/reference/llama3_rope_reference.py) for Llama 3.1 8B's, Llama 3.2 1B's and a
// tiny shape; then a scaled Llama converted to GGUF carries the factors and gives the folder's
// logits to rounding (the two forms round differently), unlike the same weights unscaled.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "generate/generate.h"
#include "model/gguf.h"
#include "model/gguf_export.h"
#include "model/llama.h"
#include "model/llama_random.h"
#include "model/loader.h"
#include "support/test_support.h"

namespace kvlm {
namespace {

nlohmann::json golden() {
  std::ifstream in(test::source_dir() + "/tests/golden/llama3_rope_reference.json");
  EXPECT_TRUE(in) << "tests/golden/llama3_rope_reference.json";
  return nlohmann::json::parse(in);
}

LlamaConfig config_of(const nlohmann::json& g) {
  LlamaConfig lc = tiny_llama_config();
  lc.model.head_dim = g["head_dim"];
  lc.model.rope_theta = g["rope_theta"];
  lc.rope_scaling.kind = RopeScaling::Kind::kLlama3;
  lc.rope_scaling.factor = g["factor"];
  lc.rope_scaling.low_freq_factor = g["low_freq_factor"];
  lc.rope_scaling.high_freq_factor = g["high_freq_factor"];
  lc.rope_scaling.original_max_position = g["original_max_position_embeddings"];
  return lc;
}

// fp32 against float64: a few roundings of relative size 6e-8 each.
void expect_close(const std::vector<float>& ours, const std::vector<double>& ref,
                  const std::string& what) {
  ASSERT_EQ(ours.size(), ref.size()) << what;
  for (size_t i = 0; i < ref.size(); ++i)
    EXPECT_NEAR(ours[i], ref[i], 1e-6 * std::fabs(ref[i])) << what << " [" << i << "]";
}

TEST(RopeScaling, Llama3FrequenciesMatchTheReference) {
  const nlohmann::json g = golden();
  ASSERT_EQ(g["configs"].size(), 3u);
  for (const nlohmann::json& c : g["configs"]) {
    const std::string name = c["name"];
    const LlamaConfig lc = config_of(c);
    const auto inv_freq = c["inv_freq"].get<std::vector<double>>();
    const auto factors = c["freq_factors"].get<std::vector<double>>();
    expect_close(llama_rope_frequencies(lc), inv_freq, name + " config.json inv_freq");
    expect_close(llama3_rope_freq_factors(lc), factors, name + " rope_freqs factors");
    // The GGUF form: the base frequencies divided by the stored factors.
    LlamaConfig from_gguf = lc;
    from_gguf.rope_scaling = RopeScaling{};
    from_gguf.rope_scaling.kind = RopeScaling::Kind::kFactors;
    for (double f : factors) from_gguf.rope_scaling.freq_factors.push_back(static_cast<float>(f));
    expect_close(llama_rope_frequencies(from_gguf), inv_freq, name + " GGUF inv_freq");
  }
  // By hand, Llama 3.1 8B: wavelength 2 pi 500000^(i/64) is below 8192 / 4 for i <= 28 (kept),
  // above 8192 for i >= 35 (divided by 8), blended for i = 29..34.
  const auto f = llama3_rope_freq_factors(config_of(g["configs"][0]));
  EXPECT_EQ(f[28], 1.0f);
  EXPECT_GT(f[29], 1.0f);
  EXPECT_LT(f[34], 8.0f);
  EXPECT_EQ(f[35], 8.0f);
}

std::vector<float> last_logits(Model& model, const std::vector<int32_t>& prompt) {
  std::vector<float> out;
  GenerateOptions options;
  options.max_new_tokens = 1;
  options.observe = [&](int, int, std::span<const float> logits) {
    out.assign(logits.begin(), logits.end());
  };
  EXPECT_TRUE(generate(model, {prompt}, options, Parallel{1}).is_ok());
  return out;
}

TEST(RopeScaling, Llama3FolderConvertsToRopeFreqs) {
  const nlohmann::json tiny = golden()["configs"][2];
  LlamaConfig lc = config_of(tiny);  // head_dim 16, band at frequencies 1 and 2
  lc.model.n_embd = 64;
  lc.model.n_head = 4;
  lc.model.n_kv_head = 2;
  lc.model.n_ctx = 64;
  test::TempDir dir, plain_dir;
  const LlamaHostWeights w = random_llama_weights(lc, 11);
  ASSERT_TRUE(write_llama_hf(dir.path(), w, {}).is_ok());
  LlamaHostWeights unscaled = w;
  unscaled.config.rope_scaling = RopeScaling{};
  ASSERT_TRUE(write_llama_hf(plain_dir.path(), unscaled, {}).is_ok());
  auto folder = load_model(dir.path(), LoadOptions{});
  auto plain = load_model(plain_dir.path(), LoadOptions{});
  ASSERT_TRUE(folder) << folder.message();
  ASSERT_TRUE(plain) << plain.message();
  ASSERT_EQ(dynamic_cast<LlamaModel&>(*folder.value()).llama_config().rope_scaling.kind,
            RopeScaling::Kind::kLlama3);  // config.json round-trips rope_scaling

  const std::string gguf = dir.file("scaled.gguf");
  ASSERT_TRUE(write_gguf(*folder.value(), nullptr, DType::kF32, gguf).is_ok());
  auto file = GgufFile::open(gguf);
  ASSERT_TRUE(file) << file.message();
  const GgufTensor* t = file->tensor("rope_freqs.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->dtype, DType::kF32);
  EXPECT_EQ(t->ne[0], 8);
  const auto ref = tiny["freq_factors"].get<std::vector<double>>();
  for (int i = 0; i < 8; ++i)
    EXPECT_NEAR(reinterpret_cast<const float*>(t->data)[i], ref[i], 1e-6 * ref[i]) << i;
  auto converted = load_model(gguf, LoadOptions{});
  ASSERT_TRUE(converted) << converted.message();

  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back((i * 7 + 3) % lc.model.n_vocab);
  const auto a = last_logits(*folder.value(), prompt), b = last_logits(*converted.value(), prompt),
             c = last_logits(*plain.value(), prompt);
  float to_gguf = 0, to_plain = 0;
  for (size_t v = 0; v < a.size(); ++v) {
    to_gguf = std::max(to_gguf, std::fabs(a[v] - b[v]));
    to_plain = std::max(to_plain, std::fabs(a[v] - c[v]));
  }
  EXPECT_LT(to_gguf, 1e-4f);   // the same scaling, rounded differently
  EXPECT_GT(to_plain, 1e-2f);  // the scaling matters at 40 positions
  // And it survives another conversion (the GGUF's factors written back as they are).
  const std::string again = dir.file("again.gguf");
  ASSERT_TRUE(write_gguf(*converted.value(), nullptr, DType::kF32, again).is_ok());
  auto reloaded = load_model(again, LoadOptions{});
  ASSERT_TRUE(reloaded) << reloaded.message();
  EXPECT_EQ(last_logits(*reloaded.value(), prompt), b);
}

}  // namespace
}  // namespace kvlm
