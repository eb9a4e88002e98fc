// Streaming decode: only whole UTF-8 characters come out, a partial one is held until the next
// token completes it, invalid bytes are not held forever, and everything adds up to decode().
#include "tokenizer/incremental_decoder.h"

#include <gtest/gtest.h>

#include <random>

#include "tokenizer/gpt2_test_data.h"

namespace kvlm {
namespace {

TEST(CompleteUtf8Prefix, HoldsOnlyAnUnfinishedValidCharacter) {
  EXPECT_EQ(complete_utf8_prefix(""), 0u);
  EXPECT_EQ(complete_utf8_prefix("abc"), 3u);
  EXPECT_EQ(complete_utf8_prefix("ab\xc3"), 2u);             // é cut after its lead byte
  EXPECT_EQ(complete_utf8_prefix("ab\xc3\xa9"), 4u);         // é complete
  EXPECT_EQ(complete_utf8_prefix("\xf0\x9f\x98"), 0u);       // 😀 missing its last byte
  EXPECT_EQ(complete_utf8_prefix("x\xf0\x9f\x98\x80"), 5u);  // 😀 complete
  EXPECT_EQ(complete_utf8_prefix("\xe2\x82"), 0u);           // € cut short
  EXPECT_EQ(complete_utf8_prefix("\x80"), 1u);               // stray continuation byte
  EXPECT_EQ(complete_utf8_prefix("a\xff"), 2u);              // never valid: pass through
  EXPECT_EQ(complete_utf8_prefix("\xc3(x"), 3u);             // lead byte not continued
  EXPECT_EQ(complete_utf8_prefix("\xe0\x80"), 2u);           // would be overlong
  EXPECT_EQ(complete_utf8_prefix("\xed\xa0"), 2u);           // would be a surrogate
  EXPECT_EQ(complete_utf8_prefix("\xf4\x90"), 2u);           // would pass U+10FFFF
  EXPECT_EQ(complete_utf8_prefix("\xc0"), 1u);               // C0 never starts a character
}

TEST(IncrementalDecoder, EmojiSplitAcrossTokens) {
  KVLM_REQUIRE_GPT2_TOKENIZER();
  // "I ❤" is [40, 43074, 97] in GPT-2: token 43074 holds the first two bytes of the heart.
  IncrementalDecoder dec(gpt2_test::gpt2());
  EXPECT_EQ(dec.push(40).value(), "I");
  EXPECT_EQ(dec.push(43074).value(), " ");
  EXPECT_EQ(dec.pending_size(), 2u);
  EXPECT_EQ(dec.push(97).value(), "\xe2\x9d\xa4");
  EXPECT_EQ(dec.pending_size(), 0u);
  EXPECT_EQ(dec.flush(), "");
}

TEST(IncrementalDecoder, FlushReturnsAnUnfinishedCharacter) {
  KVLM_REQUIRE_GPT2_TOKENIZER();
  IncrementalDecoder dec(gpt2_test::gpt2());
  EXPECT_EQ(dec.push(43074).value(), " ");
  EXPECT_EQ(dec.flush(), "\xe2\x9d");
  EXPECT_EQ(dec.pending_size(), 0u);
  EXPECT_EQ(dec.push(40).value(), "I");  // usable again after a flush
}

TEST(IncrementalDecoder, BadIdIsAnErrorAndKeepsState) {
  KVLM_REQUIRE_GPT2_TOKENIZER();
  IncrementalDecoder dec(gpt2_test::gpt2());
  ASSERT_TRUE(dec.push(43074).is_ok());
  Result<std::string> bad = dec.push(60000);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("60000"), std::string::npos);
  EXPECT_EQ(dec.push(97).value(), "\xe2\x9d\xa4");
}

// Over random id streams: every chunk is whole UTF-8 unless the bytes were invalid anyway, and
// the chunks plus the final flush are exactly decode(ids).
TEST(IncrementalDecoder, RandomStreamsAddUpToDecode) {
  KVLM_REQUIRE_GPT2_TOKENIZER();
  const Tokenizer& tok = gpt2_test::gpt2();
  std::mt19937 rng(99);
  for (int iter = 0; iter < 300; ++iter) {
    std::vector<int32_t> ids;
    const std::string text = iter % 2 ? "Emoji 😀🍕❤️, 中文, naïve café" : "";
    if (iter % 2) {
      ids = tok.encode(text, false);
    } else {
      for (int i = 0; i < 50; ++i) ids.push_back(static_cast<int32_t>(rng() % 50257));
    }
    IncrementalDecoder dec(tok);
    std::string streamed;
    for (int32_t id : ids) {
      Result<std::string> chunk = dec.push(id);
      ASSERT_TRUE(chunk.is_ok()) << chunk.message();
      EXPECT_EQ(complete_utf8_prefix(chunk.value()), chunk.value().size());
      EXPECT_LE(dec.pending_size(), 3u);
      streamed += chunk.value();
    }
    streamed += dec.flush();
    EXPECT_EQ(streamed, tok.decode(ids).value());
    if (iter % 2) {
      EXPECT_EQ(streamed, text);
    }
  }
}

}  // namespace
}  // namespace kvlm
