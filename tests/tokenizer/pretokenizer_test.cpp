// GPT-2's pre-tokenizer: exact pieces for the cases that decide exactness (contractions,
// whitespace runs, the characters where Python's \s and PCRE2's differ, invalid UTF-8), and
// the ASCII scanner checked against PCRE2 on random text.
#include "tokenizer/pretokenizer.h"

#include <gtest/gtest.h>

#include <random>

#include "tokenizer/byte_unicode.h"

namespace kvlm {
namespace {

std::vector<std::string> pieces_of(std::string_view text, bool regex_only = false) {
  Result<Gpt2Pretokenizer> pt = Gpt2Pretokenizer::create();
  EXPECT_TRUE(pt.is_ok()) << pt.message();
  std::vector<Piece> pieces;
  if (regex_only) {
    pt->split_regex_only(text, &pieces);
  } else {
    pt->split(text, &pieces);
  }
  std::vector<std::string> out;
  for (const Piece& p : pieces) out.emplace_back(text.substr(p.begin, p.end - p.begin));
  return out;
}

using Pieces = std::vector<std::string>;

TEST(Pretokenizer, WordsNumbersSymbolsAndContractions) {
  EXPECT_EQ(pieces_of("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(pieces_of("don't we'll they've I'm she'd"),
            (Pieces{"don", "'t", " we", "'ll", " they", "'ve", " I", "'m", " she", "'d"}));
  // Contractions are case-sensitive and match before letters: "'S" is a symbol then a letter.
  EXPECT_EQ(pieces_of("'S's"), (Pieces{"'", "S", "'s"}));
  EXPECT_EQ(pieces_of("x 'sup"), (Pieces{"x", " '", "sup"}));
  EXPECT_EQ(pieces_of("abc123 456def"), (Pieces{"abc", "123", " 456", "def"}));
  EXPECT_EQ(pieces_of("a...!? b"), (Pieces{"a", "...!?", " b"}));
  EXPECT_EQ(pieces_of(""), Pieces{});
}

TEST(Pretokenizer, WhitespaceRunsLeaveOneSpaceForTheNextWord) {
  EXPECT_EQ(pieces_of("a   b"), (Pieces{"a", "  ", " b"}));
  EXPECT_EQ(pieces_of("a \n b"), (Pieces{"a", " \n", " b"}));
  EXPECT_EQ(pieces_of("a\nb"), (Pieces{"a", "\n", "b"}));
  EXPECT_EQ(pieces_of("a\n\nb"), (Pieces{"a", "\n", "\n", "b"}));
  EXPECT_EQ(pieces_of("end   "), (Pieces{"end", "   "}));
  EXPECT_EQ(pieces_of("   "), (Pieces{"   "}));
  EXPECT_EQ(pieces_of(" "), (Pieces{" "}));
}

TEST(Pretokenizer, WhitespaceIsPythonRegexWhitespace) {
  // U+0085 (NEL) is whitespace; U+FEFF (BOM) and U+180E are not (PCRE2's own \s has U+180E).
  // " \u0085" before "x" is a whitespace run: all but its last character, then \s+ alone.
  EXPECT_EQ(pieces_of("! \u0085x"), (Pieces{"!", " ", "\u0085", "x"}));
  EXPECT_EQ(pieces_of("x \ufeffy"), (Pieces{"x", " \ufeff", "y"}));
  EXPECT_EQ(pieces_of("a\u180eb"), (Pieces{"a", "\u180e", "b"}));
  // Only a plain space joins the next word (" ?\p{L}+"), not U+3000.
  EXPECT_EQ(pieces_of("a\u3000\u3000b"), (Pieces{"a", "\u3000", "\u3000", "b"}));
  // File/group/record/unit separators are not whitespace to `regex` (they are to str.isspace).
  EXPECT_EQ(pieces_of("a\x1c\x1f b"), (Pieces{"a", "\x1c\x1f", " b"}));
}

TEST(Pretokenizer, UnicodeCategories) {
  EXPECT_EQ(pieces_of("café naïve"), (Pieces{"café", " naïve"}));
  EXPECT_EQ(pieces_of("中文，世界"), (Pieces{"中文", "，", "世界"}));
  EXPECT_EQ(pieces_of("½ Ⅷ ٣٤"), (Pieces{"½", " Ⅷ", " ٣٤"}));
  EXPECT_EQ(pieces_of("hi 😀😀!"), (Pieces{"hi", " 😀😀!"}));
  // A combining mark is neither a letter nor a number.
  EXPECT_EQ(pieces_of("e\u0301t"), (Pieces{"e", "\u0301", "t"}));
}

TEST(Pretokenizer, InvalidUtf8BytesArePiecesOfTheirOwn) {
  EXPECT_EQ(pieces_of("ab\xff\xfe"
                      "cd"),
            (Pieces{"ab", "\xff\xfe", "cd"}));
  EXPECT_EQ(pieces_of("\x80"), (Pieces{"\x80"}));
  EXPECT_EQ(pieces_of("x \xc3"), (Pieces{"x", " ", "\xc3"}));
  EXPECT_EQ(pieces_of("caf\xc3"
                      "!"),
            (Pieces{"caf", "\xc3", "!"}));
  EXPECT_EQ(pieces_of("\xed\xa0\x80"), (Pieces{"\xed\xa0\x80"}));  // a surrogate
  EXPECT_EQ(pieces_of("é\xe9"), (Pieces{"é", "\xe9"}));            // Latin-1 é after UTF-8 é
}

// Text from a mix of ASCII, other scripts, odd whitespace and invalid bytes.
std::string random_text(std::mt19937& rng) {
  static const std::vector<std::string> atoms = {
      "a",      "Z",      "q",    "0",    "9",      " ",        " ",           "  ",     "\n",
      "\t",     "\r",     "\x0b", "'",    "s",      "t",        "re",          "ve",     "m",
      "ll",     "d",      ".",    "!",    "-",      "_",        "\"",          "\x1c",   "\x7f",
      "é",      "中",     "😀",    "½",    "\u0085", "\u00a0",   "\u180e",      "\u2028", "\u3000",
      "\ufeff", "\u0301", "\xff", "\x80", "\xc3",   "\xe2\x82", "\xf0\x9f\x98"};
  std::string text;
  const int n = static_cast<int>(rng() % 24);
  for (int i = 0; i < n; ++i) text += atoms[rng() % atoms.size()];
  return text;
}

TEST(Pretokenizer, AsciiScannerAgreesWithPcre2) {
  Result<Gpt2Pretokenizer> pt = Gpt2Pretokenizer::create();
  ASSERT_TRUE(pt.is_ok()) << pt.message();
  std::mt19937 rng(42);
  for (int iter = 0; iter < 20000; ++iter) {
    const std::string text = random_text(rng);
    std::vector<Piece> fast, slow;
    pt->split(text, &fast);
    pt->split_regex_only(text, &slow);
    ASSERT_EQ(fast.size(), slow.size()) << "text: " << text;
    size_t covered = 0;
    for (size_t i = 0; i < fast.size(); ++i) {
      ASSERT_EQ(fast[i].begin, slow[i].begin) << "text: " << text;
      ASSERT_EQ(fast[i].end, slow[i].end) << "text: " << text;
      ASSERT_EQ(fast[i].begin, covered);  // pieces tile the text, none empty
      ASSERT_GT(fast[i].end, fast[i].begin);
      covered = fast[i].end;
    }
    ASSERT_EQ(covered, text.size());
  }
}

TEST(Pretokenizer, SplittingInBatchesGivesTheSamePieces) {
  Result<Gpt2Pretokenizer> pt = Gpt2Pretokenizer::create();
  ASSERT_TRUE(pt.is_ok()) << pt.message();
  std::mt19937 rng(3);
  for (int iter = 0; iter < 2000; ++iter) {
    const std::string text = random_text(rng) + random_text(rng) + random_text(rng);
    std::vector<Piece> whole, batched;
    pt->split(text, &whole);
    for (size_t pos = 0; pos < text.size();) {
      const size_t before = batched.size();
      const size_t max_pieces = 1 + rng() % 4;
      pos = pt->split(text, pos, max_pieces, &batched).value();
      ASSERT_GT(batched.size(), before);
      ASSERT_LE(batched.size() - before, max_pieces + 1);
    }
    ASSERT_EQ(batched.size(), whole.size()) << "text: " << text;
    for (size_t i = 0; i < whole.size(); ++i) {
      ASSERT_EQ(batched[i].begin, whole[i].begin);
      ASSERT_EQ(batched[i].end, whole[i].end);
    }
  }
}

}  // namespace
}  // namespace kvlm
