// What EngineStats reports: the cache's capacity (valid before the first step, as the server's
// ready line and /metrics read it), its blocks in use as requests come and go, and the seed's
// cache arithmetic that `kvlm demo` prints from it.
#include <gtest/gtest.h>

#include "kv/kv_cache.h"
#include "model/model.h"
#include "support/engine_runs.h"
#include "support/test_models.h"

namespace kvlm {
namespace {

TEST(EngineStatsTest, CapacityIsKnownBeforeTheFirstStepAndBlocksAreCounted) {
  test::TempDir dir;
  auto model = test::engine_gpt2(dir);
  ASSERT_TRUE(model);
  const ModelConfig& c = model->model().config();
  EngineOptions options;
  options.block_size = 4;
  options.kv_tokens = 40;  // 10 blocks
  options.kv_dtype = "q8_0";
  auto engine = Engine::create(model, options);
  ASSERT_TRUE(engine.is_ok()) << engine.message();
  Engine& e = *engine.value();
  const size_t block_bytes = 2 * c.n_layer * 4 * kv_row_bytes(KvDtype::q8_0, c.kv_dim());
  EngineStats st = e.stats();
  EXPECT_EQ(st.kv_block_size, 4);
  EXPECT_EQ(st.kv_blocks_total, 10);
  EXPECT_EQ(st.kv_blocks_used, 0);
  EXPECT_EQ(st.kv_blocks_free, 10);
  EXPECT_EQ(st.kv_bytes_total, 10 * block_bytes);

  // A 6-token prompt: 2 blocks after its prefill, 3 once its 7th position is written.
  ASSERT_TRUE(e.submit(test::greedy_request({1, 2, 3, 4, 5, 6}, 3)).is_ok());
  e.step();
  st = e.stats();
  EXPECT_EQ(st.kv_blocks_used, 2);
  EXPECT_EQ(st.kv_blocks_free, 8);
  EXPECT_DOUBLE_EQ(st.kv_usage, 0.2);
  e.step();
  EXPECT_EQ(e.stats().kv_blocks_used, 2);  // position 6 is in block 1
  e.step();  // the last token is never fed back: the request ends with 7 positions written
  st = e.stats();
  EXPECT_FALSE(e.has_unfinished());
  EXPECT_EQ(st.kv_blocks_used, 0);  // given back (its full block stays cached, and free)
  EXPECT_EQ(st.kv_blocks_free, 10);
  EXPECT_EQ(st.kv_blocks_total, 10);
  EXPECT_EQ(st.kv_bytes_peak, 2 * block_bytes);
}

// The seed's formula, 2 * n_layer * n_kv_head * head_dim * tokens * sizeof(float) with tokens =
// prompt + max_new - 1 per sequence, is what the cache holds with blocks of one position (what
// `kvlm demo` runs with); on Llama only the KV heads are stored (grouped-query attention's
// lever). Rows computed: each prompt once, then one row per sequence and step; uncached, every
// step recomputes everything.
TEST(EngineStatsTest, BlocksOfOnePositionHoldExactlyTheSeedsFormula) {
  for (const test::ModelSpec& spec :
       {test::gpt2_spec(), test::llama_spec(test::ModelFormat::kLlama2cBin, 4),
        test::llama_spec(test::ModelFormat::kLlama2cBin, 2),
        test::llama_spec(test::ModelFormat::kLlama2cBin, 1)}) {
    SCOPED_TRACE(spec.name());
    test::TempDir dir;
    auto loaded = test::write_and_load(spec, dir);
    ASSERT_TRUE(loaded.is_ok()) << loaded.message();
    const ModelConfig c = loaded.value()->config();
    auto model = LoadedModel::from_parts(std::move(loaded.value()), nullptr);
    ASSERT_TRUE(model.is_ok()) << model.message();
    const std::vector<std::vector<int32_t>> prompts = {
        {7, 3, 19, 1, 25, 8, 11, 4, 2, 15}, {9, 2}, {1, 6, 4, 22}};
    for (bool cached : {true, false}) {
      EngineOptions options;
      options.block_size = 1;
      options.max_running = 3;
      options.prefix_caching = false;
      options.recompute_every_step = !cached;
      options.kv_tokens = (10 + 19) + (2 + 19) + (4 + 19);
      auto engine = Engine::create(model.value(), options);
      ASSERT_TRUE(engine.is_ok()) << engine.message();
      std::vector<Request> requests;
      for (const auto& p : prompts) requests.push_back(test::greedy_request(p, 20));
      ASSERT_TRUE(run_to_completion(*engine.value(), requests).is_ok());
      const EngineStats st = engine.value()->stats();
      const int64_t tokens = (10 + 19) + (2 + 19) + (4 + 19);
      EXPECT_EQ(static_cast<int64_t>(st.kv_bytes_peak),
                2LL * c.n_layer * c.n_kv_head * c.head_dim * tokens * 4);
      // Uncached, step s recomputes prompt + s positions of each sequence.
      const int64_t uncached_rows = (10 + 2 + 4) * 20 + 3 * (19 * 20 / 2);
      EXPECT_EQ(st.rows_computed, cached ? 16 + 19 * 3 : uncached_rows);
    }
  }
}

}  // namespace
}  // namespace kvlm
