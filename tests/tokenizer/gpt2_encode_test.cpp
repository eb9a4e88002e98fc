// GPT-2 encoding beyond the shared golden file: contractions, whitespace runs, numbers, emoji,
// scripts, the whitespace characters where regex libraries disagree, special tokens, invalid
// UTF-8 and random bytes (which must round-trip), and the merge cache.
//
// The expected ids of the cases below come from OpenAI's encoder.py (picoGPT's copy) run with
// Python's `regex` module on ../shared/data/gpt2-tokenizer/{encoder.json,vocab.bpe}:
//   enc = Encoder(json.load(open("encoder.json")), [tuple(m.split()) for m in
//                 open("vocab.bpe").read().split("\n")[1:-1]]); print(enc.encode(text))
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/gpt2_test_data.h"

namespace kvlm {
namespace {

using gpt2_test::gpt2;

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

std::vector<Case> reference_cases() {
  std::vector<Case> cases = {
      {"", {}},
      {"I'm sure you're right; they've said we'll go, she'd agree, it's fine.",
       {40,   1101, 1654, 345, 821,  826,  26, 484, 1053, 531,  356,
        1183, 467,  11,   673, 1549, 4236, 11, 340, 338,  3734, 13}},
      {"'s's'S 'll'LL x'd", {338, 338, 6, 50, 705, 297, 6, 3069, 2124, 1549}},
      {"    four spaces then a word", {220, 220, 220, 1440, 9029, 788, 257, 1573}},
      {"trailing spaces   ", {9535, 4386, 9029, 220, 220, 220}},
      {"a\n\n\n\nb", {64, 628, 198, 198, 65}},
      {"\t\t\tindented with tabs", {197, 197, 197, 521, 4714, 351, 22524}},
      {"x \n y", {87, 220, 198, 331}},
      {"3.14159 2,000,000 1e10 0.5% 12345678901234567890",
       {18, 13, 1415, 19707, 362,  11,   830,  11,  830,  352,  68,    940, 657,
        13, 20, 4,    17031, 2231, 3134, 4531, 486, 1954, 2231, 30924, 3829}},
      {"I ❤\ufe0f 🍕 and 🏳\ufe0f\u200d🌈!",
       {40, 43074, 97, 37929, 12520, 235, 243, 290, 12520, 237, 111, 37929, 447, 235, 8582, 234,
        230, 0}},
      {"日本語のテキストです。한국어 텍스트",
       {33768, 98,    17312, 105, 45739, 252, 5641, 24336, 25084, 43302, 30640,
        33623, 16764, 47991, 250, 166,   113, 255,  168,   244,   112,   220,
        169,   227,   235,   168, 232,   97,  169,  232,   116}},
      {"Ελληνικά русский עברית العربية ह\u093fन\u094dद\u0940",
       {138,   243,   39377, 39377, 138,   115,   26180, 29945, 43000, 138,   105,
        220,   21169, 35072, 21727, 21727, 31583, 18849, 140,   117,   14360, 95,
        49603, 37778, 33951, 103,   28981, 44690, 26897, 39848, 22654, 45632, 28225,
        117,   11976, 123,   11976, 101,   24231, 235,   11976, 99,    24231, 222}},
      // U+180E is not whitespace for Python's regex (nor in Unicode since 6.3) but is in
      // PCRE2's \s: it must stay with the letters around it, as a symbol.
      {"a\u180eb \u180e c", {64, 157, 254, 236, 65, 28053, 254, 236, 269}},
      {"a\u00a0b\u2028c  \u2003d", {64, 1849, 65, 447, 101, 66, 220, 220, 447, 225, 67}},
      // 0x1C..0x1F: whitespace to Python's str.isspace, but not to regex's \s.
      {"\x1c\x1d\x1e\x1f separators", {216, 217, 218, 219, 2880, 2024}},
      {"https://example.com/path?q=1&r=two#frag",
       {5450, 1378, 20688, 13, 785, 14, 6978, 30, 80, 28, 16, 5, 81, 28, 11545, 2, 8310, 363}},
      {"The quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX!",
       {464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13, 3336, 19604, 11860, 11177, 14165,
        19912, 0}},
  };
  // GPT-2 has no merges of spaces: a run is one token per space, the last joining the word.
  cases.push_back({std::string(100, ' '), std::vector<int32_t>(100, 220)});
  std::vector<int32_t> spaced = {4775};
  spaced.insert(spaced.end(), 49, 220);
  spaced.push_back(1573);
  cases.push_back({"word" + std::string(50, ' ') + "word", spaced});
  return cases;
}

TEST(Gpt2Encode, MatchesOpenAIsEncoderOnMoreCases) {
  KVLM_REQUIRE_GPT2_TOKENIZER();
  for (const Case& c : reference_cases()) {
    EXPECT_EQ(gpt2().encode(c.text, false), c.ids) << "text: " << c.text;
    Result<std::string> back = gpt2().decode(c.ids);
    ASSERT_TRUE(back.is_ok()) << back.message();
    EXPECT_EQ(back.value(), c.text);
  }
}

TEST(Gpt2Encode, SpecialTokensOnlyWhenAllowed) {
  KVLM_REQUIRE_GPT2_TOKENIZER();
  const std::string text = "Hello<|endoftext|>World";
  EXPECT_EQ(gpt2().encode(text, false),
            (std::vector<int32_t>{15496, 27, 91, 437, 1659, 5239, 91, 29, 10603}));
  EXPECT_EQ(gpt2().encode(text, true), (std::vector<int32_t>{15496, 50256, 10603}));
  EXPECT_EQ(gpt2().encode("<|endoftext|><|endoftext|>", true),
            (std::vector<int32_t>{50256, 50256}));
  // The text on each side is encoded on its own, as tiktoken does: "a " then " b".
  EXPECT_EQ(gpt2().encode("a <|endoftext|> b", true), (std::vector<int32_t>{64, 220, 50256, 275}));
  // An unfinished special token is ordinary text even when allowed.
  EXPECT_EQ(gpt2().encode("<|endoftext|", true), gpt2().encode("<|endoftext|", false));
  Result<std::string> back = gpt2().decode(gpt2().encode(text, true));
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(back.value(), text);
}

TEST(Gpt2Encode, InvalidUtf8EncodesAndRoundTrips) {
  KVLM_REQUIRE_GPT2_TOKENIZER();
  const std::vector<std::string> texts = {
      "\xff",
      "\xff\xfe\xfd",
      "abc\x80xyz",
      "caf\xc3",                  // truncated 2-byte character at the end
      "\xe2\x82 euro cut short",  // truncated 3-byte character
      "\xf0\x9f\x98",             // truncated emoji
      "\xc0\xaf overlong slash",  // overlong encoding
      "\xed\xa0\x80 surrogate",   // UTF-16 surrogate written as UTF-8
      "\xf4\x90\x80\x80 past U+10FFFF",
      std::string("nul\0inside", 10),
      "  \xff  \xfe\n\n\x80",
  };
  for (const std::string& t : texts) {
    const std::vector<int32_t> ids = gpt2().encode(t, false);
    EXPECT_FALSE(ids.empty());
    Result<std::string> back = gpt2().decode(ids);
    ASSERT_TRUE(back.is_ok()) << back.message();
    EXPECT_EQ(back.value(), t);
  }
  // A lone invalid byte is its own piece: its single-byte token ("ÿ", id 187).
  EXPECT_EQ(gpt2().encode("\xff", false), (std::vector<int32_t>{187}));
  // Valid text around invalid bytes is split exactly as without them.
  const std::vector<int32_t> hello = gpt2().encode("Hello", false);
  std::vector<int32_t> got = gpt2().encode("Hello\xff", false);
  ASSERT_GE(got.size(), hello.size());
  EXPECT_EQ(std::vector<int32_t>(got.begin(), got.begin() + hello.size()), hello);
}

// Random byte strings, random code points and random mixes of words and symbols all encode to
// valid ids and decode to the exact input.
TEST(Gpt2Encode, RandomInputsRoundTrip) {
  KVLM_REQUIRE_GPT2_TOKENIZER();
  std::mt19937 rng(1234);
  const std::vector<std::string> atoms = {
      "the", " cat", "'s", "'ll", " ",      "  ",     "\n",     "\t",   "1",    "23",      ".",
      "!?",  "é",    "中", "😀",   "\u0085", "\ufeff", "\u3000", "\xff", "\x80", "\xe2\x82"};
  for (int iter = 0; iter < 3000; ++iter) {
    std::string text;
    const int len = static_cast<int>(rng() % 40);
    const int mode = iter % 3;
    for (int i = 0; i < len; ++i) {
      if (mode == 0) {
        text.push_back(static_cast<char>(rng() & 0xFF));
      } else if (mode == 1) {
        uint32_t cp = rng() % 0x110000;
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 'x';
        append_utf8(cp, &text);
      } else {
        text += atoms[rng() % atoms.size()];
      }
    }
    const std::vector<int32_t> ids = gpt2().encode(text, false);
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < 50257) << id;
    Result<std::string> back = gpt2().decode(ids);
    ASSERT_TRUE(back.is_ok()) << back.message();
    ASSERT_EQ(back.value(), text) << "iteration " << iter;
    // Encoding is a function of the text: a second pass (now from the cache) agrees.
    ASSERT_EQ(gpt2().encode(text, false), ids);
  }
}

TEST(Gpt2Encode, CacheDoesNotChangeIds) {
  KVLM_REQUIRE_GPT2_TOKENIZER();
  Result<std::unique_ptr<Tokenizer>> loaded = load_tokenizer(gpt2_test::gpt2_dir());
  ASSERT_TRUE(loaded.is_ok()) << loaded.message();
  auto* bpe = dynamic_cast<ByteLevelBpe*>(loaded.value().get());
  ASSERT_NE(bpe, nullptr);
  std::string text;
  for (int i = 0; i < 200; ++i) text += "Repeated words repeat, repeatedly; " + std::to_string(i);
  const std::vector<int32_t> cached = bpe->encode(text, false);
  bpe->set_cache_enabled(false);
  EXPECT_EQ(bpe->encode(text, false), cached);
}

// The merge cache belongs to one encode at a time; others run without it. Either way the ids
// must be the same.
TEST(Gpt2Encode, ConcurrentEncodesAgree) {
  KVLM_REQUIRE_GPT2_TOKENIZER();
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "Word" + std::to_string(i % 97) + " and more words. ";
  const std::vector<int32_t> want = gpt2().encode(text, false);
  std::vector<std::vector<int32_t>> got(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 5; ++rep) got[t] = gpt2().encode(text, false);
    });
  }
  for (std::thread& th : threads) th.join();
  for (const auto& ids : got) EXPECT_EQ(ids, want);
}

