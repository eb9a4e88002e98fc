// The paged bench's figures on a tiny model: consistent with each other and with the
// arithmetic (no timing is asserted; speed belongs to the bench itself).
#include "bench/paged_bench.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/random_gpt2.h"
#include "support/test_support.h"

namespace kvlm {
namespace {

TEST(PagedBench, FiguresAddUp) {
  ModelConfig config = test::tiny_gpt2_config();
  config.n_ctx = 128;
  auto model = make_random_gpt2(config, RandomGpt2Options{});
  ASSERT_TRUE(model.is_ok()) << model.message();
  PagedBenchOptions o;
  o.block_size = 8;
  o.n_sequences = 5;
  o.min_prompt = 10, o.max_prompt = 60;
  o.min_output = 2, o.max_output = 12;
  o.n_prefix_sequences = 4;
  o.prefix_tokens = 36;  // 4 full blocks of 8 and half of a fifth
  o.min_suffix = 3, o.max_suffix = 9;
  o.prefix_new_tokens = 3;
  auto result = run_paged_bench(*model.value(), o, Parallel{2});
  ASSERT_TRUE(result.is_ok()) << result.message();
  const PagedBenchResult& r = result.value();
  const int64_t per_token = 2LL * config.n_layer * config.kv_dim() * 4;
  EXPECT_EQ(r.kv_bytes_per_token, per_token);
  EXPECT_EQ(r.kv_bytes_contiguous, 5 * 128 * per_token);
  EXPECT_GT(r.kv_bytes_used, 0);
  EXPECT_GE(r.kv_bytes_paged, r.kv_bytes_used);
  EXPECT_EQ(r.kv_bytes_paged % (8 * per_token), 0);  // whole blocks
  // Only half-full last blocks are wasted: under one block per sequence.
  EXPECT_LT(r.kv_bytes_paged - r.kv_bytes_used, 5 * 8 * per_token);
  EXPECT_LT(r.kv_waste_blocks_per_sequence, 1.0);
  EXPECT_DOUBLE_EQ(r.kv_waste_frac,
                   static_cast<double>(r.kv_bytes_paged - r.kv_bytes_used) / r.kv_bytes_paged);
  EXPECT_GE(r.prompt_tokens, 5 * 10);
  EXPECT_LE(r.prompt_tokens, 5 * 60);
  EXPECT_GE(r.generated_tokens, 5 * 2);
  // Three of the four prompts find the prefix's 4 full blocks.
  EXPECT_EQ(r.prefix_tokens_saved, 3 * 32);
  EXPECT_GE(r.prefix_prompt_tokens, 4 * (36 + 3));
  EXPECT_TRUE(r.prefix_exact);

  // `kvlm bench --paged --json` prints this object: the keys, with these values.
  const auto json = nlohmann::json::parse(paged_bench_json(r));
  EXPECT_EQ(json.at("kv_bytes_paged").get<int64_t>(), r.kv_bytes_paged);
  EXPECT_EQ(json.at("kv_bytes_contiguous").get<int64_t>(), r.kv_bytes_contiguous);
  EXPECT_EQ(json.at("kv_waste_frac").get<double>(), r.kv_waste_frac);
  EXPECT_EQ(json.at("prefix_tokens_saved").get<int64_t>(), r.prefix_tokens_saved);
  EXPECT_EQ(json.at("prefix_speedup").get<double>(), r.prefix_speedup);
  EXPECT_TRUE(json.at("prefix_logits_identical").get<bool>());
  EXPECT_NE(paged_bench_text(r).find("bitwise identical"), std::string::npos);
}

TEST(PagedBench, RejectsWorkloadsBeyondTheContext) {
  ModelConfig config = test::tiny_gpt2_config();  // n_ctx 64
  auto model = make_random_gpt2(config, RandomGpt2Options{});
  ASSERT_TRUE(model.is_ok());
  PagedBenchOptions o;  // the default workload needs 1024 positions
  auto result = run_paged_bench(*model.value(), o, Parallel{1});
  ASSERT_FALSE(result.is_ok());
  EXPECT_NE(result.message().find("context length 64"), std::string::npos) << result.message();
  o.block_size = 0;
  result = run_paged_bench(*model.value(), o, Parallel{1});
  ASSERT_FALSE(result.is_ok());
  EXPECT_NE(result.message().find("--block-size"), std::string::npos) << result.message();
}

}  // namespace
}  // namespace kvlm
