// Tests for kv_size: every preset's cache size against the formula written out factor by
// factor, config.json parsing for each family, sliding windows, MLA, bad input, and the
// `kvlm kv-size` command end to end (tests/cli/cli_kv_size_test.cpp).
#include "kv/kv_size.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/test_support.h"

namespace kvlm::kv {
namespace {

namespace fs = std::filesystem;

KvGeometry preset(const char* name) {
  Result<KvGeometry> g = kv_geometry_from_preset(name);
  EXPECT_TRUE(g.is_ok()) << g.message();
  return g.is_ok() ? g.value() : KvGeometry{};
}

std::uint64_t kv_bytes(const char* name, std::int64_t seq_len, std::int64_t batch, KvDtype dtype) {
  Result<KvSize> s = compute_kv_size(preset(name), seq_len, batch, dtype);
  EXPECT_TRUE(s.is_ok()) << s.message();
  return s.is_ok() ? s->bytes : 0;
}

// Writes `text` to NAME in `dir` and returns its path.
std::string write_in(const test::TempDir& dir, const std::string& name, const std::string& text) {
  test::write_text(dir.file(name), text);
  return dir.file(name);
}

Result<KvGeometry> parse(const std::string& text) {
  return kv_geometry_from_config_text(text, "test/config.json");
}

// ---- the seeds' figures -------------------------------------------------------------------

TEST(KvSize, ReproducesTheSeedsGpt2Figures) {
  // Seed 000: K and V x 12 layers x 1024 tokens x 12 heads x 64 head_dim x 4 bytes.
  EXPECT_EQ(kv_bytes("gpt2", 1024, 1, KvDtype::f32), 75'497'472ull);
  EXPECT_EQ(kv_bytes("gpt2", 1024, 8, KvDtype::f32), 603'979'776ull);
  // "against 496 MB of model weights": 124,439,808 parameters x 4 bytes = 497.8 MB.
  Result<KvSize> s = compute_kv_size(preset("gpt2"), 1024, 8, KvDtype::f32);
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(s->weights_bytes, 124'439'808ull * 4);
  EXPECT_GT(s->bytes, s->weights_bytes);  // "The cache is bigger than the model."
}

TEST(KvSize, Llama33At128kTokensIs41_9GBNotTheSeeds32GB) {
  // 2 (K, V) x 80 layers x 8 KV heads x 128 head_dim x 128,000 tokens x 2 bytes (fp16).
  // The second seed says ~32 GB; the arithmetic gives 41.9 GB (39.1 GiB).
  EXPECT_EQ(kv_bytes("llama-3.3-70b", 128'000, 1, KvDtype::f16), 41'943'040'000ull);
  EXPECT_EQ(41'943'040'000ull, 2ull * 80 * 8 * 128 * 128'000 * 2);
}

// ---- every preset by hand -----------------------------------------------------------------

// Factors from each model's published config.json; head_dim = hidden / heads unless stated.
TEST(KvSize, Gpt2PresetsMatchTheFormula) {
  // gpt2: n_layer 12, n_head 12, n_embd 768 -> head_dim 64.
  EXPECT_EQ(kv_bytes("gpt2", 512, 2, KvDtype::f16), 2ull * 12 * 12 * 64 * 512 * 2 * 2);
  // gpt2-medium: n_layer 24, n_head 16, n_embd 1024 -> head_dim 64.
  EXPECT_EQ(kv_bytes("gpt2-medium", 1024, 1, KvDtype::f32), 2ull * 24 * 16 * 64 * 1024 * 1 * 4);
  // gpt2-large: n_layer 36, n_head 20, n_embd 1280 -> head_dim 64.
  EXPECT_EQ(kv_bytes("gpt2-large", 1024, 4, KvDtype::bf16), 2ull * 36 * 20 * 64 * 1024 * 4 * 2);
  // gpt2-xl: n_layer 48, n_head 25, n_embd 1600 -> head_dim 64.
  EXPECT_EQ(kv_bytes("gpt2-xl", 1000, 3, KvDtype::int8), 2ull * 48 * 25 * 64 * 1000 * 3 * 1);
}

TEST(KvSize, LlamaPresetsMatchTheFormula) {
  // llama-3.1-8b: 32 layers, 8 KV heads, hidden 4096 / 32 heads = head_dim 128.
  EXPECT_EQ(kv_bytes("llama-3.1-8b", 8192, 1, KvDtype::bf16), 2ull * 32 * 8 * 128 * 8192 * 1 * 2);
  EXPECT_EQ(kv_bytes("llama-3.1-8b", 131'072, 4, KvDtype::fp8),
            2ull * 32 * 8 * 128 * 131'072 * 4 * 1);
  // llama-3.3-70b: 80 layers, 8 KV heads, hidden 8192 / 64 heads = head_dim 128.
  EXPECT_EQ(kv_bytes("llama-3.3-70b", 4096, 16, KvDtype::f32), 2ull * 80 * 8 * 128 * 4096 * 16 * 4);
}

TEST(KvSize, MistralPresetKeepsOnlyItsWindow) {
  // mistral-7b (v0.1): 32 layers, 8 KV heads, hidden 4096 / 32 heads = head_dim 128,
  // sliding_window 4096: min(T, 4096) positions are kept.
  EXPECT_EQ(kv_bytes("mistral-7b", 1000, 1, KvDtype::f16), 2ull * 32 * 8 * 128 * 1000 * 1 * 2);
  EXPECT_EQ(kv_bytes("mistral-7b", 4096, 1, KvDtype::f16), 2ull * 32 * 8 * 128 * 4096 * 1 * 2);
  EXPECT_EQ(kv_bytes("mistral-7b", 32'768, 2, KvDtype::f16), 2ull * 32 * 8 * 128 * 4096 * 2 * 2);
}

TEST(KvSize, DeepSeekV3PresetStoresTheLatentOnce) {
  // deepseek-v3: 61 layers, kv_lora_rank 512 + qk_rope_head_dim 64 per token per layer, not
  // doubled: K and V both come from the one latent.
  EXPECT_EQ(kv_bytes("deepseek-v3", 4096, 1, KvDtype::bf16), (512ull + 64) * 61 * 4096 * 1 * 2);
  EXPECT_EQ(kv_bytes("deepseek-v3", 163'840, 8, KvDtype::fp8),
            (512ull + 64) * 61 * 163'840 * 8 * 1);
}

TEST(KvSize, EveryPresetIsCovered) {
  // The tests above check each of these; a new preset must get a hand computation too.
  EXPECT_EQ(kv_preset_names(), (std::vector<std::string>{"gpt2", "gpt2-medium", "gpt2-large",
                                                         "gpt2-xl", "llama-3.1-8b", "llama-3.3-70b",
                                                         "mistral-7b", "deepseek-v3"}));
}

TEST(KvSize, PartsMultiplyToTheTotal) {
  Result<KvSize> s = compute_kv_size(preset("llama-3.1-8b"), 1000, 3, KvDtype::f16);
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(s->values_per_token_per_layer, 2ull * 8 * 128);
  EXPECT_EQ(s->bytes_per_token_per_layer, 2ull * 8 * 128 * 2);
  EXPECT_EQ(s->bytes_per_token, 2ull * 8 * 128 * 2 * 32);        // one token, all 32 layers
  EXPECT_EQ(s->bytes_per_layer, 2ull * 8 * 128 * 2 * 1000 * 3);  // one layer, all tokens
  EXPECT_EQ(s->bytes, s->bytes_per_layer * 32);
  EXPECT_EQ(s->kept_positions, 1000);
  // Full multi-head K/V: 32 heads instead of 8, the GQA lever (4x).
  EXPECT_EQ(s->mha_bytes, 2ull * 32 * 128 * 2 * 32 * 1000 * 3);
}

// ---- weights ------------------------------------------------------------------------------

TEST(KvSize, PresetParameterCountsMatchThePublishedModels) {
  // GPT-2: wte V*C + wpe 1024*C + per block (12*C^2 + 13*C) + ln_f 2*C, lm_head tied.
  auto gpt2 = [](std::uint64_t L, std::uint64_t C) {
    return 50257 * C + 1024 * C + L * (12 * C * C + 13 * C) + 2 * C;
  };
  EXPECT_EQ(preset("gpt2").n_params, gpt2(12, 768));
  EXPECT_EQ(gpt2(12, 768), 124'439'808ull);  // the published 124M
  EXPECT_EQ(preset("gpt2-medium").n_params, 354'823'168ull);
  EXPECT_EQ(preset("gpt2-large").n_params, 774'030'080ull);
  EXPECT_EQ(preset("gpt2-xl").n_params, 1'557'611'200ull);
  // Llama: embed + lm_head 2*V*H, per layer q,o H*H + k,v 2*H*KV + mlp 3*H*I + 2 norms H,
  // final norm H.
  auto llama = [](std::uint64_t V, std::uint64_t H, std::uint64_t L, std::uint64_t KV,
                  std::uint64_t I) {
    return 2 * V * H + L * (2 * H * H + 2 * H * KV + 3 * H * I + 2 * H) + H;
  };
  EXPECT_EQ(preset("llama-3.1-8b").n_params, llama(128256, 4096, 32, 8 * 128, 14336));
  EXPECT_EQ(preset("llama-3.1-8b").n_params, 8'030'261'248ull);
  EXPECT_EQ(preset("llama-3.3-70b").n_params, 70'553'706'496ull);
  EXPECT_EQ(preset("mistral-7b").n_params, llama(32000, 4096, 32, 8 * 128, 14336));
  EXPECT_EQ(preset("mistral-7b").n_params, 7'241'732'096ull);
  // DeepSeek V3, the published "671B total": MLA attention per layer
  //   q_a 7168*1536 + norm 1536 + q_b 1536*128*192 + kv_a 7168*576 + norm 512
  //   + kv_b 512*128*256 + o 128*128*7168,
  // 3 dense layers (3*7168*18432) and 58 MoE layers (router 256*7168 + bias 256 +
  // (256 routed + 1 shared) * 3*7168*2048), 2 norms per layer, embed + lm_head + final norm.
  const std::uint64_t attn = 7168ull * 1536 + 1536 + 1536ull * 128 * 192 + 7168ull * 576 + 512 +
                             512ull * 128 * 256 + 128ull * 128 * 7168;
  const std::uint64_t dense = 3ull * 7168 * 18432;
  const std::uint64_t moe = 256ull * 7168 + 256 + 257ull * 3 * 7168 * 2048;
  const std::uint64_t v3 =
      3 * (attn + dense + 2 * 7168) + 58 * (attn + moe + 2 * 7168) + 2ull * 129280 * 7168 + 7168;
  EXPECT_EQ(preset("deepseek-v3").n_params, v3);
  EXPECT_NEAR(static_cast<double>(v3) / 1e9, 671.0, 0.5);
}

TEST(KvSize, WeightsAreAtTheCacheDtypeAndAtTheCheckpoints) {
  Result<KvSize> s = compute_kv_size(preset("deepseek-v3"), 1024, 1, KvDtype::bf16);
  ASSERT_TRUE(s.is_ok()) << s.message();
  const std::uint64_t n = preset("deepseek-v3").n_params;
  EXPECT_EQ(s->weights_bytes, n * 2);             // bf16, like the cache
  EXPECT_EQ(s->checkpoint_weights_bytes, n * 1);  // the published checkpoint is fp8
  EXPECT_EQ(preset("deepseek-v3").checkpoint_dtype, "fp8");
  EXPECT_EQ(preset("llama-3.1-8b").checkpoint_dtype, "bf16");
  EXPECT_EQ(preset("gpt2").checkpoint_dtype, "");  // GPT-2's config does not say: f32
}

TEST(KvSize, DefaultDtypeIsTheCheckpoints) {
  EXPECT_EQ(default_kv_dtype(preset("gpt2")), KvDtype::f32);
  EXPECT_EQ(default_kv_dtype(preset("llama-3.3-70b")), KvDtype::bf16);
  EXPECT_EQ(default_kv_dtype(preset("deepseek-v3")), KvDtype::bf16);  // fp8 weights, bf16 math
}

// ---- dtypes -------------------------------------------------------------------------------

TEST(KvSize, DtypesAndTheirSizes) {
  const std::pair<const char*, std::uint64_t> cases[] = {
      {"f32", 4},  {"float32", 4},  {"FP32", 4}, {"f16", 2},      {"fp16", 2}, {"half", 2},
      {"bf16", 2}, {"bfloat16", 2}, {"fp8", 1},  {"fp8_e4m3", 1}, {"int8", 1}};
  for (const auto& [name, bytes] : cases) {
    Result<KvDtype> d = parse_kv_dtype(name);
    ASSERT_TRUE(d.is_ok()) << name << ": " << d.message();
    EXPECT_EQ(kv_dtype_bytes(*d), bytes) << name;
  }
  EXPECT_STREQ(kv_dtype_name(*parse_kv_dtype("bfloat16")), "bf16");
}

TEST(KvSize, UnknownDtypeListsTheAcceptedOnes) {
  Result<KvDtype> d = parse_kv_dtype("int4");
  ASSERT_FALSE(d.is_ok());
  EXPECT_NE(d.message().find("--dtype"), std::string::npos) << d.message();
  EXPECT_NE(d.message().find("'int4'"), std::string::npos) << d.message();
  EXPECT_NE(d.message().find("f32, f16, bf16, fp8, int8"), std::string::npos) << d.message();
}

// ---- config.json parsing, one family at a time --------------------------------------------

TEST(KvSizeConfig, Gpt2ConfigFile) {
  test::TempDir dir;
  const std::string path = write_in(
      dir, "config.json",
      R"({"model_type": "gpt2", "n_layer": 2, "n_head": 4, "n_embd": 64, "n_positions": 128,
          "vocab_size": 100, "n_inner": null})");
  Result<KvGeometry> g = kv_geometry_from_config_file(path);
  ASSERT_TRUE(g.is_ok()) << g.message();
  EXPECT_EQ(g->model, "gpt2");
  EXPECT_EQ(g->n_layer, 2);
  EXPECT_EQ(g->n_kv_head, 4);
  EXPECT_EQ(g->head_dim, 16);
  EXPECT_EQ(g->n_ctx, 128);
  EXPECT_STREQ(g->attention_kind(), "mha");
  // n_inner null -> 4 * n_embd = 256.
  EXPECT_EQ(g->n_params, 100ull * 64 + 128 * 64 +
                             2 * (2 * 64 + (64 * 192 + 192) + (64 * 64 + 64) + 2 * 64 +
                                  (64 * 256 + 256) + (256 * 64 + 64)) +
                             2 * 64);
  Result<KvSize> s = compute_kv_size(*g, 10, 3, KvDtype::f32);
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(s->bytes, 2ull * 2 * 4 * 16 * 10 * 3 * 4);
}

TEST(KvSizeConfig, LlamaConfigWithGroupedQueryAttention) {
  Result<KvGeometry> g = parse(R"({"model_type": "llama", "num_hidden_layers": 4,
      "num_attention_heads": 8, "num_key_value_heads": 2, "hidden_size": 256,
      "intermediate_size": 512, "vocab_size": 1000, "tie_word_embeddings": true,
      "max_position_embeddings": 2048, "torch_dtype": "float16"})");
  ASSERT_TRUE(g.is_ok()) << g.message();
  EXPECT_EQ(g->n_kv_head, 2);
  EXPECT_EQ(g->head_dim, 32);  // 256 / 8
  EXPECT_STREQ(g->attention_kind(), "gqa");
  EXPECT_EQ(g->checkpoint_dtype, "f16");
  EXPECT_EQ(default_kv_dtype(*g), KvDtype::f16);
  // Tied: one V*H matrix. Per layer q,o 256*256 each, k,v 256*64 each, mlp 3*256*512, 2 norms.
  EXPECT_EQ(g->n_params,
            1000ull * 256 + 4 * (2 * 256 * 256 + 2 * 256 * 64 + 3 * 256 * 512 + 2 * 256) + 256);
  EXPECT_EQ(g->values_per_token_per_layer(), 2ull * 2 * 32);
  EXPECT_EQ(g->mha_values_per_token_per_layer(), 2ull * 8 * 32);
}

TEST(KvSizeConfig, MissingKeyValueHeadsMeansMultiHead) {
  Result<KvGeometry> g =
      parse(R"({"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64})");
  ASSERT_TRUE(g.is_ok()) << g.message();
  EXPECT_EQ(g->n_kv_head, 4);
  EXPECT_STREQ(g->attention_kind(), "mha");
  EXPECT_EQ(g->n_params, 0ull);  // no vocab_size / intermediate_size: not counted, and said so
  EXPECT_NE(g->weights_note.find("vocab_size"), std::string::npos) << g->weights_note;
}

TEST(KvSizeConfig, ExplicitHeadDimWinsOverHiddenOverHeads) {
  // Gemma-like: head_dim 256 although hidden_size / heads = 3072 / 16 = 192. One KV head: MQA.
  Result<KvGeometry> g = parse(R"({"num_hidden_layers": 28, "num_attention_heads": 16,
      "num_key_value_heads": 1, "hidden_size": 3072, "head_dim": 256})");
  ASSERT_TRUE(g.is_ok()) << g.message();
  EXPECT_EQ(g->head_dim, 256);
  EXPECT_STREQ(g->attention_kind(), "mqa");
  Result<KvSize> s = compute_kv_size(*g, 100, 1, KvDtype::bf16);
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(s->bytes, 2ull * 28 * 1 * 256 * 100 * 1 * 2);
}

TEST(KvSizeConfig, SlidingWindow) {
  Result<KvGeometry> g = parse(R"({"model_type": "mistral", "num_hidden_layers": 2,
      "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_size": 64,
      "sliding_window": 16})");
  ASSERT_TRUE(g.is_ok()) << g.message();
  EXPECT_EQ(g->sliding_window, 16);
  for (std::int64_t t : {1, 15, 16, 17, 1000}) {
    Result<KvSize> s = compute_kv_size(*g, t, 2, KvDtype::f32);
    ASSERT_TRUE(s.is_ok()) << s.message();
    const std::int64_t kept = std::min<std::int64_t>(t, 16);
    EXPECT_EQ(s->kept_positions, kept) << t;
    EXPECT_EQ(s->bytes, 2ull * 2 * 2 * 16 * kept * 2 * 4) << t;
    EXPECT_EQ(s->bytes_per_token, 2ull * 2 * 16 * 4 * 2) << t;  // a token's cost, all layers
  }
}

TEST(KvSizeConfig, NullOrDisabledSlidingWindowKeepsEverything) {
  // Mistral v0.2+ writes sliding_window null; Qwen2 writes a window but use_sliding_window false.
  for (const char* text :
       {R"({"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64,
            "sliding_window": null})",
        R"({"model_type": "qwen2", "num_hidden_layers": 2, "num_attention_heads": 4,
            "hidden_size": 64, "sliding_window": 16, "use_sliding_window": false})"}) {
    Result<KvGeometry> g = parse(text);
    ASSERT_TRUE(g.is_ok()) << g.message();
    EXPECT_EQ(g->sliding_window, 0);
    Result<KvSize> s = compute_kv_size(*g, 1000, 1, KvDtype::f32);
    ASSERT_TRUE(s.is_ok()) << s.message();
    EXPECT_EQ(s->kept_positions, 1000);
  }
}

TEST(KvSizeConfig, DeepSeekMlaWithoutQueryCompression) {
  // DeepSeek-V2-Lite-like: q_lora_rank null, 64 routed + 2 shared experts after 1 dense layer.
  test::TempDir dir;
  write_in(dir, "config.json", R"({"model_type": "deepseek_v2", "num_hidden_layers": 3,
      "num_attention_heads": 4, "num_key_value_heads": 4, "hidden_size": 32,
      "intermediate_size": 64, "moe_intermediate_size": 16, "vocab_size": 50,
      "kv_lora_rank": 8, "q_lora_rank": null, "qk_rope_head_dim": 2, "qk_nope_head_dim": 6,
      "v_head_dim": 5, "n_routed_experts": 4, "n_shared_experts": 2,
      "first_k_dense_replace": 1, "moe_layer_freq": 1, "topk_method": "greedy",
      "torch_dtype": "bfloat16"})");
  // --model DIR reads DIR/config.json; the library reads the file.
  Result<KvGeometry> g = kv_geometry_from_config_file(dir.path() + "/config.json");
  ASSERT_TRUE(g.is_ok()) << g.message();
  EXPECT_TRUE(g->mla);
  EXPECT_STREQ(g->attention_kind(), "mla");
  EXPECT_EQ(g->values_per_token_per_layer(), 8ull + 2);                // latent + RoPE key, once
  EXPECT_EQ(g->mha_values_per_token_per_layer(), 4ull * (6 + 2 + 5));  // per head K and V
  // q_proj 32*4*8, kv_a 32*(8+2) + norm 8, kv_b 8*4*(6+5), o 4*5*32.
  const std::uint64_t attn = 32 * 4 * 8 + 32 * 10 + 8 + 8 * 4 * 11 + 4 * 5 * 32;
  const std::uint64_t dense = 3 * 32 * 64;
  const std::uint64_t moe = 32 * 4 + (4 + 2) * 3 * 32 * 16;  // router + routed and shared
  EXPECT_EQ(g->n_params, (attn + dense + 64) + 2 * (attn + moe + 64) + 2 * 50 * 32 + 32);
  Result<KvSize> s = compute_kv_size(*g, 7, 2, KvDtype::bf16);
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(s->bytes, (8ull + 2) * 3 * 7 * 2 * 2);
  EXPECT_EQ(s->mha_bytes, 4ull * 13 * 3 * 7 * 2 * 2);
}

TEST(KvSizeConfig, MixtralCountsEveryExpert) {
  Result<KvGeometry> g = parse(R"({"model_type": "mixtral", "num_hidden_layers": 2,
      "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_size": 16,
      "intermediate_size": 32, "vocab_size": 10, "num_local_experts": 8})");
  ASSERT_TRUE(g.is_ok()) << g.message();
  // attention q,o 16*16, k,v 16*8; router 16*8; 8 experts x 3*16*32; 2 norms.
  const std::uint64_t layer = 2 * 16 * 16 + 2 * 16 * 8 + 16 * 8 + 8 * 3 * 16 * 32 + 2 * 16;
  EXPECT_EQ(g->n_params, 2 * 10 * 16 + 2 * layer + 16);
}

TEST(KvSizeConfig, MultimodalTextConfig) {
  Result<KvGeometry> g = parse(R"({"model_type": "llava", "vision_config": {"hidden_size": 9},
      "text_config": {"model_type": "llama", "num_hidden_layers": 3,
                      "num_attention_heads": 4, "num_key_value_heads": 1, "hidden_size": 64}})");
  ASSERT_TRUE(g.is_ok()) << g.message();
  EXPECT_EQ(g->n_layer, 3);
  EXPECT_EQ(g->values_per_token_per_layer(), 2ull * 1 * 16);
}

// ---- bad input ----------------------------------------------------------------------------

void expect_error(const Result<KvGeometry>& g, std::initializer_list<const char*> parts) {
  ASSERT_FALSE(g.is_ok());
  for (const char* p : parts) {
    EXPECT_NE(g.message().find(p), std::string::npos) << "'" << p << "' not in: " << g.message();
  }
}

TEST(KvSizeBadInput, ConfigWithoutAnyKnownLayout) {
  expect_error(parse(R"({"model_type": "mystery", "d_model": 512, "layers": 6})"),
               {"test/config.json", "n_layer", "num_hidden_layers", "kv_lora_rank",
                "found keys: d_model, layers, model_type"});
}

TEST(KvSizeBadInput, ConfigMissingAFieldOfItsLayout) {
  expect_error(
      parse(R"({"n_layer": 12, "n_embd": 768})"),
      {"test/config.json", "missing required field 'n_head'", "GPT-2", "n_layer, n_head, n_embd"});
  expect_error(parse(R"({"num_hidden_layers": 12, "hidden_size": 768})"),
               {"missing required field 'num_attention_heads'", "Llama-style"});
  expect_error(parse(R"({"num_hidden_layers": 12, "num_attention_heads": 12})"),
               {"missing required field 'hidden_size'", "head_dim or hidden_size"});
  expect_error(parse(R"({"num_hidden_layers": 2, "num_attention_heads": 4, "kv_lora_rank": 8,
                         "qk_nope_head_dim": 4, "v_head_dim": 4})"),
               {"missing required field 'qk_rope_head_dim'", "DeepSeek MLA"});
}

TEST(KvSizeBadInput, ZeroNegativeOrNonIntegerSizes) {
  expect_error(parse(R"({"n_layer": 0, "n_head": 12, "n_embd": 768})"),
               {"'n_layer' must be a positive integer, found 0"});
  expect_error(parse(R"({"num_hidden_layers": 2, "num_attention_heads": 4,
                         "num_key_value_heads": -2, "hidden_size": 64})"),
               {"'num_key_value_heads' must be a positive integer, found -2"});
  expect_error(parse(R"({"num_hidden_layers": "32", "num_attention_heads": 4, "hidden_size": 64})"),
               {"'num_hidden_layers' must be a positive integer, found \"32\""});
  expect_error(parse(R"({"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64,
                         "sliding_window": -1})"),
               {"'sliding_window' must be an integer >= 0"});
}

