// `kvlm kv-size` end to end: JSON and text for presets and config folders, errors with exit
// code 1, and a llama2.c model.bin's header (stories260K keeps 4 KV heads for its 8 query
// heads, so its cache is half what full multi-head K/V would take).
#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace kvlm {
namespace {

TEST(CliKvSizeLlama2c, StoriesModelBinHeader) {
  KVLM_REQUIRE_SHARED_DATA("stories260K/stories260K.bin");
  const auto r =
      test::run_kvlm("kv-size --model '" + test::shared_data_path("stories260K/stories260K.bin") +
                     "' --seq-len 512 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  // 2 (K and V) x 5 layers x 4 KV heads x head_dim 8 x 512 tokens x 4 bytes
  EXPECT_EQ(j["bytes"].get<int64_t>(), 2LL * 5 * 4 * 8 * 512 * 4);
  EXPECT_EQ(j["bytes_per_token"].get<int64_t>(), 2LL * 5 * 4 * 8 * 4);
  EXPECT_EQ(j["mha_bytes"].get<int64_t>(), 2LL * 5 * 8 * 8 * 512 * 4);
}

TEST(CliKvSize, JsonForTheSeedsGpt2Batch8) {
  test::CommandResult r = test::run_kvlm("kv-size --preset gpt2 --seq-len 1024 --batch 8 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["bytes"].get<std::uint64_t>(), 603'979'776ull);
  EXPECT_EQ(j["bytes_per_token"].get<std::uint64_t>(), 2ull * 12 * 12 * 64 * 4);
  EXPECT_EQ(j["bytes_per_layer"].get<std::uint64_t>(), 603'979'776ull / 12);
  EXPECT_EQ(j["weights_bytes"].get<std::uint64_t>(), 124'439'808ull * 4);
  EXPECT_EQ(j["dtype"], "f32");  // GPT-2's checkpoint dtype, the default
  EXPECT_EQ(j["seq_len"], 1024);
  EXPECT_EQ(j["batch"], 8);
  EXPECT_EQ(j["kept_positions"], 1024);
  EXPECT_EQ(j["mha_bytes"], j["bytes"]);
}

// q8_0_kc stores q8_0 rows (its per-channel key scales are a fixed few bytes per model, not per
// token, and not counted, like fp8's), so kv-size prices it as q8_0: 34 bytes per 32 values.
TEST(CliKvSize, KeyChannelQ8PricesAsQ8) {
  const auto q8 = test::run_kvlm("kv-size --preset gpt2 --seq-len 1024 --dtype q8_0 --json");
  const auto kc = test::run_kvlm("kv-size --preset gpt2 --seq-len 1024 --dtype Q8_0_KC --json");
  ASSERT_EQ(q8.exit_code, 0) << q8.err;
  ASSERT_EQ(kc.exit_code, 0) << kc.err;
  const auto a = nlohmann::json::parse(q8.out), b = nlohmann::json::parse(kc.out);
  EXPECT_EQ(b["bytes"].get<std::uint64_t>(), 2ull * 12 * 12 * 64 * 1024 / 32 * 34);
  EXPECT_EQ(b["bytes"], a["bytes"]);
  EXPECT_EQ(b["dtype"], "q8_0_kc");
  EXPECT_EQ(b["dtype_bytes"], a["dtype_bytes"]);  // 1.0625
  EXPECT_EQ(b["weights_dtype"], "q8_0");
}

TEST(CliKvSize, ModelDirAndDtypeAndText) {
  test::TempDir dir;
  test::write_text(dir.file("config.json"), R"({"model_type": "mistral", "num_hidden_layers": 32,
      "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096,
      "sliding_window": 4096})");
  test::CommandResult r =
      test::run_kvlm("kv-size --model '" + dir.path() + "' --seq-len 8192 --dtype fp8 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["bytes"].get<std::uint64_t>(), 2ull * 32 * 8 * 128 * 4096 * 1 * 1);
  EXPECT_EQ(j["kept_positions"], 4096);
  EXPECT_EQ(j["mha_bytes"].get<std::uint64_t>(), 2ull * 32 * 32 * 128 * 4096 * 1 * 1);
  EXPECT_TRUE(j["weights_bytes"].is_null());  // no vocab_size: not counted
  EXPECT_TRUE(j.contains("weights_note"));

  r = test::run_kvlm("kv-size --preset llama-3.3-70b --seq-len 128000 --dtype f16");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("41,943,040,000 bytes (41.9 GB, 39.1 GiB)"), std::string::npos) << r.out;
}

TEST(CliKvSize, BadInputExitsNonZeroWithTheReason) {
  test::CommandResult r = test::run_kvlm("kv-size --preset nope --seq-len 10");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("unknown preset 'nope'"), std::string::npos) << r.err;
  r = test::run_kvlm("kv-size --preset gpt2 --seq-len 10 --dtype f64");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("f32, f16, bf16, fp8, int8"), std::string::npos) << r.err;
  r = test::run_kvlm("kv-size --preset gpt2 --seq-len=-3");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--seq-len: must be a positive number of tokens, found -3"),
            std::string::npos)
      << r.err;
  r = test::run_kvlm("kv-size --seq-len 10");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("exactly one of --config"), std::string::npos) << r.err;
  r = test::run_kvlm("kv-size --preset gpt2 --model /tmp --seq-len 10");
  EXPECT_NE(r.exit_code, 0);
  r = test::run_kvlm("kv-size --model /nonexistent/kvlm --seq-len 10");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no config.json in '/nonexistent/kvlm'"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kvlm
