// --kv-dtype on the commands that build a cache: each dtype keeps cached == uncached to the
// printed digit (logits, generate through the engine with --logprobs), demo's bitwise check
// passes, the dtype really changes the logits, and a bad value is refused by name.
#include <gtest/gtest.h>

#include <string>

#include "model/random_gpt2.h"
#include "support/test_support.h"

namespace kvlm {
namespace {

class CliKvDtype : public ::testing::Test {
 protected:
  void SetUp() override {
    RandomGpt2Options options;
    options.seed = 5;
    ASSERT_TRUE(write_random_gpt2(dir_.path(), test::tiny_gpt2_config(), options).is_ok());
  }
  std::string model() const { return "--model " + dir_.path() + " --threads 2"; }
  test::TempDir dir_;
};

TEST_F(CliKvDtype, LogitsAndGenerateAreExactPerDtype) {
  const std::string ids = " --ids 5,6,7,9,10,11 --ids 8";
  const auto f32 = test::run_kvlm("logits " + model() + ids + " --json");
  ASSERT_EQ(f32.exit_code, 0) << f32.err;
  for (const char* dtype : {"f16", "bf16", "q8_0", "fp8"}) {
    SCOPED_TRACE(dtype);
    const std::string kv = std::string(" --kv-dtype ") + dtype;
    const auto cached = test::run_kvlm("logits " + model() + ids + kv + " --json");
    const auto uncached = test::run_kvlm("logits " + model() + ids + kv + " --json --no-cache");
    ASSERT_EQ(cached.exit_code, 0) << cached.err;
    EXPECT_EQ(cached.out, uncached.out);
    EXPECT_NE(cached.out, f32.out) << "--kv-dtype changed nothing";
    const std::string gen = "generate " + model() + ids + kv + " --max-new 6 --json --logprobs 3";
    const auto engine = test::run_kvlm(gen);
    const auto recompute = test::run_kvlm(gen + " --no-cache");
    ASSERT_EQ(engine.exit_code, 0) << engine.err;
    EXPECT_EQ(engine.out.substr(0, engine.out.find("\"stats\"")),
              recompute.out.substr(0, recompute.out.find("\"stats\"")));
    const auto demo = test::run_kvlm("demo " + model() + kv + " --max-new 4");
    EXPECT_EQ(demo.exit_code, 0) << demo.out << demo.err;
    EXPECT_NE(demo.out.find("tokens identical (cached vs uncached): yes"), std::string::npos);
  }
  const auto demo = test::run_kvlm("demo " + model() + " --kv-dtype q8_0 --max-new 2");
  // Tiny GPT-2: 2 layers x (32 int8 + 1 fp16 scale) bytes per row, K and V: 136 per token.
  EXPECT_NE(demo.out.find("KV cache, q8_0: 2 x 2 layers x 34 bytes per row"), std::string::npos)
      << demo.out;
  EXPECT_NE(demo.out.find("= 136 bytes per token (fp32: 512)"), std::string::npos) << demo.out;
}

TEST_F(CliKvDtype, BadDtypeIsRefusedByName) {
  const std::pair<const char*, const char*> commands[] = {
      {"logits", " --ids 1,2 --json"}, {"generate", " --ids 1,2"}, {"demo", " --max-new 2"},
      {"perplexity", " --file x.txt"}, {"bench", " --paged"},      {"serve", " --port 0"}};
  for (const auto& [cmd, args] : commands) {
    const auto r = test::run_kvlm(std::string(cmd) + " " + model() + args + " --kv-dtype int4");
    EXPECT_EQ(r.exit_code, 1) << cmd;
    EXPECT_NE(r.err.find("--kv-dtype: unknown KV cache dtype 'int4'; accepted: f32, f16, bf16, "
                         "q8_0, fp8, q8_0_kc"),
              std::string::npos)
        << cmd << ": " << r.err;
  }
}

}  // namespace
}  // namespace kvlm