TEST(KvSizeBadInput, InconsistentHeads) {
  expect_error(parse(R"({"n_layer": 2, "n_head": 5, "n_embd": 64})"),
               {"n_embd (64) is not a multiple of n_head (5)"});
  expect_error(parse(R"({"num_hidden_layers": 2, "num_attention_heads": 6,
                         "num_key_value_heads": 4, "hidden_size": 96})"),
               {"num_attention_heads (6) is not a multiple of num_key_value_heads (4)"});
}

TEST(KvSizeBadInput, NotJsonOrNotAnObjectOrNoFile) {
  expect_error(parse("{\"n_layer\": 12,"), {"test/config.json", "not valid JSON"});
  expect_error(parse("[1, 2]"), {"expected a JSON object, found array"});
  expect_error(kv_geometry_from_config_file("/nonexistent/kvlm/config.json"),
               {"/nonexistent/kvlm/config.json", "cannot open"});
}

TEST(KvSizeBadInput, UnknownPresetListsThePresets) {
  expect_error(kv_geometry_from_preset("llama-2-7b"),
               {"--preset", "'llama-2-7b'",
                "gpt2, gpt2-medium, gpt2-large, gpt2-xl, "
                "llama-3.1-8b, llama-3.3-70b, mistral-7b, deepseek-v3"});
}

TEST(KvSizeBadInput, NonPositiveSeqLenOrBatch) {
  const KvGeometry g = preset("gpt2");
  for (std::int64_t bad : {0, -5}) {
    Result<KvSize> s = compute_kv_size(g, bad, 1, KvDtype::f32);
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("--seq-len"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("found " + std::to_string(bad)), std::string::npos);
    s = compute_kv_size(g, 10, bad, KvDtype::f32);
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("--batch"), std::string::npos) << s.message();
  }
  Result<KvSize> s = compute_kv_size(KvGeometry{}, 10, 1, KvDtype::f32);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("non-positive"), std::string::npos) << s.message();
}

TEST(KvSizeBadInput, OverflowIsAnErrorNotAWrappedNumber) {
  Result<KvSize> s =
      compute_kv_size(preset("llama-3.3-70b"), 1'000'000'000'000, 1'000'000, KvDtype::f32);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("does not fit in 64 bits"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace kvlm::kv
