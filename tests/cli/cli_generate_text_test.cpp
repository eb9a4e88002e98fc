// kvlm generate with text: encoding prompts, streaming and JSON text that decode the ids,
// --stop cutting the text, seeded sampling reproducible across runs, threads and batches,
// and sampling flags validated with errors naming the flag.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "tokenizer/gpt2_test_data.h"
#include "tokenizer/tokenizer.h"

namespace kvlm {
namespace {

using ::testing::HasSubstr;

class CliGenerateText : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    ModelConfig c = test::tiny_gpt2_config();
    c.n_vocab = 50257;  // GPT-2's vocabulary, so the real tokenizer fits
    c.n_embd = 16;
    c.n_head = 2;
    c.n_kv_head = 2;
    c.head_dim = 8;
    c.n_ff = 64;
    c.eos_token_id = 50256;
    c.bos_token_id = 50256;
    ASSERT_TRUE(write_random_gpt2(dir_->path(), c, {}).is_ok());
  }
  static void TearDownTestSuite() { delete dir_; }
  void SetUp() override {
    KVLM_REQUIRE_GPT2_TOKENIZER();
    tokenizer_path_ = gpt2_test::gpt2_dir();
  }
  std::string args() const {
    return "generate --model '" + dir_->path() + "' --tokenizer '" + tokenizer_path_ + "' ";
  }
  static test::TempDir* dir_;
  std::string tokenizer_path_;
};
test::TempDir* CliGenerateText::dir_ = nullptr;

TEST_F(CliGenerateText, JsonTextDecodesIdsAndStreamMatches) {
  const auto json =
      test::run_kvlm(args() + "--prompt 'Hello, world' --max-new 12 --ignore-eos --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto j = nlohmann::json::parse(json.out);
  const auto& seq = j["sequences"][0];
  auto tokenizer = load_tokenizer(tokenizer_path_);
  ASSERT_TRUE(tokenizer.is_ok());
  EXPECT_EQ(seq["prompt_ids"].get<std::vector<int32_t>>(),
            tokenizer.value()->encode("Hello, world", false));
  const auto ids = seq["ids"].get<std::vector<int32_t>>();
  ASSERT_EQ(ids.size(), 12u);
  auto text = tokenizer.value()->decode(ids);
  ASSERT_TRUE(text.is_ok());
  EXPECT_EQ(seq["text"].get<std::string>(), text.value());
  EXPECT_EQ(seq["finish_reason"], "length");
  // Without --json the same text streams to stdout, then a newline; stats go to stderr.
  const auto plain = test::run_kvlm(args() + "--prompt 'Hello, world' --max-new 12 --ignore-eos");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.out, text.value() + "\n");
  EXPECT_THAT(plain.err, HasSubstr("prompt tokens 3, generated 12"));
  EXPECT_THAT(plain.err, HasSubstr("decode"));
  EXPECT_THAT(plain.err, HasSubstr("KV cache"));
}

TEST_F(CliGenerateText, StopStringCutsTheText) {
  const auto full = test::run_kvlm(args() + "--prompt 'The cat' --max-new 16 --ignore-eos --json");
  ASSERT_EQ(full.exit_code, 0) << full.err;
  const std::string text = nlohmann::json::parse(full.out)["sequences"][0]["text"];
  ASSERT_GE(text.size(), 8u);
  const std::string stop = text.substr(text.size() / 2, 3);
  const size_t cut = text.find(stop);
  const auto stopped = test::run_kvlm(
      args() + "--prompt 'The cat' --max-new 16 --ignore-eos --json --stop '" + stop + "'");
  ASSERT_EQ(stopped.exit_code, 0) << stopped.err;
  const auto seq = nlohmann::json::parse(stopped.out)["sequences"][0];
  EXPECT_EQ(seq["text"].get<std::string>(), text.substr(0, cut));
  EXPECT_EQ(seq["finish_reason"], "stop");
}

TEST_F(CliGenerateText, SeededSamplingIsReproducible) {
  const std::string sample =
      "--max-new 10 --ignore-eos --json --temperature 1.5 --top-k 50 --seed 7 ";
  const auto a = test::run_kvlm(args() + sample + "--prompt 'Once upon' --threads 1");
  const auto b = test::run_kvlm(args() + sample + "--prompt 'Once upon' --threads 2");
  const auto batch =
      test::run_kvlm(args() + sample + "--prompt 'Once upon' --prompt 'A dog' --threads 2");
  const auto other_seed = test::run_kvlm(args() +
                                         "--max-new 10 --ignore-eos --json --temperature 1.5 "
                                         "--top-k 50 --seed 8 --prompt 'Once upon'");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const auto ids = [](const std::string& out, int s) {
    return nlohmann::json::parse(out)["sequences"][s]["ids"].get<std::vector<int32_t>>();
  };
  EXPECT_EQ(ids(a.out, 0), ids(b.out, 0));
  EXPECT_EQ(ids(a.out, 0), ids(batch.out, 0));  // the other sequence does not change this one
  EXPECT_NE(ids(a.out, 0), ids(other_seed.out, 0));
}

TEST_F(CliGenerateText, LogprobsFromTheRawDistribution) {
  const auto r =
      test::run_kvlm(args() + "--prompt 'Hi' --max-new 3 --ignore-eos --json --logprobs 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto seq = nlohmann::json::parse(r.out)["sequences"][0];
  ASSERT_EQ(seq["logprobs"].size(), 3u);
  for (const auto& lp : seq["logprobs"]) {
    ASSERT_EQ(lp["top"].size(), 4u);
    // Greedy: the chosen token is the most likely one.
    EXPECT_EQ(lp["top"][0]["id"], lp["id"]);
    EXPECT_EQ(lp["top"][0]["logprob"], lp["logprob"]);
    EXPECT_LE(lp["logprob"].get<double>(), 0.0);
  }
}

TEST_F(CliGenerateText, BadSamplingFlagsNameTheFlag) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--temperature -1", "--temperature"},
      {"--temperature nan", "--temperature"},
      {"--top-p 0", "--top-p"},
      {"--top-p 1.5", "--top-p"},
      {"--top-k -1", "--top-k"},
      {"--min-p 1", "--min-p"},
      {"--stop ''", "--stop"},
      {"--repeat-penalty 0", "--repeat-penalty"},
  };
  for (const auto& [flag, name] : cases) {
    const auto r = test::run_kvlm(args() + "--prompt hi " + flag);
    EXPECT_NE(r.exit_code, 0) << flag;
    EXPECT_THAT(r.err, HasSubstr(name)) << flag;
  }
}

TEST(CliGenerateNoTokenizer, TextPromptWithoutTokenizerIsAClearError) {
  test::TempDir dir;
  ASSERT_TRUE(write_random_gpt2(dir.path(), test::tiny_gpt2_config(), {}).is_ok());
  const auto r = test::run_kvlm("generate --model '" + dir.path() + "' --prompt hello");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--tokenizer"));
  // Ids in, ids out still works for a folder without tokenizer files.
  const auto ids =
      test::run_kvlm("generate --model '" + dir.path() + "' --ids 1,2 --max-new 2 --ignore-eos");
  EXPECT_EQ(ids.exit_code, 0) << ids.err;
}

}  // namespace
}  // namespace kvlm
