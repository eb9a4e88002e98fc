// Quantized weights keep the engine's exactness contract: a Llama and a GPT-2 quantized at load
// (`--weights q8_0|q4_0`) give bitwise-identical logits cached and uncached, alone or batched, on
// a paged cache, at 1 or 3 threads; and a GGUF written by write_gguf in Q8_0 / Q4_0 loads to the
// very same bits as quantizing the safetensors model at load (same quantizer, same kernels).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>

#include "generate/generate.h"
#include "model/gguf.h"
#include "model/gguf_export.h"
#include "model/llama.h"
#include "model/llama_random.h"
#include "model/loader.h"
#include "model/quantize_weights.h"
#include "ops/quant.h"
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

// A Llama whose widths are whole blocks of `type`: for Q8_0/Q4_0 64 wide, 4 heads of 16 sharing
// 2 KV heads, 96 hidden; for the K-quants' 256-value blocks 256 wide, 4 heads of 64, 256 hidden.
LlamaConfig block_llama_config(DType type = DType::kQ8_0) {
  LlamaConfig c = tiny_llama_config();
  const bool k_quant = dtype_block_elements(type) == 256;
  c.model.n_embd = k_quant ? 256 : 64;
  c.model.n_head = 4;
  c.model.n_kv_head = 2;
  c.model.head_dim = k_quant ? 64 : 16;
  c.model.n_ff = k_quant ? 256 : 96;
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
      write_llama_hf(dir.path(), random_llama_weights(block_llama_config(GetParam()), 3), {})
          .is_ok());
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
  // largest logit for Q8_0, 34% for Q4_0: the 16x of their step sizes; Q6_K and Q4_K in between
  // and alike); a wrong layout or scale would be off by the logits' whole size.
  const Logits exact = run(*f32, {kPrompts[0]}, false, 1);
  float max_diff = 0.0f, max_logit = 0.0f;
  for (size_t v = 0; v < exact[0][0].size(); ++v) {
    max_diff = std::max(max_diff, std::fabs(exact[0][0][v] - cached[0][0][v]));
    max_logit = std::max(max_logit, std::fabs(exact[0][0][v]));
  }
  const float bound = GetParam() == DType::kQ8_0 ? 0.05f : GetParam() == DType::kQ6_K ? 0.2f : 0.6f;
  EXPECT_LT(max_diff / max_logit, bound)
      << "max |logit| " << max_logit << ", max difference " << max_diff;
}

