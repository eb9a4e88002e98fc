// kv-size reads a llama2.c model.bin's header: stories260K keeps 4 KV heads for its 8 query
// heads, so its cache is half what full multi-head K/V would take.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace kvlm
