// examples/embed_engine.cpp is built with include/kvlm as its only kvlm include folder: that it
// compiles at all is the claim "an embedding program needs only the public headers". This test
// checks it also works: run as a separate program on a model file, it streams the same tokens
// (and the same finish reason) as run_to_completion gives in-process.
#include <gtest/gtest.h>

#include <string>

#include "support/engine_runs.h"

namespace kvlm {
namespace {

TEST(EmbedExampleTest, StreamsTheEnginesTokensUsingOnlyThePublicHeaders) {
  test::TempDir dir;
  auto model = test::engine_llama(dir);
  ASSERT_TRUE(model);
  Request request;
  request.prompt_ids = {1, 7, 3, 12};
  request.max_new_tokens = 9;
  request.sampling.temperature = 0.0f;
  auto engine = Engine::create(model, EngineOptions{});
  ASSERT_TRUE(engine.is_ok()) << engine.message();
  auto completions = run_to_completion(*engine.value(), {request});
  ASSERT_TRUE(completions.is_ok()) << completions.message();
  const Completion& want = completions.value()[0];
  ASSERT_FALSE(want.ids.empty());
  std::string expected;
  for (int32_t id : want.ids) expected += std::to_string(id) + " ";
  expected += std::string("[") + finish_reason_name(want.finish) + "]\n";

  const std::string args = test::shell_quote(dir.file("model.bin")) + " 9 1 7 3 12";
  const test::CommandResult run = test::run_program(KVLM_EMBED_EXAMPLE, args);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, expected);
}

TEST(EmbedExampleTest, AMissingModelIsAnErrorNamingThePath) {
  test::TempDir dir;
  const std::string args = test::shell_quote(dir.file("absent.bin")) + " 4 1 2";
  const test::CommandResult run = test::run_program(KVLM_EMBED_EXAMPLE, args);
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("absent.bin"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace kvlm
