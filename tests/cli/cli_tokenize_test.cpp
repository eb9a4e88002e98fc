// kvlm tokenize / detokenize, run as a program: ids and JSON output, --special, round trips of
// arbitrary bytes through both commands, and clear errors with a non-zero exit.
#include <gtest/gtest.h>

#include "support/test_support.h"
#include "tokenizer/gpt2_test_data.h"

namespace kvlm {
namespace {

using test::run_kvlm;

std::string gpt2_flag() {
  return "--tokenizer '" + gpt2_test::gpt2_dir() + "'";
}

TEST(TokenizeCli, PrintsIdsOrJson) {
  KVLM_REQUIRE_GPT2_TOKENIZER();
  test::CommandResult r = run_kvlm("tokenize " + gpt2_flag(), "Hello world");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "15496 995\n");
  r = run_kvlm("tokenize --json " + gpt2_flag(), "Hello world");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"ids\":[15496,995]}\n");
  r = run_kvlm("tokenize --json " + gpt2_flag(), "");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"ids\":[]}\n");
}

TEST(TokenizeCli, SpecialFlagMakesEndOfTextOneToken) {
  KVLM_REQUIRE_GPT2_TOKENIZER();
  test::CommandResult r = run_kvlm("tokenize " + gpt2_flag(), "a<|endoftext|>");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "64 27 91 437 1659 5239 91 29\n");
  r = run_kvlm("tokenize --special " + gpt2_flag(), "a<|endoftext|>");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "64 50256\n");
}

TEST(TokenizeCli, ModelFolderAndTokenizerJsonFile) {
  KVLM_REQUIRE_GPT2_TOKENIZER();
  test::TempDir dir;
  test::write_text(dir.file("tokenizer.json"), gpt2_test::gpt2_tokenizer_json(false));
  test::CommandResult r = run_kvlm("tokenize --model '" + dir.path() + "'", "Hello world");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "15496 995\n");
  r = run_kvlm("tokenize --tokenizer '" + dir.file("tokenizer.json") + "'", "Hello world");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "15496 995\n");
}

TEST(DetokenizeCli, AcceptsCommasSpacesAndJson) {
  KVLM_REQUIRE_GPT2_TOKENIZER();
  for (const char* input :
       {"15496 995", "15496,995\n", " 15496 ,\n 995 ", "{\"ids\":[15496,995]}", "[15496, 995]"}) {
    test::CommandResult r = run_kvlm("detokenize " + gpt2_flag(), input);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "Hello world") << "input: " << input;
  }
  test::CommandResult r = run_kvlm("detokenize " + gpt2_flag(), "");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST(TokenizeCli, AnyBytesRoundTripThroughBothCommands) {
  KVLM_REQUIRE_GPT2_TOKENIZER();
  const std::string text = "Caf\xc3\xa9 \xff\xfe 😀\n\n  <|endoftext|> \xe2\x82 end\n";
  test::CommandResult ids = run_kvlm("tokenize " + gpt2_flag(), text);
  ASSERT_EQ(ids.exit_code, 0) << ids.err;
  test::CommandResult back = run_kvlm("detokenize " + gpt2_flag(), ids.out);
  ASSERT_EQ(back.exit_code, 0) << back.err;
  EXPECT_EQ(back.out, text);
}

TEST(DetokenizeCli, IdOutsideTheVocabularyFails) {
  KVLM_REQUIRE_GPT2_TOKENIZER();
  test::CommandResult r = run_kvlm("detokenize " + gpt2_flag(), "15496 50257");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("token id 50257 is outside the vocabulary (ids 0..50256"), std::string::npos)
      << r.err;
  r = run_kvlm("detokenize " + gpt2_flag(), "12 abc");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("'abc'"), std::string::npos) << r.err;
  r = run_kvlm("detokenize " + gpt2_flag(), "15496 -3");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("-3"), std::string::npos) << r.err;
}

TEST(TokenizeCli, FlagErrors) {
  test::CommandResult r = run_kvlm("tokenize", "x");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--model DIR or --tokenizer PATH"), std::string::npos) << r.err;
  r = run_kvlm("tokenize --model /nonexistent/kvlm-model", "x");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--model: /nonexistent/kvlm-model: no such file or folder"),
            std::string::npos)
      << r.err;
  test::TempDir empty;
  r = run_kvlm("detokenize --tokenizer '" + empty.path() + "'", "1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("no tokenizer files found"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kvlm
