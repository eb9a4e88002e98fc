// SentencePiece-style BPE from a Llama-2-style tokenizer.json (sentencepiece_test_data.h):
// exact ids for cases worked out by hand from the merge ranks, both ways a file can write spaces
// (the older Prepend + Replace normalizer, the newer Metaspace pre-tokenizer), byte fallback,
// special tokens, decoding with Hugging Face's leading-space rule, and streaming.
#include "tokenizer/sentencepiece_bpe.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "support/test_support.h"
#include "tokenizer/incremental_decoder.h"
#include "tokenizer/sentencepiece_test_data.h"

namespace kvlm {
namespace {

using namespace sp_test;
using Ids = std::vector<int32_t>;

std::unique_ptr<Tokenizer> load(Style style = Style::kNormalizer, bool pair_merges = false,
                                bool metaspace_decoder = false) {
  test::TempDir dir;
  test::write_text(dir.file("tokenizer.json"),
                   tokenizer_json(style, pair_merges, metaspace_decoder));
  Result<std::unique_ptr<Tokenizer>> tok = load_tokenizer(dir.path());
  EXPECT_TRUE(tok.is_ok()) << tok.message();
  return tok.is_ok() ? std::move(tok).value() : nullptr;
}

std::string decode(const Tokenizer& tok, const Ids& ids) {
  Result<std::string> text = tok.decode(ids);
  EXPECT_TRUE(text.is_ok()) << text.message();
  return text.is_ok() ? text.value() : "<error>";
}

TEST(SentencePieceBpe, LoadsAsTheSentencePieceKind) {
  for (bool pair_merges : {false, true}) {
    std::unique_ptr<Tokenizer> tok = load(Style::kNormalizer, pair_merges);
    ASSERT_NE(tok, nullptr);
    EXPECT_NE(dynamic_cast<const SentencePieceBpe*>(tok.get()), nullptr);
    EXPECT_EQ(tok->vocab_size(), kVocab);
    EXPECT_EQ(tok->bos_id(), kBos);
    EXPECT_EQ(tok->eos_id(), kEos);
    EXPECT_TRUE(tok->add_bos());  // the TemplateProcessing "<s> $A"
    EXPECT_EQ(tok->encode("hello", false), (Ids{kSpaceHello}));
  }
}

TEST(SentencePieceBpe, MergesByRankFromThePrependedSpace) {
  std::unique_ptr<Tokenizer> tok = load();
  ASSERT_NE(tok, nullptr);
  // "hello" -> "▁hello" -> ▁ h e l l o. Ranks: l+l 0, ▁+h 1, e+ll 2, ▁h+ell 3, ▁hell+o 4,
  // so it ends as one token. Merging "h e" (rank 11) first would have stranded the ▁.
  EXPECT_EQ(tok->encode("hello", false), (Ids{kSpaceHello}));
  // "hhello" -> ▁ h h e l l o: l+l, then ▁+h takes the first h, then e+ll (rank 2) takes the
  // e before h+e (rank 11) can: ▁h h ell o, and no pair of those has a merge.
  EXPECT_EQ(tok->encode("hhello", false), (Ids{kSpaceH, kH, kELL, kO}));
  // "hello world" -> "▁hello▁world", one piece (Llama 2's files have no pre-tokenizer):
  // ▁hello as above; o+r 5, ▁+w 6, ▁w+or 7, l+d 9, ▁wor+ld 10. No merge crosses the words.
  EXPECT_EQ(tok->encode("hello world", false), (Ids{kSpaceHello, kSpaceWorld}));
  // Without the prepended ▁, "he" does merge (rank 11 is the only pair left): "hello" after a
  // newline: ▁hello, <0x0A>, then w o r l d -> w or ld (no "w or" merge without ▁).
  EXPECT_EQ(tok->encode("hello\nworld", false), (Ids{kSpaceHello, byte_id('\n'), kW, kOR, kLD}));
  EXPECT_EQ(tok->encode("\nhe", false), (Ids{kSpace, byte_id('\n'), kHE}));
}

TEST(SentencePieceBpe, SpacesBecomeMetaspaces) {
  std::unique_ptr<Tokenizer> tok = load();
  ASSERT_NE(tok, nullptr);
  // Two spaces: "▁hello▁▁world". The second ▁ pairs with w (rank 6) before ▁+▁ (rank 8) can
  // take it, so the first ▁ stays alone, as Llama 2 encodes "hello  world".
  EXPECT_EQ(tok->encode("hello  world", false), (Ids{kSpaceHello, kSpace, kSpaceWorld}));
  // A leading space: Prepend adds a ▁ to "▁hello" -> ▁ ▁hello.
  EXPECT_EQ(tok->encode(" hello", false), (Ids{kSpace, kSpaceHello}));
  // Only spaces: "  " -> "▁▁▁": ▁+▁ leftmost first -> ▁▁ ▁.
  EXPECT_EQ(tok->encode("  ", false), (Ids{kSpaceSpace, kSpace}));
  EXPECT_EQ(tok->encode("", false), Ids{});
  EXPECT_EQ(tok->encode("", true), Ids{});
}

TEST(SentencePieceBpe, CharactersOutsideTheVocabularyFallBackToBytes) {
  std::unique_ptr<Tokenizer> tok = load();
  ASSERT_NE(tok, nullptr);
  // "é" is C3 A9 in UTF-8; byte b is id b + 3.
  EXPECT_EQ(tok->encode("é", false), (Ids{kSpace, byte_id(0xC3), byte_id(0xA9)}));
  // 😀 is F0 9F 98 80: four byte tokens.
  EXPECT_EQ(tok->encode("😀", false),
            (Ids{kSpace, byte_id(0xF0), byte_id(0x9F), byte_id(0x98), byte_id(0x80)}));
  // ASCII missing from the vocabulary too ('a' = 0x61), around pieces that merge.
  EXPECT_EQ(tok->encode("a hello", false), (Ids{kSpace, byte_id('a'), kSpaceHello}));
  // Bytes that are not UTF-8 are encoded one by one and come back as they were.
  EXPECT_EQ(tok->encode("\xff\xc3", false), (Ids{kSpace, byte_id(0xFF), byte_id(0xC3)}));
  EXPECT_EQ(decode(*tok, tok->encode("\xff\xc3", false)), "\xff\xc3");
}

TEST(SentencePieceBpe, SpecialTokensOnlyWithAllowSpecial) {
  std::unique_ptr<Tokenizer> tok = load();
  ASSERT_NE(tok, nullptr);
  // Ordinary text: "▁<s>hello" -> ▁ < s > h e l l o; l+l, e+ll (h+e is too late), nothing
  // else merges: ▁ < s > h ell o.
  EXPECT_EQ(tok->encode("<s>hello", false),
            (Ids{kSpace, byte_id('<'), byte_id('s'), byte_id('>'), kH, kELL, kO}));
  // With allow_special "<s>" is BOS, and "hello" after it is normalized on its own: the
  // Prepend gives it its ▁ again (as Llama 2's older files do).
  EXPECT_EQ(tok->encode("<s>hello", true), (Ids{kBos, kSpaceHello}));
  EXPECT_EQ(tok->encode("hello</s>", true), (Ids{kSpaceHello, kEos}));
  EXPECT_EQ(tok->encode("<s></s>", true), (Ids{kBos, kEos}));
}

TEST(SentencePieceBpe, MetaspacePrependsOnlyWithoutALeadingSpace) {
  std::unique_ptr<Tokenizer> tok = load(Style::kMetaspaceFirst);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->encode("hello world", false), (Ids{kSpaceHello, kSpaceWorld}));
  EXPECT_EQ(tok->encode("hello  world", false), (Ids{kSpaceHello, kSpace, kSpaceWorld}));
  // " hello" -> "▁hello" already starts with ▁: nothing prepended (the normalizer gave ▁ ▁hello).
  EXPECT_EQ(tok->encode(" hello", false), (Ids{kSpaceHello}));
  // "  " -> "▁▁": one merge.
  EXPECT_EQ(tok->encode("  ", false), (Ids{kSpaceSpace}));
  // prepend_scheme "first": after a special token the text is not at the start, so no ▁:
  // h e l l o -> h ell o.
  EXPECT_EQ(tok->encode("<s>hello", true), (Ids{kBos, kH, kELL, kO}));
  EXPECT_EQ(tok->encode("", false), Ids{});

