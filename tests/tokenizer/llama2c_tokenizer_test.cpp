// llama2.c's tokenizer.bin: encoding and decoding exactly as run.c's encode() / decode() /
// safe_printf(), checked on a small hand-made vocabulary (expected ids worked out by hand from
// run.c's rules), against a line-by-line port of run.c's quadratic merge loop on many random
// texts, on the real tok512.bin when ../shared is present, and on broken files.
#include "tokenizer/llama2c_tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "support/test_support.h"

namespace kvlm {
namespace {

using ::testing::HasSubstr;

struct Piece {
  std::string text;
  float score;
};

// tokenizer.bin bytes: max_token_length, then (score, length, bytes) per piece.
std::string serialize(const std::vector<Piece>& pieces, int32_t max_len = 8) {
  std::string out(reinterpret_cast<const char*>(&max_len), 4);
  for (const Piece& p : pieces) {
    const int32_t len = static_cast<int32_t>(p.text.size());
    out.append(reinterpret_cast<const char*>(&p.score), 4);
    out.append(reinterpret_cast<const char*>(&len), 4);
    out += p.text;
  }
  return out;
}

// <unk>, BOS, EOS, the 256 byte pieces, then `extra` from id 259 on.
std::vector<Piece> vocabulary(const std::vector<Piece>& extra) {
  std::vector<Piece> v = {{"<unk>", 0}, {"\n<s>\n", 0}, {"\n</s>\n", 0}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    v.push_back({name, 0});
  }
  v.insert(v.end(), extra.begin(), extra.end());
  return v;
}

// Ids from 259 on, in this order.
const std::vector<Piece> kExtra = {
    {" ", -1},         // 259
    {"a", -2},         // 260
    {"b", -3},         // 261
    {"ab", -10},       // 262
    {" a", -5},        // 263
    {" ab", -4},       // 264
    {"ba", -10},       // 265: ties with "ab": the leftmost pair merges first
    {"\xC3\xA9", -6},  // 266: é, a two-byte character with a piece of its own
    {"c", -7},         // 267
    {"cc", -1e11f},    // 268: scores must beat -1e10 to merge (run.c's starting best)
    {"\n", -8},        // 269
};

std::unique_ptr<Llama2cTokenizer> make(const std::vector<Piece>& extra = kExtra) {
  auto t = Llama2cTokenizer::parse(serialize(vocabulary(extra)), "test.bin");
  EXPECT_TRUE(t.is_ok()) << t.message();
  return t ? std::move(t.value()) : nullptr;
}

// run.c's encode() merge loop, ported line by line (quadratic), as the oracle.
std::vector<int32_t> run_c_merges(const Llama2cTokenizer& t, std::vector<int32_t> tokens) {
  auto lookup = [&](const std::string& s) -> int32_t {
    for (int32_t id = 0; id < t.vocab_size(); ++id)
      if (std::strcmp(t.piece(id).c_str(), s.c_str()) == 0) return id;
    return -1;
  };
  while (true) {
    float best_score = -1e10f;
    int best_id = -1, best_idx = -1;
    for (size_t i = 0; i + 1 < tokens.size(); ++i) {
      const std::string merged =
          std::string(t.piece(tokens[i]).c_str()) + t.piece(tokens[i + 1]).c_str();
      const int id = lookup(merged);
      if (id != -1 && t.score(id) > best_score) {
        best_score = t.score(id);
        best_id = id;
        best_idx = static_cast<int>(i);
      }
    }
    if (best_idx == -1) break;
    tokens[best_idx] = best_id;
    tokens.erase(tokens.begin() + best_idx + 1);
  }
  return tokens;
}

TEST(Llama2cTokenizer, EmptyTextIsBosAlone) {
  auto t = make();
  EXPECT_EQ(t->encode("", true, false), std::vector<int32_t>{1});
  EXPECT_EQ(t->encode("", false, false), std::vector<int32_t>{});
  EXPECT_EQ(t->encode("", true, true), (std::vector<int32_t>{1, 2}));
}

TEST(Llama2cTokenizer, DummyPrefixAndBestScoreMerges) {
  auto t = make();
  // " a b": the dummy " " then one piece per character: [" ", " ", "a", " ", "b"]. Only " a"
  // is a piece, so it merges; "  a", " a " and " b" are not pieces.
  EXPECT_EQ(t->encode(" a b", false, false), (std::vector<int32_t>{259, 263, 259, 261}));
  // "ab": [" ", "a", "b"]: " a" (-5) beats "ab" (-10); then " a" + "b" = " ab" (-4).
  EXPECT_EQ(t->encode("ab", true, true), (std::vector<int32_t>{1, 264, 2}));
  // "bab": [" ", "b", "a", "b"]: "ba" and "ab" tie at -10, the leftmost ("ba") wins; then
  // [" ", "ba", "b"] has nothing left to merge.
  EXPECT_EQ(t->encode("bab", false, false), (std::vector<int32_t>{259, 265, 261}));
  // "cc" scores -1e11, below run.c's starting best of -1e10: never merged.
  EXPECT_EQ(t->encode("cc", false, false), (std::vector<int32_t>{259, 267, 267}));
}

TEST(Llama2cTokenizer, Utf8PiecesAndByteFallback) {
  auto t = make();
  // é has a piece; € (E2 82 AC) has none and falls back to bytes + 3.
  EXPECT_EQ(t->encode("\xC3\xA9", false, false), (std::vector<int32_t>{259, 266}));
  EXPECT_EQ(t->encode("\xE2\x82\xAC", false, false),
            (std::vector<int32_t>{259, 0xE2 + 3, 0x82 + 3, 0xAC + 3}));
  // A stray continuation byte and a truncated character split where run.c splits them.
  EXPECT_EQ(t->encode("\x82"
                      "a\xC3",
                      false, false),
            (std::vector<int32_t>{259, 0x82 + 3, 260, 0xC3 + 3}));
  // The text ends at a NUL byte, as run.c's C string does.
  EXPECT_EQ(t->encode(std::string_view("a\0b", 3), false, false), (std::vector<int32_t>{263}));
}

TEST(Llama2cTokenizer, HeapMergesEqualRunCQuadraticLoop) {
  auto t = make();
  std::mt19937 rng(7);
  const std::vector<std::string> alphabet = {"a",  "b", " ", "c", "\xC3\xA9", "\xE2\x82\xAC",
                                             "\n", "z"};
  for (int trial = 0; trial < 500; ++trial) {
    std::string text;
    const int n = static_cast<int>(rng() % 24);
    for (int i = 0; i < n; ++i) text += alphabet[rng() % alphabet.size()];
    // The oracle merges the pieces our encoder started from (merges disabled: a vocabulary
    // lookup of every single character/byte is what run.c's first loop produces).
    std::vector<int32_t> start;
    start.push_back(1);
    const std::vector<int32_t> ours = t->encode(text, true, false);
    // Rebuild run.c's pre-merge list independently: BOS, " " when non-empty, then per
    // character its piece or its bytes.
    if (!text.empty()) start.push_back(259);
    for (size_t i = 0; i < text.size();) {
      const unsigned char c = text[i];
      const size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
      const std::string ch = text.substr(i, len);
      int32_t id = -1;
      for (int32_t k = 0; k < t->vocab_size(); ++k)
        if (t->piece(k) == ch) id = k;
      if (id >= 0) {
        start.push_back(id);
      } else {
        for (unsigned char b : ch) start.push_back(b + 3);
      }
      i += len;
    }
    EXPECT_EQ(ours, run_c_merges(*t, start)) << "text: " << text;
  }
}

TEST(Llama2cTokenizer, DecodeAndRunCOutput) {
  auto t = make();
  // After BOS a leading space is dropped; elsewhere kept.
  EXPECT_EQ(t->piece_after(1, 263), "a");
  EXPECT_EQ(t->piece_after(260, 263), " a");
  // Byte tokens decode to their byte.
  EXPECT_EQ(t->piece_after(260, 'A' + 3), "A");
  EXPECT_EQ(t->piece_after(260, 0xE2 + 3), "\xE2");
  // safe_printf: a lone byte that is neither printable nor whitespace prints nothing.
  EXPECT_EQ(t->printed_piece(260, 0x01 + 3), "");
  EXPECT_EQ(t->printed_piece(260, 0xE2 + 3), "");
  EXPECT_EQ(t->printed_piece(260, '\n' + 3), "\n");
  EXPECT_EQ(t->printed_piece(260, 0x00 + 3), "");
  // run.c prints what follows the first token, stops before a BOS, and ends with "\n".
  auto out = t->run_c_output(std::vector<int32_t>{1, 264, 259, 260, 0x01 + 3, 266, 1, 260});
  ASSERT_TRUE(out.is_ok()) << out.message();
  EXPECT_EQ(out.value(), "ab a\xC3\xA9\n");
  auto only_bos = t->run_c_output(std::vector<int32_t>{1});
  ASSERT_TRUE(only_bos.is_ok());
  EXPECT_EQ(only_bos.value(), "\n");
  // Tokenizer::decode joins pieces the same way (no printing filter).
  auto text = t->decode(std::vector<int32_t>{260, 263, 0xE2 + 3});
  ASSERT_TRUE(text.is_ok());
  EXPECT_EQ(text.value(), "a a\xE2");
  auto bytes = t->token_bytes(0x41 + 3);
  ASSERT_TRUE(bytes.is_ok());
  EXPECT_EQ(bytes.value(), "A");
}

TEST(Llama2cTokenizer, InvalidIdsFail) {
  auto t = make();
  EXPECT_THAT(t->token_bytes(-1).message(), HasSubstr("outside the vocabulary"));
  EXPECT_THAT(t->decode(std::vector<int32_t>{260, 9999}).message(), HasSubstr("9999"));
  EXPECT_THAT(t->run_c_output(std::vector<int32_t>{1, 270}).message(), HasSubstr("270"));
}

TEST(Llama2cTokenizer, FileEndingEarlyIsAnError) {
  const std::string good = serialize(vocabulary(kExtra));
  test::TempDir dir;
  // Cut inside max_token_length, inside a score/length pair, inside a piece.
  const std::vector<std::pair<size_t, std::string>> cuts = {
      {2, "before a llama2.c tokenizer.bin's 4-byte max_token_length"},
      {4 + 3, "ends early"},
      {4 + 8 + 2, "inside the 5-byte piece"},
  };
  for (const auto& [n, message] : cuts) {
    const std::string path = dir.file("cut" + std::to_string(n) + ".bin");
    test::write_text(path, good.substr(0, n));
    auto t = Llama2cTokenizer::load(path);
    ASSERT_FALSE(t.is_ok()) << n;
    EXPECT_THAT(t.message(), HasSubstr(path));
    EXPECT_THAT(t.message(), HasSubstr(message));
  }
  // Whole pieces but fewer than the model's vocab_size.
  const std::string path = dir.file("short.bin");
  test::write_text(path, good);
  auto t = Llama2cTokenizer::load(path, 300);
  ASSERT_FALSE(t.is_ok());
  EXPECT_THAT(t.message(), HasSubstr("ends early"));
  EXPECT_THAT(t.message(), HasSubstr("expected 300 tokens"));
  // More pieces than the model's vocab_size: the pair does not belong together.
  auto more = Llama2cTokenizer::load(path, 260);
  ASSERT_FALSE(more.is_ok());
  EXPECT_THAT(more.message(), HasSubstr("tokenizer and model differ"));
  auto exact = Llama2cTokenizer::load(path, 270);
  EXPECT_TRUE(exact.is_ok()) << exact.message();
}

TEST(Llama2cTokenizer, MalformedFilesAreErrors) {
  std::string negative = serialize(vocabulary(kExtra));
  const int32_t bad_len = -5;
  std::memcpy(negative.data() + 4 + 4, &bad_len, 4);  // token 0's length
  EXPECT_THAT(Llama2cTokenizer::parse(negative, "neg.bin").message(),
              HasSubstr("token 0 has length -5"));
  // Too few tokens for run.c's byte fallback.
  EXPECT_THAT(Llama2cTokenizer::parse(serialize({{"<unk>", 0}, {"<s>", 0}}), "small.bin").message(),
              HasSubstr("needs at least 259"));
  // Byte tokens out of place (e.g. a llama2.c model.bin given as the tokenizer).
  std::vector<Piece> v = vocabulary(kExtra);
  v[3 + 0x41].text = "A";
  EXPECT_THAT(Llama2cTokenizer::parse(serialize(v), "nobytes.bin").message(),
              HasSubstr("token 68 is \"A\", expected \"<0x41>\""));
}

TEST(Llama2cTokenizer, FromPiecesChecksAndEncodesTheSame) {
  std::vector<std::string> pieces;
  std::vector<float> scores;
  for (const Piece& p : vocabulary(kExtra)) {
    pieces.push_back(p.text);
    scores.push_back(p.score);
  }
  auto t = Llama2cTokenizer::from_pieces(pieces, scores, "pieces");
  ASSERT_TRUE(t.is_ok()) << t.message();
  EXPECT_EQ(t.value()->encode("bab ab", true, false), make()->encode("bab ab", true, false));
  scores.pop_back();
  EXPECT_THAT(Llama2cTokenizer::from_pieces(pieces, scores, "pieces").message(),
              HasSubstr("270 pieces but 269 scores"));
}

TEST(Llama2cTokenizer, FactoryPicksItForBinFilesAndFolders) {
  test::TempDir dir;
  const std::string bytes = serialize(vocabulary(kExtra));
  test::write_text(dir.file("tok.bin"), bytes);
  auto from_file = load_tokenizer(dir.file("tok.bin"));
  ASSERT_TRUE(from_file.is_ok()) << from_file.message();
  EXPECT_NE(dynamic_cast<const Llama2cTokenizer*>(from_file.value().get()), nullptr);
  EXPECT_EQ(from_file.value()->vocab_size(), 270);
  EXPECT_EQ(from_file.value()->bos_id(), 1);
  EXPECT_EQ(from_file.value()->eos_id(), 2);
  test::write_text(dir.file("tokenizer.bin"), bytes);
  auto from_folder = load_tokenizer(dir.path());
  ASSERT_TRUE(from_folder.is_ok()) << from_folder.message();
  EXPECT_NE(dynamic_cast<const Llama2cTokenizer*>(from_folder.value().get()), nullptr);
}

TEST(Llama2cTokenizer, Tok512EncodesLikeRunC) {
  KVLM_REQUIRE_SHARED_DATA("stories260K/tok512.bin");
  const std::string path = test::shared_data_path("stories260K/tok512.bin");
  auto t = Llama2cTokenizer::load(path, 512);
  ASSERT_TRUE(t.is_ok()) << t.message();
  EXPECT_EQ(t.value()->max_token_length(), 7);
  // golden.json's prompt_ids (run.c's encode with BOS).
  EXPECT_EQ(t.value()->encode("Lily wanted to", true, false),
            (std::vector<int32_t>{1, 317, 391, 266, 267}));
  EXPECT_EQ(t.value()->encode("Tom and Sam were", true, false),
            (std::vector<int32_t>{1, 274, 287, 269, 301, 314, 382, 276}));
  // Printable ASCII comes back out of run.c's printing unchanged.
  for (const std::string text : {"Once upon a time, there was a little girl.",
                                 "  two leading spaces", "tabs\tand\nnewlines", "x"}) {
    const std::vector<int32_t> ids = t.value()->encode(text, true, false);
    auto out = t.value()->run_c_output(ids);
    ASSERT_TRUE(out.is_ok());
    EXPECT_EQ(out.value(), text + "\n");
  }
  // Random texts from a mixed alphabet: the heap merges equal run.c's loop.
  std::mt19937 rng(11);
  const std::vector<std::string> alphabet = {"e", "t", " ",        "a",  "o", "n",  "h",
                                             "s", ".", "\xC3\xA9", "\n", "Q", "th", "he"};
  for (int trial = 0; trial < 200; ++trial) {
    std::string text;
    const int n = static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) text += alphabet[rng() % alphabet.size()];
    const std::vector<int32_t> ids = t.value()->encode(text, true, false);
    std::vector<int32_t> start = {1};
    if (!text.empty()) start.push_back(t.value()->encode(" ", false, false)[0]);
    for (size_t i = 0; i < text.size();) {
      const unsigned char c = text[i];
      const size_t len = c < 0x80 ? 1 : 2;
      const std::string ch = text.substr(i, len);
      int32_t id = -1;
      for (int32_t k = 0; k < t.value()->vocab_size(); ++k)
        if (t.value()->piece(k) == ch) id = k;
      if (id >= 0) {
        start.push_back(id);
      } else {
        for (unsigned char b : ch) start.push_back(b + 3);
      }
      i += len;
    }
    EXPECT_EQ(ids, run_c_merges(*t.value(), start)) << "text: " << text;
  }
}

}  // namespace
}  // namespace kvlm
