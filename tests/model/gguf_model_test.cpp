// Models from GGUF files: a random Llama and a random GPT-2 written as safetensors, converted
// with write_gguf (what `kvlm convert` runs) and loaded back through load_model. Llama's logits
// equal the safetensors original's bitwise in F32 and F16 (same matrices, same [n_out, n_in]
// layout, same kernels); GPT-2's GGUF matrices are transposed from its Conv1D layout, so its
// reduction order differs and the logits agree to rounding. Then the loader's checks on
// crafted files: each names the key or tensor, what was expected and what was found.
#include "model/gguf_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "generate/generate.h"
#include "model/gguf_export.h"
#include "model/gguf_tokenizer.h"
#include "model/gguf_writer.h"
#include "model/llama.h"
#include "model/llama_random.h"
#include "model/loader.h"
#include "support/expect_error.h"
#include "support/test_support.h"
#include "tokenizer/byte_unicode.h"

namespace kvlm {

namespace {

using test::expect_error;

const std::vector<std::vector<int32_t>> kPrompts = {{7, 3, 19, 1, 25, 8, 11, 4}, {9, 2}, {47}};

// logits [step][seq][vocab] of greedy generation.
std::vector<std::vector<std::vector<float>>> run(Model& model, bool cached, int threads = 1) {
  std::vector<std::vector<std::vector<float>>> out;
  GenerateOptions options;
  options.max_new_tokens = 6;
  options.use_cache = cached;
  options.observe = [&](int step, int seq, std::span<const float> logits) {
    if (out.size() <= static_cast<size_t>(step)) out.resize(step + 1);
    if (out[step].size() <= static_cast<size_t>(seq)) out[step].resize(seq + 1);
    out[step][seq].assign(logits.begin(), logits.end());
  };
  auto result = generate(model, kPrompts, options, Parallel{threads});
  EXPECT_TRUE(result.is_ok()) << result.message();
  return out;
}

std::unique_ptr<Model> load(const std::string& path, LoadOptions options = {}) {
  auto model = load_model(path, options);
  EXPECT_TRUE(model.is_ok()) << model.message();
  return model ? std::move(model.value()) : nullptr;
}

class GgufLlama : public ::testing::TestWithParam<DType> {};

TEST_P(GgufLlama, LogitsEqualSafetensorsBitwise) {
  test::TempDir dir;
  const DType dtype = GetParam();
  HfWriteOptions hf;
  hf.dtype = dtype;
  LlamaConfig config = tiny_llama_config();
  config.model.tied_embeddings = false;
  ASSERT_TRUE(write_llama_hf(dir.path(), random_llama_weights(config, 7), hf).is_ok());
  auto original = load(dir.path());
  ASSERT_NE(original, nullptr);
  const std::string gguf = dir.file("model.gguf");
  ASSERT_TRUE(write_gguf(*original, nullptr, dtype, gguf).is_ok());
  {
    // llama.cpp's llama_ftype (ALL_F32 0, MOSTLY_F16 1): what its readers show as the type.
    auto file = GgufFile::open(gguf);
    ASSERT_TRUE(file) << file.message();
    auto file_type = file->get_uint("general.file_type");
    ASSERT_TRUE(file_type) << file_type.message();
    EXPECT_EQ(file_type.value(), dtype == DType::kF16 ? 1u : 0u);
  }
  auto converted = load(gguf);
  ASSERT_NE(converted, nullptr);
  EXPECT_EQ(converted->weight_dtype(), dtype_name(dtype));
  EXPECT_EQ(converted->config().n_kv_head, config.model.n_kv_head);
  EXPECT_FALSE(converted->config().tied_embeddings);
  const auto a = run(*original, true), b = run(*converted, true);
  ASSERT_EQ(a.size(), b.size());
  for (size_t step = 0; step < a.size(); ++step)
    for (size_t s = 0; s < a[step].size(); ++s)
      EXPECT_EQ(0, std::memcmp(a[step][s].data(), b[step][s].data(), a[step][s].size() * 4))
          << "step " << step << " seq " << s;
}

INSTANTIATE_TEST_SUITE_P(Types, GgufLlama, ::testing::Values(DType::kF32, DType::kF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(GgufGpt2, LogitsMatchSafetensorsAndCachedEqualsUncached) {
  test::TempDir dir;
  RandomGpt2Options options;
  options.separate_lm_head = true;
  ASSERT_TRUE(write_random_gpt2(dir.path(), test::tiny_gpt2_config(), options).is_ok());
  auto original = load(dir.path());
  ASSERT_NE(original, nullptr);
  const std::string gguf = dir.file("model.gguf");
  ASSERT_TRUE(write_gguf(*original, nullptr, DType::kF32, gguf).is_ok());
  auto converted = load(gguf);
  ASSERT_NE(converted, nullptr);
  EXPECT_EQ(converted->config().n_ctx, original->config().n_ctx);
  const auto a = run(*original, true), b = run(*converted, true), c = run(*converted, false, 3);
  ASSERT_EQ(a.size(), b.size());
  for (size_t step = 0; step < a.size(); ++step)
    for (size_t s = 0; s < a[step].size(); ++s)
      for (size_t v = 0; v < a[step][s].size(); ++v) {
        EXPECT_NEAR(a[step][s][v], b[step][s][v], 1e-4f) << step << " " << s << " " << v;
        EXPECT_EQ(b[step][s][v], c[step][s][v]) << "cached vs uncached, 3 threads";
      }
}

TEST(GgufCli, ConvertThenGenerateGivesTheSameTokens) {
  test::TempDir dir;
  ASSERT_TRUE(write_random_gpt2(dir.path(), test::tiny_gpt2_config(), {}).is_ok());
  const std::string gguf = dir.file("tiny.gguf");
  const auto convert = test::run_kvlm("convert --model " + dir.path() + " --out " + gguf +
                                      " --type q8_0 --no-tokenizer");
  ASSERT_EQ(convert.exit_code, 0) << convert.err;
  const std::string args = " --ids 7,3,19 --max-new 5 --json";
  const auto from_gguf = test::run_kvlm("generate --model " + gguf + args);
  const auto at_load = test::run_kvlm("generate --model " + dir.path() + " --weights q8_0" + args);
  ASSERT_EQ(from_gguf.exit_code, 0) << from_gguf.err;
  ASSERT_EQ(at_load.exit_code, 0) << at_load.err;
  const auto ids = [](const std::string& json) { return json.substr(0, json.find("\"stats\"")); };
  EXPECT_EQ(ids(from_gguf.out), ids(at_load.out));
  const auto bad =
      test::run_kvlm("convert --model " + dir.path() + " --out " + gguf + " --type q5_k");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--type"), std::string::npos) << bad.err;
  const auto missing = test::run_kvlm("generate --model " + dir.file("none.gguf") + args);
  EXPECT_EQ(missing.exit_code, 1);
}

// A valid tiny Llama GGUF to break one piece at a time.
struct TinyLlamaGguf {
  int C = 8, F = 16, V = 4, L = 1;
  std::vector<uint8_t> zeros(size_t n) { return std::vector<uint8_t>(4 * n, 0); }
  GgufWriter writer(bool with_blocks = true) {
    GgufWriter w;
    w.add_string("general.architecture", "llama");
    w.add_u32("llama.context_length", 16);
    w.add_u32("llama.embedding_length", C);
    w.add_u32("llama.block_count", L);
    w.add_u32("llama.feed_forward_length", F);
    w.add_u32("llama.attention.head_count", 2);
    w.add_tensor("token_embd.weight", {C, V}, DType::kF32, zeros(C * V));
    w.add_tensor("output_norm.weight", {C}, DType::kF32, zeros(C));
    if (!with_blocks) return w;
    const std::string p = "blk.0.";
    for (const char* n : {"attn_norm", "ffn_norm"})
      w.add_tensor(p + n + ".weight", {C}, DType::kF32, zeros(C));
    for (const char* n : {"attn_q", "attn_k", "attn_v", "attn_output"})
      w.add_tensor(p + n + ".weight", {C, C}, DType::kF32, zeros(C * C));
    for (const char* n : {"ffn_gate", "ffn_up"})
      w.add_tensor(p + n + ".weight", {C, F}, DType::kF32, zeros(C * F));
    w.add_tensor(p + "ffn_down.weight", {F, C}, DType::kF32, zeros(C * F));
    return w;
  }
};

Result<std::unique_ptr<Model>> load_writer(const GgufWriter& w, const test::TempDir& dir) {
  const std::string path = dir.file("crafted.gguf");
  EXPECT_TRUE(w.write(path).is_ok());
  return load_model(path, LoadOptions{});
}

TEST(GgufModel, LoadsTheTinyFileAndRefusesEachBrokenPiece) {
  test::TempDir dir;
  TinyLlamaGguf t;
  ASSERT_TRUE(load_writer(t.writer(), dir).is_ok());
  {
    GgufWriter w = t.writer();
    w.add_u32("llama.block_count", 1);  // a second block_count: a duplicate key
    expect_error(load_writer(w, dir), {"key 'llama.block_count'", "duplicate"});
  }
  {  // block_count far above the tensors present: refused before anything is sized from it
    TinyLlamaGguf big;
    big.L = 1000000000;
    GgufWriter b = big.writer();
    expect_error(load_writer(b, dir), {"llama.block_count", "found 1000000000"});
    big.L = 3;  // plausible, but blocks 1 and 2 are missing
    expect_error(load_writer(big.writer(), dir), {"missing tensor 'blk.1.attn_norm.weight'"});
  }
  {
    TinyLlamaGguf bad;
    GgufWriter w = bad.writer();
    w.add_u32("tokenizer.ggml.eos_token_id", 4);  // vocabulary of 4
    expect_error(load_writer(w, dir), {"tokenizer.ggml.eos_token_id", "[0, 3]", "found 4"});
  }
  {
    GgufWriter w;
    w.add_string("general.architecture", "mamba");
    expect_error(load_writer(w, dir),
                 {"general.architecture", "\"mamba\"", "supported: gpt2, llama"});
  }
  {
    GgufWriter w = t.writer(false);
    w.add_u32("llama.rope.dimension_count", 2);
    expect_error(load_writer(w, dir), {"llama.rope.dimension_count", "expected 4", "found 2"});
  }
  {
    GgufWriter w = t.writer(false);
    const std::string p = "blk.0.";
    w.add_tensor(p + "attn_norm.weight", {t.C + 1}, DType::kF32, t.zeros(t.C + 1));
    expect_error(load_writer(w, dir),
                 {"tensor 'blk.0.attn_norm.weight'", "shape [9]", "expected [8, 1]"});
  }
}

// rope_freqs.weight (Llama 3.1 scaling as llama.cpp stores it): F32 [head_dim / 2] of positive
// finite divisors; each broken piece named.
TEST(GgufModel, RopeFreqsChecked) {
  test::TempDir dir;
  TinyLlamaGguf t;  // 2 heads of 4: 2 rotary frequencies
  const auto with = [&](std::vector<int64_t> shape, DType type, std::vector<float> values) {
    GgufWriter w = t.writer();
    std::vector<uint8_t> bytes(values.size() * 4);
    std::memcpy(bytes.data(), values.data(), bytes.size());
    if (type == DType::kF16) bytes.resize(bytes.size() / 2);
    w.add_tensor("rope_freqs.weight", std::move(shape), type, std::move(bytes));
    return w;
  };
  auto ok = load_writer(with({2}, DType::kF32, {1.0f, 4.0f}), dir);
  ASSERT_TRUE(ok) << ok.message();
  const auto& scaling = dynamic_cast<LlamaModel&>(*ok.value()).llama_config().rope_scaling;
  EXPECT_EQ(scaling.kind, RopeScaling::Kind::kFactors);
  EXPECT_EQ(scaling.freq_factors, (std::vector<float>{1.0f, 4.0f}));
  expect_error(load_writer(with({3}, DType::kF32, {1, 1, 1}), dir),
               {"tensor 'rope_freqs.weight'", "expected shape [2]", "ne[0] 3"});
  expect_error(load_writer(with({2}, DType::kF16, {1, 1}), dir),
               {"tensor 'rope_freqs.weight'", "expected type F32, found F16"});
  expect_error(load_writer(with({2}, DType::kF32, {1.0f, 0.0f}), dir),
               {"tensor 'rope_freqs.weight'", "factor 1 is 0", "positive finite"});
  expect_error(load_writer(with({2}, DType::kF32, {NAN, 1.0f}), dir),
               {"tensor 'rope_freqs.weight'", "factor 0 is nan"});
  GgufWriter both = with({2}, DType::kF32, {1.0f, 1.0f});
  both.add_string("llama.rope.scaling.type", "linear");
  both.add_f32("llama.rope.scaling.factor", 2.0f);
  expect_error(load_writer(both, dir), {"tensor 'rope_freqs.weight'", "one scaling at a time"});
}

TEST(GgufModel, RefusesAbsurdHyperparameters) {
  test::TempDir dir;
  for (const auto& [key, value, expected] :
       std::vector<std::tuple<std::string, uint64_t, std::string>>{
           {"llama.context_length", 1ull << 40, "[1, 1048576]"},
           {"llama.embedding_length", 0, "[1, 2147483647]"},
           {"llama.attention.head_count", 3,
            "expected a divisor of llama.embedding_length (8), found 3"}}) {
    TinyLlamaGguf t;
    GgufWriter w;
    w.add_string("general.architecture", "llama");
    for (const auto& [k, v] :
         std::vector<std::pair<std::string, uint64_t>>{{"llama.context_length", 16},
                                                       {"llama.embedding_length", 8},
                                                       {"llama.block_count", 1},
                                                       {"llama.feed_forward_length", 16},
                                                       {"llama.attention.head_count", 2}})
      w.add_u64(k, k == key ? value : v);
    w.add_tensor("token_embd.weight", {8, 4}, DType::kF32, t.zeros(32));
    auto r = load_writer(w, dir);
    SCOPED_TRACE(key);
    expect_error(r, {expected});
  }
}

TEST(GgufTokenizer, VocabularyChecks) {
  {
    GgufWriter w;
    w.add_string("tokenizer.ggml.model", "llama");
    w.add_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>"});
    w.add_f32_array("tokenizer.ggml.scores", {0, 0});
    const auto bytes = w.bytes();
    auto f = GgufFile::parse(bytes, "v.gguf");
    ASSERT_TRUE(f.is_ok());
    expect_error(gguf_tokenizer(f.value()),
                 {"key 'tokenizer.ggml.scores'", "2 entries", "expected one per token (3"});
  }
  {
    GgufWriter w;
    w.add_string("tokenizer.ggml.model", "gpt2");
    w.add_string_array("tokenizer.ggml.tokens", {"a", "b"});
    w.add_u32("tokenizer.ggml.bos_token_id", 2);
    w.add_string_array("tokenizer.ggml.merges", {});
    const auto bytes = w.bytes();
    auto f = GgufFile::parse(bytes, "v.gguf");
    ASSERT_TRUE(f.is_ok());
    expect_error(gguf_tokenizer(f.value()),
                 {"tokenizer.ggml.bos_token_id", "token id 2", "outside"});
  }
  {
    GgufWriter w;
    w.add_string("tokenizer.ggml.model", "bert");
    w.add_string_array("tokenizer.ggml.tokens", {"a"});
    const auto bytes = w.bytes();
    auto f = GgufFile::parse(bytes, "v.gguf");
    ASSERT_TRUE(f.is_ok());
    expect_error(gguf_tokenizer(f.value()),
                 {"tokenizer.ggml.model", "\"bert\"", "supported: gpt2, llama"});
  }
}

TEST(GgufTokenizer, ByteLevelBpeFromTokensAndMerges) {
  // The 256 byte tokens in GPT-2's spelling, then "Ġt" and "Ġth" merged from them.
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) {
    std::string s;
    append_utf8(byte_to_code_point(static_cast<uint8_t>(b)), &s);
    tokens.push_back(s);
  }
  const std::string G = tokens[' '];
  tokens.push_back(G + "t");   // 256
  tokens.push_back(G + "th");  // 257
  tokens.push_back("<|endoftext|>");
  GgufWriter w;
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", "gpt-2");
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  w.add_string_array("tokenizer.ggml.merges", {G + " t", G + "t h"});
  std::vector<int32_t> types(tokens.size(), 1);
  types.back() = 3;
  w.add_i32_array("tokenizer.ggml.token_type", types);
  w.add_u32("tokenizer.ggml.eos_token_id", 258);
  const auto bytes = w.bytes();
  auto f = GgufFile::parse(bytes, "bpe.gguf");
  ASSERT_TRUE(f.is_ok()) << f.message();
  auto tok = gguf_tokenizer(f.value());
  ASSERT_TRUE(tok.is_ok()) << tok.message();
  EXPECT_EQ(tok.value()->encode(" the<|endoftext|>", true), (std::vector<int32_t>{257, 'e', 258}));
  EXPECT_EQ(tok.value()->eos_id(), 258);
  EXPECT_FALSE(tok.value()->add_bos());
}

}  // namespace
}  // namespace kvlm