  // "always" with split: every stretch gets its ▁, and each ▁ starts a piece, so "  " is two
  // pieces "▁" "▁" and cannot merge into ▁▁.
  tok = load(Style::kMetaspaceAlwaysSplit);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->encode("  ", false), (Ids{kSpace, kSpace}));
  EXPECT_EQ(tok->encode("<s>hello", true), (Ids{kBos, kSpaceHello}));
  EXPECT_EQ(tok->encode("hello  world", false), (Ids{kSpaceHello, kSpace, kSpaceWorld}));
}

TEST(SentencePieceBpe, DecodeDropsTheSpaceTheEncoderAdded) {
  std::unique_ptr<Tokenizer> tok = load();
  ASSERT_NE(tok, nullptr);
  // Strip(left 1) after Fuse, as Hugging Face: " hello world" -> "hello world".
  EXPECT_EQ(decode(*tok, {kSpaceHello, kSpaceWorld}), "hello world");
  // BOS is text too ("<s>"), so the space after it stays: Hugging Face gives "<s> hello".
  EXPECT_EQ(decode(*tok, {kBos, kSpaceHello}), "<s> hello");
  EXPECT_EQ(decode(*tok, {kSpace, byte_id(0xC3), byte_id(0xA9)}), "é");
  EXPECT_EQ(decode(*tok, {}), "");
  // token_bytes keeps the space: it is the text of a token inside a text.
  EXPECT_EQ(tok->token_bytes(kSpaceHello).value(), " hello");
  EXPECT_EQ(tok->token_bytes(byte_id('\n')).value(), "\n");
  EXPECT_EQ(tok->token_bytes(byte_id(0xC3)).value(), "\xc3");
  EXPECT_EQ(tok->token_bytes(kBos).value(), "<s>");
  Result<std::string> bad = tok->decode(Ids{kVocab});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("token id 279 is outside the vocabulary (ids 0..278"),
            std::string::npos)
      << bad.message();
}