INSTANTIATE_TEST_SUITE_P(Types, QuantizedLlama,
                         ::testing::Values(DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ6_K),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// q4_k_mix: which matrices get Q6_K (llama.cpp's use_more_bits for 32 layers: 0-3, 6, 9, ...,
// 24, 27-31), and a mixed file keeps the exactness contract.
TEST(QuantizedMix, Q4KMixRuleAndFile) {
  const GgufTypes mix = parse_gguf_types("q4_k_mix").value();
  std::vector<int> q6;
  for (int l = 0; l < 32; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const DType v = gguf_matrix_type(mix, p + "attn_v.weight", 32, false);
    EXPECT_EQ(v, gguf_matrix_type(mix, p + "ffn_down.weight", 32, false)) << l;
    EXPECT_EQ(gguf_matrix_type(mix, p + "attn_q.weight", 32, false), DType::kQ4_K);
    EXPECT_EQ(gguf_matrix_type(mix, p + "attn_output.weight", 32, false), DType::kQ4_K);
    if (v == DType::kQ6_K) q6.push_back(l);
  }
  EXPECT_EQ(q6, (std::vector<int>{0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31}));
  EXPECT_EQ(gguf_matrix_type(mix, "output.weight", 32, false), DType::kQ6_K);
  EXPECT_EQ(gguf_matrix_type(mix, "token_embd.weight", 32, false), DType::kQ4_K);
  EXPECT_EQ(gguf_matrix_type(mix, "token_embd.weight", 32, true), DType::kQ6_K);  // tied head
  EXPECT_FALSE(parse_gguf_types("q5_k"));
  // Rows that are not whole 256-blocks fall back as llama.cpp's do: Q6_K to Q8_0, Q4_K to Q5_0,
  // F16 where 32-blocks do not fit either; Q8_0/Q4_0 misfits (llama.cpp refuses them) keep
  // their stored type. The same rule for the mix, a plain --type and --weights.
  EXPECT_EQ(gguf_stored_type(mix, DType::kQ6_K, 64, DType::kF32), DType::kQ8_0);
  EXPECT_EQ(gguf_stored_type(mix, DType::kQ6_K, 172, DType::kF32), DType::kF16);
  EXPECT_EQ(gguf_stored_type(mix, DType::kQ4_K, 64, DType::kF32), DType::kQ5_0);
  EXPECT_EQ(gguf_stored_type(mix, DType::kQ4_K, 172, DType::kBF16), DType::kF16);
  EXPECT_EQ(gguf_stored_type(mix, DType::kQ4_K, 512, DType::kF32), DType::kQ4_K);
  EXPECT_EQ(gguf_stored_type(GgufTypes{DType::kQ6_K, false}, DType::kQ6_K, 64, DType::kF32),
            DType::kQ8_0);
  EXPECT_EQ(stored_weight_type(DType::kQ8_0, 172, DType::kF32), DType::kF32);
  EXPECT_EQ(stored_weight_type(DType::kQ4_0, 172, DType::kBF16), DType::kBF16);
  EXPECT_EQ(stored_weight_type(DType::kQ5_0, 96, DType::kF16), DType::kQ5_0);

  test::TempDir dir;
  LlamaConfig config = block_llama_config(DType::kQ4_K);
  config.model.n_layer = 2;  // layer 0 Q4_K, layer 1 (the last eighth) Q6_K
  ASSERT_TRUE(write_llama_hf(dir.path(), random_llama_weights(config, 5), {}).is_ok());
  auto f32 = load(dir.path(), std::nullopt);
  ASSERT_NE(f32, nullptr);
  const std::string gguf = dir.file("mix.gguf");
  ASSERT_TRUE(write_gguf(*f32, nullptr, mix, gguf).is_ok());
  auto file = GgufFile::open(gguf);
  ASSERT_TRUE(file.is_ok()) << file.message();
  const auto type_of = [&](const std::string& name) { return file->tensor(name)->dtype; };
  EXPECT_EQ(type_of("blk.0.attn_v.weight"), DType::kQ4_K);
  EXPECT_EQ(type_of("blk.1.attn_v.weight"), DType::kQ6_K);
  EXPECT_EQ(type_of("blk.1.ffn_down.weight"), DType::kQ6_K);
  EXPECT_EQ(type_of("blk.1.ffn_up.weight"), DType::kQ4_K);
  EXPECT_EQ(type_of("token_embd.weight"),
            config.model.tied_embeddings ? DType::kQ6_K : DType::kQ4_K);
  auto model = load(gguf, std::nullopt);
  ASSERT_NE(model, nullptr);
  const Logits cached = run(*model, kPrompts, true, 1);
  expect_same_bits(cached, run(*model, kPrompts, false, 3), "uncached, 3 threads");
}

// Converting a matrix splits its rows over threads: the same bytes at 1 and 3 threads, each row
// what the row quantizer makes of it; a transposed (kInOut) source gives the same rows.
TEST(QuantizedMix, MatrixBytesDoNotDependOnThreads) {
  const size_t n_out = 37, n_in = 512;
  std::vector<float> w(n_out * n_in), t(n_out * n_in);
  uint32_t s = 7;
  for (float& v : w) {
    s = s * 1664525u + 1013904223u;
    v = static_cast<float>(s >> 8) / 16777216.0f - 0.5f;
  }
  for (size_t o = 0; o < n_out; ++o)
    for (size_t i = 0; i < n_in; ++i) t[i * n_out + o] = w[o * n_in + i];
  WeightMatrix m;
  m.dtype = DType::kF32;
  m.layout = WeightLayout::kOutIn;
  m.n_in = n_in;
  m.n_out = n_out;
  m.data = w.data();
  WeightMatrix mt = m;
  mt.layout = WeightLayout::kInOut;
  mt.data = t.data();
  for (DType type : {DType::kQ4_K, DType::kQ6_K, DType::kQ8_0}) {
    const auto one = weight_matrix_bytes(m, type, "m", 1),
               three = weight_matrix_bytes(m, type, "m", 3);
    ASSERT_TRUE(one.is_ok() && three.is_ok());
    EXPECT_EQ(one.value(), three.value()) << dtype_name(type);
    EXPECT_EQ(one.value(), weight_matrix_bytes(mt, type, "m", 2).value()) << dtype_name(type);
    std::vector<uint8_t> row(dtype_bytes(type, n_in));
    ASSERT_TRUE(quantize_row(row.data(), w.data() + 5 * n_in, type, n_in));
    EXPECT_TRUE(std::equal(row.begin(), row.end(), one->begin() + 5 * row.size()));
  }
}

// stories260K's shape (64 wide, 172 hidden): no row is a whole 256-value block and w2's 172 is
// not a whole 32 either. --weights takes llama.cpp's fallbacks (Q4_K -> Q5_0, Q6_K -> Q8_0, F16
// for w2; Q8_0 and Q4_0 leave w2 as stored) and keeps the exactness contract with them.
TEST(QuantizedLlamaLoad, RowsThatAreNotWholeBlocksFallBackAsLlamaCppDoes) {
  LlamaConfig config = tiny_llama_config();
  config.model.n_embd = 64;
  config.model.n_head = 8;
  config.model.n_kv_head = 4;
  config.model.head_dim = 8;
  config.model.n_ff = 172;
  test::TempDir dir;
  ASSERT_TRUE(write_llama_hf(dir.path(), random_llama_weights(config, 9), {}).is_ok());
  const std::pair<DType, std::string> kCases[] = {{DType::kQ4_K, "Q5_0 x 13, F16 x 2"},
                                                  {DType::kQ6_K, "Q8_0 x 13, F16 x 2"},
                                                  {DType::kQ8_0, "Q8_0 x 13, F32 x 2"},
                                                  {DType::kQ4_0, "Q4_0 x 13, F32 x 2"}};
  for (const auto& [type, types] : kCases) {
    auto model = load(dir.path(), type);
    ASSERT_NE(model, nullptr);
    EXPECT_EQ(model->weight_types(), types) << dtype_name(type);
    const Logits cached = run(*model, kPrompts, true, 1);
    expect_same_bits(cached, run(*model, kPrompts, false, 1),
                     std::string(dtype_name(type)) + " uncached");
    expect_same_bits(cached, run(*model, kPrompts, true, 3),
                     std::string(dtype_name(type)) + " 3 threads");
  }
}

// Every matrix of two Llama models holds the same bytes, each in `type` when one is given.
void expect_same_matrices(const Model& one, const Model& other, std::optional<DType> type,
                          const std::string& what) {
  const LlamaWeights& a = dynamic_cast<const LlamaModel&>(one).weights();
  const LlamaWeights& b = dynamic_cast<const LlamaModel&>(other).weights();
  auto same = [&](const WeightMatrix& x, const WeightMatrix& y, const std::string& name) {
    if (type) {
      EXPECT_EQ(x.dtype, *type) << what << " " << name;
    }
    EXPECT_EQ(x.dtype, y.dtype) << what << " " << name;
    ASSERT_EQ(x.n_bytes(), y.n_bytes()) << what << " " << name;
    EXPECT_EQ(0, std::memcmp(x.data, y.data, x.n_bytes())) << what << " " << name;
  };
  same(a.embed, b.embed, "embedding");
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t l = 0; l < a.layers.size(); ++l) {
    const LlamaLayer &x = a.layers[l], &y = b.layers[l];
    const std::string at = "layer " + std::to_string(l) + " ";
    same(x.wq, y.wq, at + "wq");
    same(x.wk, y.wk, at + "wk");
    same(x.wv, y.wv, at + "wv");
    same(x.wo, y.wo, at + "wo");
    same(x.w1, y.w1, at + "w1");
    same(x.w2, y.w2, at + "w2");
    same(x.w3, y.w3, at + "w3");
  }
}

