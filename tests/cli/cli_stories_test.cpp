// llama2.c's stories260K through the kvlm program: `kvlm generate` prints what run.c prints,
// byte for byte (../shared/data/stories260K/golden.json), on 1 thread and on 2, and `kvlm demo`
// shows the grouped-query attention lever.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "tokenizer/llama2c_tokenizer.h"

namespace kvlm {
namespace {

#define REQUIRE_STORIES(dir)                                                        \
  KVLM_REQUIRE_SHARED_DATA("stories260K/stories260K.bin", "stories260K/tok512.bin", \
                           "stories260K/golden.json");                              \
  const std::string dir = test::shared_data_path("stories260K")

// The same through the command-line program: run.c's `-n 200` is `--steps 200`, or
// `--max-new` = 200 + 1 - (prompt ids, BOS included).
TEST(CliStories, GenerateMatchesRunC) {
  REQUIRE_STORIES(dir);
  const auto golden = nlohmann::json::parse(test::read_text(dir + "/golden.json"));
  const std::string files =
      "--model '" + dir + "/stories260K.bin' --tokenizer '" + dir + "/tok512.bin' ";
  for (const auto& c : golden["cases"]) {
    const std::string prompt = c["prompt"].get<std::string>();
    const std::string expected = c["stdout"].get<std::string>();
    const int steps = c["steps"].get<int>();
    const int max_new = llama2c_steps_to_max_new(steps, c["prompt_ids"].size());
    // Two spellings of the same length, the second on two threads: still run.c's bytes.
    for (const std::string& count : {"--steps " + std::to_string(steps) + " --threads 1",
                                     "--max-new " + std::to_string(max_new) + " --threads 2"}) {
      const test::CommandResult r = test::run_kvlm("generate " + files + "--prompt '" + prompt +
                                                   "' " + count + " --temperature 0");
      EXPECT_EQ(r.exit_code, 0) << r.err;
      EXPECT_EQ(r.out, expected) << prompt << " " << count;
    }
  }
}

TEST(CliStories, DemoShowsTheGqaLever) {
  REQUIRE_STORIES(dir);
  const test::CommandResult r =
      test::run_kvlm("demo --model '" + dir + "/stories260K.bin' --threads 1");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("8 heads (4 KV heads)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tokens identical (cached vs uncached): yes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1280 bytes per token"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("grouped-query attention saves 2.0x"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace kvlm
