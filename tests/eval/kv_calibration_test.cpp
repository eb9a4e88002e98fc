// fp8 scales calibrated once per model: the same scales every time (a fixed input), one per
// (layer, KV head) for K and V, each mapping the largest value seen to 112; and generation with
// them keeps the exactness contract (cached == uncached, paged == contiguous, bitwise).
#include "eval/kv_calibration.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "generate/generate.h"
#include "model/llama_random.h"
#include "model/loader.h"
#include "model/random_gpt2.h"
#include "support/test_support.h"

namespace kvlm {
namespace {

TEST(KvCalibration, Fp8ScalesAreFixedPerModelAndKeepExactness) {
  test::TempDir dir;
  ASSERT_TRUE(
      write_llama2c(dir.file("model.bin"), random_llama_weights(tiny_llama_config(), 7)).is_ok());
  auto model = load_model(dir.file("model.bin"), LoadOptions{});
  ASSERT_TRUE(model.is_ok()) << model.message();
  const ModelConfig& c = model.value()->config();
  auto a = calibrate_fp8_scales(*model.value(), Parallel{1});
  auto b = calibrate_fp8_scales(*model.value(), Parallel{3});
  ASSERT_TRUE(a.is_ok() && b.is_ok()) << a.message();
  EXPECT_EQ(a->dtype, KvDtype::fp8);
  EXPECT_EQ(a->n_kv_head, c.n_kv_head);
  ASSERT_EQ(a->fp8_k_scales.size(), static_cast<size_t>(c.n_layer * c.n_kv_head));
  ASSERT_EQ(a->fp8_v_scales.size(), a->fp8_k_scales.size());
  EXPECT_EQ(a->fp8_k_scales, b->fp8_k_scales);  // threads change nothing
  EXPECT_EQ(a->fp8_v_scales, b->fp8_v_scales);
  for (float s : a->fp8_k_scales) EXPECT_GT(s, 0.0f);
  EXPECT_NE(a->fp8_k_scales[0], a->fp8_k_scales[1]) << "one scale per head, not per layer";
  EXPECT_TRUE(validate_kv_storage(a.value(), c.n_layer, c.kv_dim()).is_ok());

  const std::vector<std::vector<int32_t>> prompts = {{5, 9, 2, 7, 7, 1, 30, 4, 8}, {3, 3}};
  auto run = [&](bool cached, int block) {
    std::vector<std::vector<float>> all;
    GenerateOptions options;
    options.max_new_tokens = 6;
    options.use_cache = cached;
    options.kv_storage = a.value();
    if (block) options.paged = PagedGenerateOptions{block, 0, true};
    options.observe = [&](int, int, std::span<const float> l) {
      all.emplace_back(l.begin(), l.end());
    };
    EXPECT_TRUE(generate(*model.value(), prompts, options, Parallel{2}).is_ok());
    return all;
  };
  const auto cached = run(true, 0);
  EXPECT_EQ(run(false, 0), cached);
  EXPECT_EQ(run(true, 4), cached);
  // And the scales matter: fp8 with scale 1 gives other logits.
  GenerateOptions unit;
  unit.max_new_tokens = 1;
  unit.kv_storage.dtype = KvDtype::fp8;
  std::vector<float> first;
  unit.observe = [&](int, int s, std::span<const float> l) {
    if (s == 0) first.assign(l.begin(), l.end());
  };
  ASSERT_TRUE(generate(*model.value(), prompts, unit, Parallel{1}).is_ok());
  EXPECT_NE(first, cached[0]);
}

// q8_0_kc: one key scale per (layer, channel), the largest |key| before RoPE, the same for any
// thread count; a cache with them stores q8_0 rows of the scaled keys (as many bytes as q8_0)
// which read back close to the keys; generation with them keeps the exactness contract, on
// Llama and on GPT-2 (no RoPE: keys only widened), and the scales matter. Misused scales are
// refused naming what is wrong.
TEST(KvCalibration, KeyChannelScalesAreFixedPerModelAndKeepExactness) {
  test::TempDir dir;
  ASSERT_TRUE(
      write_llama2c(dir.file("model.bin"), random_llama_weights(tiny_llama_config(), 7)).is_ok());
  test::TempDir gpt2_dir;
  ASSERT_TRUE(write_random_gpt2(gpt2_dir.path(), test::tiny_gpt2_config(), {}).is_ok());
  for (const std::string& path : {dir.file("model.bin"), gpt2_dir.path()}) {
    SCOPED_TRACE(path);
    auto model = load_model(path, LoadOptions{});
    ASSERT_TRUE(model.is_ok()) << model.message();
    const ModelConfig& c = model.value()->config();
    auto a = calibrate_key_channel_scales(*model.value(), Parallel{1});
    auto b = calibrate_key_channel_scales(*model.value(), Parallel{3});
    ASSERT_TRUE(a.is_ok() && b.is_ok()) << a.message();
    EXPECT_EQ(a->dtype, KvDtype::q8_0_kc);
    ASSERT_EQ(a->k_channel_scales.size(), static_cast<size_t>(c.n_layer) * c.kv_dim());
    EXPECT_EQ(a->k_channel_scales, b->k_channel_scales);  // threads change nothing
    EXPECT_NE(a->k_channel_scales[0], a->k_channel_scales[1]) << "one scale per channel";
    EXPECT_TRUE(validate_kv_storage(a.value(), c.n_layer, c.kv_dim()).is_ok());

    KvRowCodec codec(a.value(), c.n_layer, c.kv_dim());
    EXPECT_EQ(codec.row_bytes(), kv_row_bytes(KvDtype::q8_0, c.kv_dim()));
    std::vector<float> k(c.kv_dim());
    for (int i = 0; i < c.kv_dim(); ++i) k[i] = a->k_channel_scales[c.kv_dim() + i] * (i % 3 - 1);
    std::vector<std::byte> row(codec.row_bytes());
    codec.encode_key(row.data(), 1, k.data());
    const KvRowFormat f = codec.format(1);
    ASSERT_NE(f.k_channel_scale, nullptr);
    for (int i = 0; i < c.kv_dim(); ++i)  // +-1 after scaling: q8_0's 127 x fp16(1/127)
      EXPECT_NEAR(kv_decode_value(row.data(), c.kv_dim(), i, f.dtype, 1.0f) * f.k_channel_scale[i],
                  k[i], 1e-3 * std::fabs(k[i]));

    const std::vector<std::vector<int32_t>> prompts = {{5, 9, 2, 7, 7, 1, 30, 4, 8}, {3, 3}};
    auto run = [&](bool cached, int block, const KvStorageOptions& storage) {
      std::vector<std::vector<float>> all;
      GenerateOptions options;
      options.max_new_tokens = 6;
      options.use_cache = cached;
      options.kv_storage = storage;
      if (block) options.paged = PagedGenerateOptions{block, 0, true};
      options.observe = [&](int, int, std::span<const float> l) {
        all.emplace_back(l.begin(), l.end());
      };
      EXPECT_TRUE(generate(*model.value(), prompts, options, Parallel{2}).is_ok());
      return all;
    };
    const auto cached = run(true, 0, a.value());
    EXPECT_EQ(run(false, 0, a.value()), cached);
    EXPECT_EQ(run(true, 4, a.value()), cached);
    KvStorageOptions unit;
    unit.dtype = KvDtype::q8_0_kc;  // scales 1: the keys' q8_0 before RoPE
    EXPECT_NE(run(true, 0, unit)[0], cached[0]);
  }
  KvStorageOptions bad;
  bad.dtype = KvDtype::q8_0;
  bad.k_channel_scales = {1.0f};
  EXPECT_NE(validate_kv_storage(bad, 1, 1).message().find("per-channel key scales are q8_0_kc's"),
            std::string::npos);
  bad.dtype = KvDtype::q8_0_kc;
  EXPECT_NE(validate_kv_storage(bad, 2, 4).message().find("need n_layer x kv_dim = 8 values"),
            std::string::npos);
  bad.k_channel_scales.assign(8, 0.0f);
  EXPECT_NE(validate_kv_storage(bad, 2, 4).message().find("is not a positive finite number"),
            std::string::npos);
}

// The calibration input starts as a real sequence does, with the model's BOS (whose keys are
// the attention sink's, among the largest), then the fixed pseudo-random ids; a model without
// BOS keeps the pseudo-random first id. The scales see it: the same weights with another BOS
// id calibrate to other scales.
TEST(KvCalibration, InputStartsWithTheModelsBos) {
  ModelConfig c = test::tiny_gpt2_config();
  c.bos_token_id = 7;
  const std::vector<int32_t> with_bos = calibration_tokens(c, 40);
  ASSERT_EQ(with_bos.size(), 40u);
  EXPECT_EQ(with_bos[0], 7);
  c.bos_token_id = -1;
  const std::vector<int32_t> without = calibration_tokens(c, 40);
  EXPECT_NE(without[0], 7);
  EXPECT_TRUE(std::equal(without.begin() + 1, without.end(), with_bos.begin() + 1));
  EXPECT_EQ(calibration_tokens(c, 40), without);  // fixed: the same ids every time

  auto scales = [&](int bos) {
    ModelConfig config = test::tiny_gpt2_config();
    config.bos_token_id = bos;
    test::TempDir dir;
    EXPECT_TRUE(write_random_gpt2(dir.path(), config, {}).is_ok());
    auto model = load_model(dir.path(), LoadOptions{});
    EXPECT_TRUE(model.is_ok()) << model.message();
    EXPECT_EQ(model.value()->config().bos_token_id, bos);
    auto kc = calibrate_key_channel_scales(*model.value(), Parallel{1});
    auto fp8 = calibrate_fp8_scales(*model.value(), Parallel{1});
    EXPECT_TRUE(kc.is_ok() && fp8.is_ok());
    return std::make_pair(kc->k_channel_scales, fp8->fp8_k_scales);
  };
  const auto seven = scales(7), none = scales(-1);
  EXPECT_NE(seven.first, none.first);
  EXPECT_NE(seven.second, none.second);
  EXPECT_EQ(scales(7), seven);
}

}  // namespace
}  // namespace kvlm