// --threads at load (LoadOptions::n_threads) splits the quantization's rows over that many
// threads: the same bytes at 1 and 3, for a plain type and for q4_k_mix (which converts through
// the GGUF writer), from a safetensors folder and from a GGUF file.
TEST(QuantizedLlamaLoad, MatrixBytesDoNotDependOnLoadOptionsThreads) {
  test::TempDir dir;
  ASSERT_TRUE(
      write_llama_hf(dir.path(), random_llama_weights(block_llama_config(DType::kQ4_K), 5), {})
          .is_ok());
  auto f32 = load(dir.path(), std::nullopt);
  ASSERT_NE(f32, nullptr);
  const std::string gguf = dir.file("f32.gguf");
  ASSERT_TRUE(write_gguf(*f32, nullptr, DType::kF32, gguf).is_ok());
  for (const std::string& path : {dir.path(), gguf})
    for (const char* weights : {"q4_k", "q6_k", "q4_k_mix"}) {
      std::unique_ptr<Model> models[2];
      for (int i = 0; i < 2; ++i) {
        LoadOptions options = load_options_for_weights(weights).value();
        options.n_threads = i == 0 ? 1 : 3;
        auto model = load_model(path, options);
        ASSERT_TRUE(model.is_ok()) << model.message();
        models[i] = std::move(model.value());
      }
      expect_same_matrices(*models[0], *models[1],
                           std::string(weights) == "q4_k_mix"
                               ? std::nullopt
                               : std::optional<DType>(parse_dtype(weights)),
                           std::string(weights) + " from " + path);
    }
}

