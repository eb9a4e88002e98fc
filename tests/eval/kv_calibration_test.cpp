// fp8 scales calibrated once per model: the same scales every time (a fixed input), one per
// (layer, KV head) for K and V, each mapping the largest value seen to 112; and generation with
// them keeps the exactness contract (cached == uncached, paged == contiguous, bitwise).
#include "eval/kv_calibration.h"

#include <gtest/gtest.h>

#include <cstring>

#include "generate/generate.h"
#include "model/llama_random.h"
#include "model/loader.h"
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

}  // namespace
}  // namespace kvlm
