// `kvlm bench --engine` on a tiny model with a small workload: every JSON key present, the
// counts exact (requests x new tokens), latencies ordered, prefix hits found, and the static
// batch giving the engine's tokens. No timing is asserted beyond "positive".
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/random_gpt2.h"
#include "support/test_support.h"

namespace kvlm {
namespace {

TEST(EngineBenchTest, CliReportsTheLoadFiguresAndMatchesTheStaticBatch) {
  test::TempDir dir;
  ASSERT_TRUE(write_random_gpt2(dir.path(), test::tiny_gpt2_config(), {}).is_ok());
  const auto r = test::run_kvlm("bench --engine --model '" + dir.path() +
                                "' --requests 9 --min-prompt 4 --max-prompt 30 --new-tokens 5 "
                                "--max-seqs 3 --threads 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* key :
       {"requests", "prompt_tokens", "generated_tokens", "wall_seconds", "output_tokens_per_second",
        "ttft_p50_seconds", "ttft_p99_seconds", "itl_p50_seconds", "itl_p99_seconds", "preemptions",
        "prefix_hit_rate", "decode_tokens_per_second", "single_decode_tokens_per_second",
        "decode_scaling", "static_wall_seconds", "static_output_tokens_per_second",
        "static_identical"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["requests"], 9);
  EXPECT_EQ(j["generated_tokens"], 9 * 5);
  EXPECT_TRUE(j["static_identical"].get<bool>());
  EXPECT_GT(j["output_tokens_per_second"].get<double>(), 0);
  EXPECT_LE(j["ttft_p50_seconds"].get<double>(), j["ttft_p99_seconds"].get<double>());
  EXPECT_LE(j["itl_p50_seconds"].get<double>(), j["itl_p99_seconds"].get<double>());
  // Every fourth request shares the first prompt's prefix (29 tokens with this context): one
  // computes it, the later ones find its full blocks.
  EXPECT_GT(j["prefix_hit_rate"].get<double>(), 0.0);
}

TEST(EngineBenchTest, PagedAndEngineTogetherAreRefused) {
  const auto r = test::run_kvlm("bench --engine --paged");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--paged and --engine"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kvlm
