// kvlm perplexity: the windows and which tokens they score; a GPT-2 built so that its next-token
// distribution is known (every weight zero except ln_f's bias and the embedding, so the logits
// are wte . b whatever the context) scored by hand, through the library and the CLI; the numpy
// reference (tests/golden/tiny_gpt2_perplexity.json); and the comparison's invariants.
#include "eval/perplexity.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "model/loader.h"
#include "model/random_gpt2.h"
#include "model/safetensors_writer.h"
#include "support/test_support.h"
#include "tokenizer/byte_unicode.h"

namespace kvlm {
namespace {

TEST(PerplexityWindows, LlamaPerplexityWindowsScoreTheSecondHalf) {
  auto w = perplexity_windows(35, 8, 0);
  ASSERT_TRUE(w.is_ok()) << w.message();
  ASSERT_EQ(w->size(), 4u);  // 35 / 8: the last 3 tokens are not used
  EXPECT_EQ((*w)[3].first, 24);
  EXPECT_EQ((*w)[3].length, 8);
  EXPECT_EQ((*w)[3].first_target, 5);  // offsets 5, 6, 7
  auto short_text = perplexity_windows(7, 8, 0);
  ASSERT_FALSE(short_text.is_ok());
  EXPECT_NE(short_text.message().find("7 tokens, fewer than one window of --ctx 8"),
            std::string::npos)
      << short_text.message();
}

TEST(PerplexityWindows, StridedWindowsScoreEveryTokenButTheFirstOnce) {
  auto w = perplexity_windows(18, 8, 3);
  ASSERT_TRUE(w.is_ok()) << w.message();
  std::vector<int> scored(18, 0);
  for (const EvalWindow& x : *w) {
    EXPECT_LE(x.length, 8);
    for (int t = x.first_target; t < x.length; ++t) ++scored[x.first + t];
  }
  EXPECT_EQ(scored[0], 0);
  for (int t = 1; t < 18; ++t) EXPECT_EQ(scored[t], 1) << t;
  EXPECT_EQ(w->back().first + w->back().length, 18);
  EXPECT_FALSE(perplexity_windows(18, 8, 9).is_ok());  // stride beyond ctx
  EXPECT_FALSE(perplexity_windows(18, 8, -1).is_ok());
}

// A GPT-2 of 260 tokens (the 256 bytes, "ab", spare ids) whose logits are wte[v][0] * 1.
constexpr int kV = 260, kC = 4;

std::vector<float> known_logits() {
  std::vector<float> l(kV, std::log(0.4f / (kV - 3)));
  l['x'] = std::log(0.3f);
  l['y'] = std::log(0.2f);
  l['z'] = std::log(0.1f);
  return l;
}

void write_known_model(const std::string& dir) {
  ModelConfig c;
  c.arch = Architecture::kGpt2;
  c.n_vocab = kV;
  c.n_ctx = 32;
  c.n_embd = kC;
  c.n_layer = 1;
  c.n_head = 1;
  c.n_kv_head = 1;
  c.head_dim = kC;
  c.n_ff = 4 * kC;
  test::write_text(dir + "/config.json", gpt2_config_json(c));
  auto zeros = [](std::vector<int64_t> shape) {
    size_t n = 1;
    for (int64_t d : shape) n *= d;
    return std::vector<float>(n, 0.0f);
  };
  std::vector<std::pair<std::string, std::vector<float>>> named;
  std::vector<std::vector<int64_t>> shapes;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, std::vector<float> v) {
    named.push_back({name, v.empty() ? zeros(shape) : std::move(v)});
    shapes.push_back(shape);
  };
  std::vector<float> wte(kV * kC, 0.0f);
  const std::vector<float> l = known_logits();
  for (int v = 0; v < kV; ++v) wte[v * kC] = l[v];
  add("wte.weight", {kV, kC}, wte);
  add("wpe.weight", {32, kC}, {});
  for (const char* n : {"ln_1.weight", "ln_1.bias", "ln_2.weight", "ln_2.bias", "attn.c_proj.bias",
                        "mlp.c_proj.bias"})
    add(std::string("h.0.") + n, {kC}, {});
  add("h.0.attn.c_attn.weight", {kC, 3 * kC}, {});
  add("h.0.attn.c_attn.bias", {3 * kC}, {});
  add("h.0.attn.c_proj.weight", {kC, kC}, {});
  add("h.0.mlp.c_fc.weight", {kC, 4 * kC}, {});
  add("h.0.mlp.c_fc.bias", {4 * kC}, {});
  add("h.0.mlp.c_proj.weight", {4 * kC, kC}, {});
  add("ln_f.weight", {kC}, {});
  add("ln_f.bias", {kC}, {1.0f, 0.0f, 0.0f, 0.0f});
  std::vector<TensorToWrite> tensors;
  for (size_t i = 0; i < named.size(); ++i) {
    const auto& v = named[i].second;
    std::vector<uint8_t> bytes(v.size() * 4);
    std::memcpy(bytes.data(), v.data(), bytes.size());
    tensors.push_back({named[i].first, "F32", shapes[i], bytes});
  }
  const auto file = serialize_safetensors(tensors);
  ASSERT_TRUE(write_file(dir + "/model.safetensors", file.data(), file.size()).is_ok());
  // Byte-level BPE: ids 0..255 are the bytes, 256 = "ab" (one merge).
  nlohmann::json vocab;
  for (int b = 0; b < 256; ++b) vocab[bytes_to_byte_level(std::string(1, char(b)))] = b;
  vocab["ab"] = 256;
  test::write_text(dir + "/vocab.json", vocab.dump());
  test::write_text(dir + "/merges.txt", "#version: 0.2\na b\n");
}

// -log p(t) of the model's fixed distribution, in double from the stored float logits.
double nll_of(int32_t t) {
  const std::vector<float> l = known_logits();
  double sum = 0;
  for (float x : l) sum += std::exp(double{x});
  return std::log(sum) - l[t];
}

TEST(Perplexity, AModelWithAKnownDistributionScoresByHand) {
  test::TempDir dir;
  write_known_model(dir.path());
  auto model = load_model(dir.path(), LoadOptions{});
  ASSERT_TRUE(model.is_ok()) << model.message();
  // 20 tokens: windows of 8 are [0, 8) and [8, 16), scoring offsets 5..7; the last 4 unused.
  const std::vector<int32_t> text = {'x', 'x', 'x', 'x', 'x', 'x', 'y', 'z', 'q', 'q',
                                     'q', 'q', 'q', 'z', 'z', 'x', 'y', 'y', 'y', 'y'};
  EvalConfig config{model.value().get(), {}};
  PerplexityOptions options;
  options.ctx = 8;
  auto r = perplexity(text, config, nullptr, options, Parallel{1});
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_EQ(r->tokens, 6);
  const double want =
      (nll_of('x') + nll_of('y') + nll_of('z') + nll_of('z') + nll_of('z') + nll_of('x')) / 6;
  EXPECT_NEAR(r->nll, want, 1e-9);
  EXPECT_NEAR(r->ppl, std::exp(want), 1e-9 * std::exp(want));
  // Strided: every token but the first, once.
  options.stride = 3;
  r = perplexity(text, config, nullptr, options, Parallel{1});
  ASSERT_TRUE(r.is_ok()) << r.message();
  double all = 0;
  for (size_t t = 1; t < text.size(); ++t) all += nll_of(text[t]);
  EXPECT_EQ(r->tokens, 19);
  EXPECT_NEAR(r->nll, all / 19, 1e-9);

  // The CLI, on a text file through the model folder's tokenizer: the same figure, and a
  // comparison of a configuration with itself (K/V here are all zero: q8_0 stores them exactly).
  test::write_text(dir.file("text.txt"), "xxxxxxyzqqqqqzzxyyyy");
  auto run = test::run_kvlm("perplexity --model " + dir.path() + " --file " + dir.file("text.txt") +
                            " --ctx 8 --kv-dtype q8_0 --compare-kv-dtype f32 --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto j = nlohmann::json::parse(run.out);
  const std::vector<std::string> keys = {"ppl",     "ppl_base",   "kld_mean",
                                         "kld_p99", "top1_agree", "tokens"};
  std::vector<std::string> got;
  for (auto it = j.begin(); it != j.end(); ++it) got.push_back(it.key());
  std::sort(got.begin(), got.end());
  std::vector<std::string> sorted_keys = keys;
  std::sort(sorted_keys.begin(), sorted_keys.end());
  EXPECT_EQ(got, sorted_keys);
  EXPECT_NEAR(j["ppl"].get<double>(), std::exp(want), 1e-9 * std::exp(want));
  EXPECT_EQ(j["ppl_base"].get<double>(), j["ppl"].get<double>());
  EXPECT_EQ(j["kld_mean"].get<double>(), 0.0);
  EXPECT_EQ(j["kld_p99"].get<double>(), 0.0);
  EXPECT_EQ(j["top1_agree"].get<double>(), 1.0);
  EXPECT_EQ(j["tokens"].get<int>(), 6);
}

TEST(Perplexity, MatchesTheNumpyReference) {
  const std::string golden = test::source_dir() + "/tests/golden";
  const auto fixture =
      nlohmann::json::parse(test::read_text(golden + "/tiny_gpt2_perplexity.json"));
  auto model = load_model(golden + "/" + fixture["model"].get<std::string>(), LoadOptions{});
  ASSERT_TRUE(model.is_ok()) << model.message();
  const auto tokens = fixture["tokens"].get<std::vector<int32_t>>();
  for (const auto& c : fixture["cases"]) {
    PerplexityOptions options;
    options.ctx = c["ctx"];
    options.stride = c["stride"];
    auto r = perplexity(tokens, {model.value().get(), {}}, nullptr, options, Parallel{2});
    ASSERT_TRUE(r.is_ok()) << r.message();
    const double want = c["ppl"];
    EXPECT_EQ(r->tokens, c["scored"].get<int64_t>());
    // fp32 logits within ~1e-5 of float64's: the mean log-likelihood within 1e-4.
    EXPECT_NEAR(r->nll, std::log(want), 1e-4) << "ctx " << c["ctx"] << " stride " << c["stride"];
  }
}

// Comparing a cache dtype against f32: the base's perplexity is the plain f32 run's, to the bit;
// the KL divergence is small but not zero; the same dtype on both sides gives exactly zero.
TEST(Perplexity, ComparisonOfCacheDtypes) {
  test::TempDir dir;
  RandomGpt2Options random;
  random.seed = 9;
  ASSERT_TRUE(write_random_gpt2(dir.path(), test::tiny_gpt2_config(), random).is_ok());
  auto model = load_model(dir.path(), LoadOptions{});
  ASSERT_TRUE(model.is_ok()) << model.message();
  std::vector<int32_t> tokens;
  for (int i = 0; i < 150; ++i) tokens.push_back((i * 37 + 11) % 64);
  PerplexityOptions options;
  options.ctx = 32;
  EvalConfig f32{model.value().get(), {}};
  EvalConfig q8{model.value().get(), {KvDtype::q8_0, 1, {}, {}, {}, {}}};
  auto plain = perplexity(tokens, f32, nullptr, options, Parallel{1});
  auto compared = perplexity(tokens, q8, &f32, options, Parallel{2});
  ASSERT_TRUE(plain.is_ok() && compared.is_ok()) << compared.message();
  EXPECT_EQ(compared->ppl_base, plain->ppl);
  EXPECT_NE(compared->ppl, plain->ppl);
  EXPECT_GT(compared->kld_mean, 0.0);
  EXPECT_LT(compared->kld_mean, 1e-2);
  EXPECT_GE(compared->kld_p99, compared->kld_mean);
  EXPECT_GT(compared->top1_agree, 0.8);
  auto same = perplexity(tokens, q8, &q8, options, Parallel{1});
  ASSERT_TRUE(same.is_ok());
  EXPECT_EQ(same->kld_mean, 0.0);
  EXPECT_EQ(same->top1_agree, 1.0);
  EXPECT_EQ(same->ppl, compared->ppl);
}

TEST(Perplexity, BadFlagsAreRefusedByName) {
  test::TempDir dir;
  write_known_model(dir.path());
  test::write_text(dir.file("text.txt"), "xyz");
  auto run = test::run_kvlm("perplexity --model " + dir.path() + " --file " + dir.file("text.txt") +
                            " --ctx 8");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("3 tokens, fewer than one window of --ctx 8"), std::string::npos)
      << run.err;
  run = test::run_kvlm("perplexity --model " + dir.path() + " --file " + dir.file("text.txt") +
                       " --kv-dtype int4");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("--kv-dtype: unknown KV cache dtype 'int4'"), std::string::npos)
      << run.err;
  run = test::run_kvlm("perplexity --model " + dir.path() + " --file " + dir.file("missing.txt"));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("missing.txt"), std::string::npos) << run.err;
  run = test::run_kvlm("perplexity --model " + dir.path() + " --file " + dir.file("text.txt") +
                       " --compare-kv-dtype f16 --compare-weights bf16");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("not both"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace kvlm