// A piece long enough for the heap merge (a 20 KB run of one symbol) gives OpenAI's ids.
TEST(Gpt2Encode, LongPiecesUseTheHeapMergeCorrectly) {
  KVLM_REQUIRE_GPT2_TOKENIZER();
  const std::string dashes(20000, '-');
  const std::vector<int32_t> ids = gpt2().encode(dashes, false);
  Result<std::string> back = gpt2().decode(ids);
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(back.value(), dashes);
  // OpenAI's encoder: 312 tokens of 64 dashes (id 10097) and one of 32 (id 3880).
  std::vector<int32_t> want(312, 10097);
  want.push_back(3880);
  EXPECT_EQ(ids, want);
}

TEST(Gpt2Decode, IdOutsideVocabularyIsAnError) {
  KVLM_REQUIRE_GPT2_TOKENIZER();
  const std::vector<int32_t> bad = {15496, 50257};
  Result<std::string> text = gpt2().decode(bad);
  ASSERT_FALSE(text.is_ok());
  EXPECT_NE(text.message().find("50257"), std::string::npos) << text.message();
  EXPECT_NE(text.message().find("0..50256"), std::string::npos) << text.message();
  EXPECT_FALSE(gpt2().decode(std::vector<int32_t>{-1}).is_ok());
  EXPECT_FALSE(gpt2().token_bytes(50257).is_ok());
  ASSERT_TRUE(gpt2().token_bytes(50256).is_ok());
  EXPECT_EQ(gpt2().token_bytes(50256).value(), "<|endoftext|>");
  EXPECT_EQ(gpt2().token_bytes(220).value(), " ");
}

}  // namespace
}  // namespace kvlm