TEST(SentencePieceBpe, DecodeOfEncodeGivesTheTextBack) {
  // With the normalizer, exactly one ▁ is added and exactly one space stripped, so every text
  // comes back, leading spaces included.
  std::unique_ptr<Tokenizer> tok = load();
  ASSERT_NE(tok, nullptr);
  for (const std::string text : {"hello world", " hello", "  ", "hello  world\n", "Café 😀 über\tx",
                                 "\n\nhe", "a", "\xff not utf-8 \xe2\x82", ""}) {
    EXPECT_EQ(decode(*tok, tok->encode(text, false)), text) << text;
  }
  // With Metaspace "first", a text that starts with a space gets no extra ▁, and the decoder
  // still strips one space: " hello" comes back as "hello", as it does in Hugging Face.
  tok = load(Style::kMetaspaceFirst);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(decode(*tok, tok->encode("hello  world", false)), "hello  world");
  EXPECT_EQ(decode(*tok, tok->encode(" hello", false)), "hello");
}

TEST(SentencePieceBpe, MetaspaceDecoderDropsMetaspacesOfTheFirstToken) {
  std::unique_ptr<Tokenizer> tok =
      load(Style::kMetaspaceFirst, /*pair_merges=*/false, /*metaspace_decoder=*/true);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(decode(*tok, {kSpaceHello, kSpaceWorld}), "hello world");
  // Hugging Face's Metaspace decoder drops every ▁ of the first token, not just one.
  EXPECT_EQ(decode(*tok, {kSpaceSpace, kSpaceHello}), " hello");
  EXPECT_EQ(decode(*tok, {kSpace, byte_id(0xC3), byte_id(0xA9)}), "é");
  EXPECT_EQ(tok->token_bytes(kSpaceSpace).value(), "  ");
}

TEST(SentencePieceBpe, StreamingGivesWholeCharactersAndKeepsTheFirstSpace) {
  std::unique_ptr<Tokenizer> tok = load();
  ASSERT_NE(tok, nullptr);
  const Ids ids = tok->encode("hello 😀 world", false);
  // ▁hello, then "▁😀" as ▁ and four bytes (no merge joins them), then ▁world.
  ASSERT_EQ(ids, (Ids{kSpaceHello, kSpace, byte_id(0xF0), byte_id(0x9F), byte_id(0x98),
                      byte_id(0x80), kSpaceWorld}));
  IncrementalDecoder stream(*tok);
  std::vector<std::string> pieces;
  for (int32_t id : ids) {
    Result<std::string> piece = stream.push(id);
    ASSERT_TRUE(piece.is_ok()) << piece.message();
    pieces.push_back(piece.value());
  }
  EXPECT_EQ(stream.flush(), "");
  EXPECT_EQ(pieces, (std::vector<std::string>{" hello", " ", "", "", "", "😀", " world"}));
  // Streamed text continues a prompt, so its first space is kept; decode() drops it.
  std::string streamed;
  for (const std::string& p : pieces) streamed += p;
  EXPECT_EQ(streamed, std::string(" ").append(decode(*tok, ids)));
}

TEST(SentencePieceBpe, SafeFromSeveralThreads) {
  std::unique_ptr<Tokenizer> tok = load();
  ASSERT_NE(tok, nullptr);
  const Ids expected = tok->encode("hello world hhello é", false);
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i)
        if (tok->encode("hello world hhello é", false) != expected) ++mismatches;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace kvlm
