// llama2.c's stories260K through the kvlm program: `kvlm generate` prints what run.c prints,
// byte for byte (../shared/data/stories260K/golden.json), on 1 thread and on 2, and `kvlm demo`
// shows the grouped-query attention lever.
#include <gtest/gtest.h>

#include "support/stories.h"
#include "support/test_support.h"

namespace kvlm {
namespace {

// The same through the command-line program: run.c's `-n 200` is `--steps 200`, or
// `--max-new` = 200 + 1 - (prompt ids, BOS included).
TEST(CliStories, GenerateMatchesRunC) {
  KVLM_REQUIRE_STORIES(dir);
  const std::string files =
      "--model '" + dir + "/stories260K.bin' --tokenizer '" + dir + "/tok512.bin' ";
  for (const test::StoriesCase& c : test::stories_cases(dir)) {
    // Two spellings of the same length, the second on two threads: still run.c's bytes.
    for (const std::string& count : {"--steps " + std::to_string(c.steps) + " --threads 1",
                                     "--max-new " + std::to_string(c.max_new()) + " --threads 2"}) {
      const test::CommandResult r = test::run_kvlm("generate " + files + "--prompt '" + c.prompt +
                                                   "' " + count + " --temperature 0");
      EXPECT_EQ(r.exit_code, 0) << r.err;
      EXPECT_EQ(r.out, c.stdout_text) << c.prompt << " " << count;
    }
  }
}

TEST(CliStories, DemoShowsTheGqaLever) {
  KVLM_REQUIRE_STORIES(dir);
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