// Quantizing at load splits each matrix's rows over every core: a model loaded at 1 and at 3
// OpenMP threads holds the same bytes in every matrix, for every block type.
TEST(QuantizedLlamaLoad, MatrixBytesDoNotDependOnTheThreadsLoadingThem) {
  test::TempDir dir;
  ASSERT_TRUE(
      write_llama_hf(dir.path(), random_llama_weights(block_llama_config(DType::kQ4_K), 5), {})
          .is_ok());
  const int saved = omp_get_max_threads();
  for (DType type : {DType::kQ4_K, DType::kQ6_K, DType::kQ4_0, DType::kQ8_0}) {
    omp_set_num_threads(1);
    auto one = load(dir.path(), type);
    omp_set_num_threads(3);
    auto three = load(dir.path(), type);
    omp_set_num_threads(saved);
    ASSERT_TRUE(one && three);
    const LlamaWeights& a = dynamic_cast<const LlamaModel&>(*one).weights();
    const LlamaWeights& b = dynamic_cast<const LlamaModel&>(*three).weights();
    auto same = [&](const WeightMatrix& x, const WeightMatrix& y, const std::string& what) {
      EXPECT_EQ(x.dtype, type) << what;
      ASSERT_EQ(x.n_bytes(), y.n_bytes()) << what;
      EXPECT_EQ(0, std::memcmp(x.data, y.data, x.n_bytes())) << dtype_name(type) << " " << what;
    };
    same(a.embed, b.embed, "embedding");
    for (size_t l = 0; l < a.layers.size(); ++l) {
      const LlamaLayer &x = a.layers[l], &y = b.layers[l];
      const std::string at = "layer " + std::to_string(l) + " ";
      same(x.wq, y.wq, at + "wq");
      same(x.wk, y.wk, at + "wk");
      same(x.wv, y.wv, at + "wv");
      same(x.wo, y.wo, at + "wo");
      same(x.w1, y.w1, at + "w1");
      same(x.w2, y.w2, at + "w2");
      same(x.w3, y.w3, at + "w3");
    }
  }
}

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
