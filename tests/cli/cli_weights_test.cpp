// `--weights` on a model whose rows are not whole blocks (stories260K: 64 wide, `w2` 172): the
// program says on standard error which types the matrices took (llama.cpp's fallbacks) and runs.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/random_gpt2.h"
#include "support/stories.h"
#include "support/test_support.h"

namespace kvlm {
namespace {

TEST(CliWeights, FallbackTypesAreReported) {
  KVLM_REQUIRE_STORIES(dir);
  const std::string files =
      "--model '" + dir + "/stories260K.bin' --tokenizer '" + dir + "/tok512.bin' ";
  const std::pair<const char*, const char*> kCases[] = {
      {"q4_k", "--weights q4_k: matrices stored as Q5_0 x 31, F16 x 5"},
      {"q6_k", "--weights q6_k: matrices stored as Q8_0 x 31, F16 x 5"},
      {"q8_0", "--weights q8_0: matrices stored as Q8_0 x 31, F32 x 5"},
      {"q4_k_mix", "--weights q4_k_mix: matrices stored as Q5_0 x 28, F16 x 5, Q8_0 x 3"}};
  for (const auto& [type, line] : kCases) {
    const test::CommandResult r =
        test::run_kvlm("generate " + files +
                       "--prompt 'Lily wanted to' --max-new 8 --threads 1 --weights " + type);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find(line), std::string::npos) << r.err;
    EXPECT_FALSE(r.out.empty()) << type;
  }
  // Every matrix as asked: nothing to report.
  const test::CommandResult f16 =
      test::run_kvlm("generate " + files + "--prompt 'Lily' --max-new 2 --weights f16");
  EXPECT_EQ(f16.exit_code, 0) << f16.err;
  EXPECT_EQ(f16.err.find("matrices stored as"), std::string::npos) << f16.err;
}

// --weights q4_k_mix at load stores each matrix as `kvlm convert --type q4_k_mix` does
// (2 layers, tied head: the embedding and layer 1's ffn_down take Q6_K, the rest Q4_K), so
// logits and generations equal those of the converted file, through both load paths (logits:
// the model alone; generate: the model with its conventions). `--compare-weights` takes it too.
TEST(CliWeights, Q4KMixAtLoadEqualsTheConvertedFile) {
  test::TempDir dir;
  ModelConfig c = test::tiny_gpt2_config();
  c.n_embd = c.n_ff = 256;  // whole Q4_K / Q6_K blocks
  c.head_dim = c.n_embd / c.n_head;
  ASSERT_TRUE(write_random_gpt2(dir.path(), c, {}).is_ok());
  const std::string gguf = dir.file("mix.gguf");
  const test::CommandResult convert = test::run_kvlm(
      "convert --model '" + dir.path() + "' --out '" + gguf + "' --type q4_k_mix --no-tokenizer");
  ASSERT_EQ(convert.exit_code, 0) << convert.err;
  const std::string ids = " --ids 5,6,7 --ids 8 --threads 2";
  for (const std::string command : {"logits --json", "generate --json --max-new 4"}) {
    const test::CommandResult mixed =
        test::run_kvlm(command + " --model '" + dir.path() + "' --weights q4_k_mix" + ids);
    const test::CommandResult converted = test::run_kvlm(command + " --model '" + gguf + "'" + ids);
    ASSERT_EQ(mixed.exit_code, 0) << command << ": " << mixed.err;
    ASSERT_EQ(converted.exit_code, 0) << command << ": " << converted.err;
    // The sequences (and logits) only: generate's stats hold timings.
    const auto a = nlohmann::json::parse(mixed.out), b = nlohmann::json::parse(converted.out);
    const char* key = a.contains("logits") ? "logits" : "sequences";
    ASSERT_TRUE(a.contains(key)) << mixed.out;
    EXPECT_EQ(a[key], b[key]) << command;
  }
  const test::CommandResult logits =
      test::run_kvlm("logits --json --model '" + dir.path() + "' --weights q4_k_mix" + ids);
  EXPECT_NE(logits.err.find("--weights q4_k_mix: matrices stored as Q4_K x 7, Q6_K x 2"),
            std::string::npos)
      << logits.err;
  const test::CommandResult unknown =
      test::run_kvlm("logits --model '" + dir.path() + "' --weights q5_k_mix" + ids);
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("--weights"), std::string::npos) << unknown.err;
}

// serve takes --weights as every other command that runs a model (ServeE2e.OpenAiClient serves a
// q4_0 model and checks its completions against `kvlm generate --weights q4_0`); an unknown type
// is refused naming the flag, before anything is bound.
TEST(CliWeights, ServeRefusesAnUnknownType) {
  test::TempDir dir;
  ASSERT_TRUE(write_random_gpt2(dir.path(), test::tiny_gpt2_config(), {}).is_ok());
  const test::CommandResult r =
      test::run_kvlm("serve --model '" + dir.path() + "' --port 0 --weights q3_k");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--weights"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("q3_k"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kvlm
