// The kvlm program as scripts call it: generate and logits with --json, and bad input
// turning into a clear message and a non-zero exit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace kvlm {
namespace {

using ::testing::HasSubstr;

class CliCore : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    ASSERT_TRUE(write_random_gpt2(dir_->path(), test::tiny_gpt2_config(), {}).is_ok());
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string model() { return "--model '" + dir_->path() + "'"; }
  static test::TempDir* dir_;
};
test::TempDir* CliCore::dir_ = nullptr;

TEST_F(CliCore, GenerateJsonCachedEqualsUncached) {
  const std::string args = "generate " + model() + " --ids 7,3,19,1 --ids 9,2 --max-new 6 --json";
  const auto cached = test::run_kvlm(args);
  const auto uncached = test::run_kvlm(args + " --no-cache");
  ASSERT_EQ(cached.exit_code, 0) << cached.err;
  ASSERT_EQ(uncached.exit_code, 0) << uncached.err;
  const auto a = nlohmann::json::parse(cached.out);
  const auto b = nlohmann::json::parse(uncached.out);
  ASSERT_EQ(a["sequences"].size(), 2u);
  EXPECT_EQ(a["sequences"][0]["prompt_ids"], nlohmann::json({7, 3, 19, 1}));
  EXPECT_EQ(a["sequences"][1]["prompt_ids"], nlohmann::json({9, 2}));
  EXPECT_EQ(a["sequences"][0]["ids"].size(), 6u);
  EXPECT_EQ(a["sequences"], b["sequences"]);
  EXPECT_TRUE(a["stats"].contains("kv_cache_bytes"));
}

TEST_F(CliCore, GeneratePlainPrintsOneLinePerPrompt) {
  const auto r = test::run_kvlm("generate " + model() + " --ids 1,2 --ids 3 --max-new 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 2);
}

TEST_F(CliCore, LogitsJsonCachedEqualsUncached) {
  const auto cached = test::run_kvlm("logits " + model() + " --ids 5,6,7 --ids 8 --json");
  const auto uncached =
      test::run_kvlm("logits " + model() + " --ids 5,6,7 --ids 8 --json --no-cache");
  ASSERT_EQ(cached.exit_code, 0) << cached.err;
  const auto j = nlohmann::json::parse(cached.out);
  ASSERT_EQ(j["logits"].size(), 2u);
  EXPECT_EQ(j["logits"][0].size(), 64u);
  EXPECT_EQ(cached.out, uncached.out);  // bitwise: printed with 9 significant digits
}

TEST_F(CliCore, HelpDescribesFlags) {
  const auto top = test::run_kvlm("--help");
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_THAT(top.out, HasSubstr("generate"));
  const auto gen = test::run_kvlm("generate --help");
  EXPECT_THAT(gen.out, HasSubstr("--max-new"));
  EXPECT_THAT(gen.out, HasSubstr("--no-cache"));
}

struct BadInput {
  std::string args;
  std::string message;
};

TEST_F(CliCore, BadInputFailsWithClearMessage) {
  const std::vector<BadInput> cases = {
      {"--ids 1,64", "token id 64 is outside the vocabulary [0, 64)"},
      {"--ids 1,-2", "token id -2 is negative"},
      {"--ids 1,x", "--ids: expected integer token ids"},
      {"--ids ,", "--ids: empty prompt"},
      {"--ids 1 --max-new 0", "--max-new must be at least 1, found 0"},
      {"--ids 1,2,3 --max-new 63", "beyond the context length 64"},
      {"", "give at least one prompt with --prompt or --ids"},
  };
  for (const BadInput& c : cases) {
    const auto r = test::run_kvlm("generate " + model() + " " + c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_THAT(r.err, HasSubstr(c.message)) << c.args;
  }
  const auto missing = test::run_kvlm("generate --model /nonexistent/model --ids 1");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_THAT(missing.err, HasSubstr("/nonexistent/model: no such file or folder"));
  const auto unknown = test::run_kvlm("generate " + model() + " --ids 1 --bogus");
  EXPECT_NE(unknown.exit_code, 0);
}

TEST_F(CliCore, DemoOnGivenModelReportsIdenticalResults) {
  const auto r = test::run_kvlm("demo " + model() + " --threads 2");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_THAT(r.out, HasSubstr("tokens identical (cached vs uncached): yes"));
  EXPECT_THAT(r.out, HasSubstr("max |logit difference| over all steps: 0\n"));
  EXPECT_THAT(r.out, HasSubstr("uncached 390, cached 29 (13.4x less work)"));
}

}  // namespace
}  // namespace kvlm

namespace kvlm {
namespace {

// --block-size puts generate on the paged cache: prompts sharing a prefix reuse its blocks
// (fewer rows computed) and every sequence's tokens stay those of the contiguous cache.
TEST_F(CliCore, PagedCacheSharesPrefixesWithIdenticalTokens) {
  const std::string prompts =
      " --ids 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20"
      " --ids 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21 --max-new 5 --ignore-eos "
      "--json";
  const auto contiguous = test::run_kvlm("generate " + model() + prompts);
  const auto paged = test::run_kvlm("generate " + model() + prompts + " --block-size 4");
  ASSERT_EQ(contiguous.exit_code, 0) << contiguous.err;
  ASSERT_EQ(paged.exit_code, 0) << paged.err;
  const auto a = nlohmann::json::parse(contiguous.out);
  const auto b = nlohmann::json::parse(paged.out);
  EXPECT_EQ(a["sequences"], b["sequences"]);
  EXPECT_GT(b["stats"]["prompt_tokens_cached"].get<int>(), 0);
  EXPECT_LT(b["stats"]["rows_computed"].get<int>(), a["stats"]["rows_computed"].get<int>());
  const auto bad = test::run_kvlm("generate " + model() + prompts + " --kv-memory 12parsecs");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.err, HasSubstr("--kv-memory"));
}

}  // namespace
}  // namespace kvlm
