// GPT-2 encoding against OpenAI's reference encoder: every case of the shared golden file must
// give exactly its ids and decode back to its text, from each file layout GPT-2's vocabulary
// comes in.
#include <gtest/gtest.h>

#include "tokenizer/gpt2_test_data.h"

namespace kvlm {
namespace {

using ::kvlm::gpt2_test::gpt2_dir;
using ::kvlm::test::TempDir;

// Builds a folder holding only one layout, so the factory has to use it.
std::string make_layout(const std::string& layout, const TempDir& dir) {
  namespace fs = std::filesystem;
  if (layout == "vocab_json") {
    fs::create_symlink(gpt2_dir() + "/vocab.json", dir.file("vocab.json"));
    fs::create_symlink(gpt2_dir() + "/merges.txt", dir.file("merges.txt"));
  } else if (layout == "encoder_json") {
    fs::create_symlink(gpt2_dir() + "/encoder.json", dir.file("encoder.json"));
    fs::create_symlink(gpt2_dir() + "/vocab.bpe", dir.file("vocab.bpe"));
  } else if (layout == "tokenizer_json_strings" || layout == "tokenizer_json_pairs") {
    test::write_text(dir.file("tokenizer.json"),
                     gpt2_test::gpt2_tokenizer_json(layout == "tokenizer_json_pairs"));
  } else if (layout == "tokenizer_json_file") {
    test::write_text(dir.file("tokenizer.json"), gpt2_test::gpt2_tokenizer_json(false));
    return dir.file("tokenizer.json");  // the file itself, not its folder
  }
  return dir.path();
}

class Gpt2GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(Gpt2GoldenTest, EveryCaseGivesOpenAIsIds) {
  KVLM_REQUIRE_GPT2_TOKENIZER();
  TempDir dir;
  Result<std::unique_ptr<Tokenizer>> tok = load_tokenizer(make_layout(GetParam(), dir));
  ASSERT_TRUE(tok.is_ok()) << tok.message();
  EXPECT_EQ(tok.value()->vocab_size(), 50257);
  EXPECT_EQ(tok.value()->eos_id(), 50256);
  EXPECT_EQ(tok.value()->bos_id(), 50256);
  const nlohmann::json golden = nlohmann::json::parse(test::read_text(gpt2_dir() + "/golden.json"));
  ASSERT_GE(golden.size(), 31u);
  for (const auto& c : golden) {
    const std::string text = c["text"];
    const std::vector<int32_t> want = c["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok.value()->encode(text, /*allow_special=*/false), want) << "text: " << text;
    Result<std::string> back = tok.value()->decode(want);
    ASSERT_TRUE(back.is_ok()) << back.message();
    EXPECT_EQ(back.value(), text);
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, Gpt2GoldenTest,
                         ::testing::Values("vocab_json", "encoder_json", "tokenizer_json_strings",
                                           "tokenizer_json_pairs", "tokenizer_json_file"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

TEST(Gpt2Golden, SharedFolderLoadsWithAllLayoutsPresent) {
  KVLM_REQUIRE_GPT2_TOKENIZER();
  Result<std::unique_ptr<Tokenizer>> tok = load_tokenizer(gpt2_dir());
  ASSERT_TRUE(tok.is_ok()) << tok.message();
  EXPECT_EQ(tok.value()->encode("Hello world", false), (std::vector<int32_t>{15496, 995}));
}

}  // namespace
}  // namespace kvlm
