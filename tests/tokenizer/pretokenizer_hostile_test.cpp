// Pre-tokenizer patterns a tokenizer.json may hold that GPT-2's and Llama 3's never are: one
// that can match the empty string (split used to loop forever) and one that makes PCRE2 give up
// (split used to take the error for "no match" and mis-split the text silently).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/expect_error.h"
#include "support/test_support.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"

namespace kvlm {
namespace {

// Pieces cover the text exactly, in order, and none is empty.
void expect_tiling(std::string_view text, const std::vector<Piece>& pieces) {
  size_t at = 0;
  for (const Piece& p : pieces) {
    EXPECT_EQ(p.begin, at);
    EXPECT_GT(p.end, p.begin);
    at = p.end;
  }
  EXPECT_EQ(at, text.size());
}

TEST(PretokenizerHostile, PatternMatchingEmptyStringTerminatesAndTiles) {
  for (const char* pattern : {"\\d*", "x?", "(?=a)", "", "a*|b"}) {
    auto pt = Pretokenizer::create(pattern, "test");
    ASSERT_TRUE(pt.is_ok()) << pt.message();
    const std::string text =
        "ab12c  d\xff\xfe"
        "e";
    std::vector<Piece> pieces;
    ASSERT_TRUE(pt->split(text, &pieces).is_ok()) << pattern;
    expect_tiling(text, pieces);
    // Resuming in batches of one piece gives the same pieces.
    std::vector<Piece> batched;
    for (size_t pos = 0; pos < text.size();) pos = pt->split(text, pos, 1, &batched).value();
    ASSERT_EQ(batched.size(), pieces.size()) << pattern;
  }
}

// A pattern that backtracks exponentially: PCRE2 stops at its match limit.
constexpr char kCatastrophic[] = "(a|aa)+$";
const std::string kCatastrophicText = std::string(64, 'a') + "!";

TEST(PretokenizerHostile, MatchLimitIsAnErrorNotNoMatch) {
  auto pt = Pretokenizer::create(kCatastrophic, "tok.json: pre_tokenizer");
  ASSERT_TRUE(pt.is_ok()) << pt.message();
  std::vector<Piece> pieces;
  test::expect_error(pt->split(kCatastrophicText, &pieces),
                     {"tok.json: pre_tokenizer", "PCRE2 could not run", "at byte 0", "limit"});
}

// A byte-level tokenizer.json (byte b is token b, no merges) splitting with `pattern`.
std::string byte_level_tokenizer_json(const std::string& pattern) {
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  for (int b = 0; b < 256; ++b)
    vocab[bytes_to_byte_level(std::string(1, static_cast<char>(b)))] = b;
  nlohmann::ordered_json doc;
  doc["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"},
         {"pattern", {{"Regex", pattern}}},
         {"behavior", "Isolated"},
         {"invert", false}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  doc["decoder"] = {{"type", "ByteLevel"}};
  doc["model"] = {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}};
  return doc.dump();
}

TEST(PretokenizerHostile, TryEncodeReportsMatchLimitAndEncodeStillRoundTrips) {
  test::TempDir dir;
  test::write_text(dir.file("tokenizer.json"), byte_level_tokenizer_json(kCatastrophic));
  auto tok = load_tokenizer(dir.file("tokenizer.json"));
  ASSERT_TRUE(tok.is_ok()) << tok.message();
  test::expect_error((*tok)->try_encode(kCatastrophicText, false),
                     {"tokenizer.json", "PCRE2 could not run", "limit"});
  const std::vector<int32_t> ids = (*tok)->encode(kCatastrophicText, false);
  EXPECT_EQ((*tok)->decode(ids).value(), kCatastrophicText);
}

TEST(PretokenizerHostile, CliTokenizeWithEmptyMatchingSplitTerminates) {
  test::TempDir dir;
  test::write_text(dir.file("tokenizer.json"), byte_level_tokenizer_json("\\d*"));
  const auto r = test::run_kvlm("tokenize --tokenizer '" + dir.file("tokenizer.json") + "'", "ab1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "97 98 49\n");
}

TEST(PretokenizerHostile, CliTokenizeMatchLimitExitsOneNamingTheFile) {
  test::TempDir dir;
  test::write_text(dir.file("tokenizer.json"), byte_level_tokenizer_json(kCatastrophic));
  const auto r = test::run_kvlm("tokenize --tokenizer '" + dir.file("tokenizer.json") + "'",
                                kCatastrophicText);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("tokenizer.json"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("PCRE2 could not run"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kvlm
