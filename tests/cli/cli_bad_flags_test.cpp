// Flag values found by a run of hostile command lines: each used to be accepted silently, to
// crash, or to exit with CLI11's own codes (104-114). Now each exits 1 with a message naming
// the flag, as the README promises.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace kvlm {
namespace {

using ::testing::HasSubstr;

class CliBadFlags : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    ASSERT_TRUE(write_random_gpt2(dir_->path(), test::tiny_gpt2_config(), {}).is_ok());
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string generate() { return "generate --model '" + dir_->path() + "' --ids 1,2 "; }
  static test::TempDir* dir_;
};
test::TempDir* CliBadFlags::dir_ = nullptr;

TEST_F(CliBadFlags, RefusedWithExitOneNamingTheFlag) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--steps -3", "--steps"},
      {"--steps 0", "--steps"},
      {"--block-size 0", "--block-size"},
      {"--block-size 65537", "--block-size"},
      {"--seed -1", "--seed"},
      {"--threads 1024", "--threads"},
      {"--threads -1", "--threads"},
      {"--max-new x", "--max-new"},
      {"--max-new 1 --max-new 2", "--max-new"},
      {"--bogus", "--bogus"},
  };
  for (const auto& [args, flag] : cases) {
    const auto r = test::run_kvlm(generate() + args);
    EXPECT_EQ(r.exit_code, 1) << args << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(flag)) << args;
  }
  const auto no_command = test::run_kvlm("");
  EXPECT_EQ(no_command.exit_code, 1) << no_command.err;
  const auto unknown_command = test::run_kvlm("frobnicate");
  EXPECT_EQ(unknown_command.exit_code, 1) << unknown_command.err;
  EXPECT_EQ(test::run_kvlm("generate --help").exit_code, 0);
  // kvlm bench: an unknown SIMD target is refused before any model is made, the ones this CPU
  // runs listed; --decode-only belongs to the default benchmark only.
  const auto simd = test::run_kvlm("bench --simd NOSUCH");
  EXPECT_EQ(simd.exit_code, 1) << simd.err;
  EXPECT_THAT(simd.err, HasSubstr("--simd"));
  EXPECT_THAT(simd.err, HasSubstr("NOSUCH"));
  const auto decode_only = test::run_kvlm("bench --decode-only --paged");
  EXPECT_EQ(decode_only.exit_code, 1) << decode_only.err;
  EXPECT_THAT(decode_only.err, HasSubstr("--decode-only"));
}

TEST_F(CliBadFlags, HugeKvMemoryOnlyCostsWhatTheRunUses) {
  // 1 TB used to size the block bookkeeping (and the arena) by the claim.
  const auto r = test::run_kvlm(generate() + "--max-new 3 --kv-memory 1TB --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["sequences"][0]["ids"].size(), 3u);
  // Two layers x 32 wide x 2 (K and V) x 4 bytes x one 16-position block = 8 KiB.
  EXPECT_LE(j["stats"]["kv_cache_bytes"].get<int64_t>(), 8192) << r.out;
}

}  // namespace
}  // namespace kvlm
