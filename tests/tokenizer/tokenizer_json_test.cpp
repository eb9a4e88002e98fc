// tokenizer.json dispatch and errors: which kind of tokenizer a file becomes, Llama 3's
// byte-level BPE (its Split pattern, ignore_merges, BOS from the post-processor), and a clear
// error, naming the file, the member, what was expected and what was found, for each file kvlm
// cannot read exactly.
#include "tokenizer/tokenizer_json.h"

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "support/expect_error.h"
#include "support/test_support.h"
#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/sentencepiece_bpe.h"
#include "tokenizer/sentencepiece_test_data.h"

namespace kvlm {
namespace {

using nlohmann::ordered_json;
using Ids = std::vector<int32_t>;

constexpr char kLlama3Pattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr char kGpt2Pattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

Result<std::unique_ptr<Tokenizer>> load_text(const test::TempDir& dir, const std::string& text) {
  test::write_text(dir.file("tokenizer.json"), text);
  return load_tokenizer(dir.file("tokenizer.json"));
}

using test::expect_error;

std::vector<std::string> pieces(const Pretokenizer& pt, std::string_view text) {
  std::vector<Piece> found;
  pt.split(text, &found);
  std::vector<std::string> out;
  for (const Piece& p : found) out.emplace_back(text.substr(p.begin, p.end - p.begin));
  return out;
}

// GPT-2's spelling of the bytes of `text` ("Ġw" for " w").
std::string spelled(std::string_view text) {
  return bytes_to_byte_level(text);
}

// A Llama-3-style tokenizer.json: byte b is id b, then the tokens below, then three special
// tokens. Merge ranks: "3 4" 0, "1 2" 1, "12 3" 2, "$ h" 3, "Ġ w" 4. "Ġworld" is a token that
// no merge makes, which only ignore_merges can produce.
enum : int32_t { k12 = 256, k123, k34, kDollarH, kSpaceW, kSpaceWorld, kBegin, kEnd, kEot };

ordered_json llama3_doc(bool ignore_merges) {
  ordered_json vocab = ordered_json::object();
  for (int b = 0; b < 256; ++b) vocab[spelled(std::string(1, static_cast<char>(b)))] = b;
  vocab["12"] = k12;
  vocab["123"] = k123;
  vocab["34"] = k34;
  vocab["$h"] = kDollarH;
  vocab[spelled(" w")] = kSpaceW;
  vocab[spelled(" world")] = kSpaceWorld;
  // (An explicit array of arrays: {{"3", "4"}, ...} alone would read as a JSON object.)
  ordered_json merges = ordered_json::array();
  for (const auto& [l, r] : std::vector<std::pair<std::string, std::string>>{
           {"3", "4"}, {"1", "2"}, {"12", "3"}, {"$", "h"}, {spelled(" "), "w"}})
    merges.push_back(ordered_json::array({l, r}));
  auto added = [](int32_t id, const char* content) {
    return ordered_json{{"id", id}, {"content", content}, {"special", true}};
  };
  ordered_json doc;
  doc["added_tokens"] = {added(kBegin, "<|begin_of_text|>"), added(kEnd, "<|end_of_text|>"),
                         added(kEot, "<|eot_id|>")};
  doc["normalizer"] = nullptr;
  doc["pre_tokenizer"] = {{"type", "Sequence"},
                          {"pretokenizers",
                           {{{"type", "Split"},
                             {"pattern", {{"Regex", kLlama3Pattern}}},
                             {"behavior", "Isolated"},
                             {"invert", false}},
                            {{"type", "ByteLevel"},
                             {"add_prefix_space", false},
                             {"trim_offsets", true},
                             {"use_regex", false}}}}};
  doc["post_processor"] = {
      {"type", "Sequence"},
      {"processors",
       {{{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}},
        {{"type", "TemplateProcessing"},
         {"single",
          {{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}},
           {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
         {"special_tokens",
          {{"<|begin_of_text|>",
            {{"id", "<|begin_of_text|>"},
             {"ids", {kBegin}},
             {"tokens", {"<|begin_of_text|>"}}}}}}}}}};
  doc["decoder"] = {{"type", "ByteLevel"}};
  doc["model"] = {{"type", "BPE"},     {"dropout", nullptr},     {"unk_token", nullptr},
                  {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", ignore_merges},
                  {"vocab", vocab},    {"merges", merges}};
  return doc;
}

TEST(Llama3Pretokenizer, SplitsAsLlama3Pattern) {
  Result<Pretokenizer> pt = Pretokenizer::create(kLlama3Pattern, "test");
  ASSERT_TRUE(pt.is_ok()) << pt.message();
  EXPECT_FALSE(pt->has_ascii_scanner());
  // Numbers in groups of up to three digits.
  EXPECT_EQ(pieces(*pt, "12345"), (std::vector<std::string>{"123", "45"}));
  // Contractions in either case.
  EXPECT_EQ(pieces(*pt, "I'M here"), (std::vector<std::string>{"I", "'M", " here"}));
  // One character that is not a letter, digit or newline may lead a word.
  EXPECT_EQ(pieces(*pt, "$hello world"), (std::vector<std::string>{"$hello", " world"}));
  // Newlines: \s*[\r\n]+ takes a run of whitespace ending in newlines.
  EXPECT_EQ(pieces(*pt, "a\n\nb"), (std::vector<std::string>{"a", "\n\n", "b"}));
  EXPECT_EQ(pieces(*pt, "x  \n y"), (std::vector<std::string>{"x", "  \n", " y"}));
  // \s+(?!\S) leaves the last space to the word after it.
  EXPECT_EQ(pieces(*pt, "a   b"), (std::vector<std::string>{"a", "  ", " b"}));
  // U+180E is not White_Space (PCRE2's own \s would match it).
  EXPECT_EQ(pieces(*pt, "a\xe1\xa0\x8e b"), (std::vector<std::string>{"a", "\xe1\xa0\x8e", " b"}));
}

TEST(Llama3Pretokenizer, Gpt2PatternFromAFileKeepsTheAsciiScanner) {
  Result<Pretokenizer> pt = Pretokenizer::create(kGpt2Pattern, "test");
  ASSERT_TRUE(pt.is_ok()) << pt.message();
  EXPECT_TRUE(pt->has_ascii_scanner());
  EXPECT_EQ(pieces(*pt, "I'M $hello 12345"),
            (std::vector<std::string>{"I", "'", "M", " $", "hello", " 12345"}));
  EXPECT_EQ(spell_out_whitespace(R"([^\s\p{L}]\S)"),
            "[^\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
            "\\x{202F}\\x{205F}\\x{3000}\\p{L}][^\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}"
            "\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}]");
  EXPECT_EQ(
      spell_out_whitespace(R"([]\s])"),
      R"([]\t\n\x{0B}\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}])");
}

TEST(TokenizerJson, Llama3ByteLevelBpe) {
  test::TempDir dir;
  auto tok = load_text(dir, llama3_doc(/*ignore_merges=*/true).dump());
  ASSERT_TRUE(tok.is_ok()) << tok.message();
  const Tokenizer& t = *tok.value();
  EXPECT_NE(dynamic_cast<const ByteLevelBpe*>(&t), nullptr);
  EXPECT_EQ(t.bos_id(), kBegin);
  EXPECT_EQ(t.eos_id(), kEnd);
  EXPECT_TRUE(t.add_bos());  // TemplateProcessing inside the post-processor Sequence
  // "1234": Llama 3 splits "123" | "4"; within "123", 1+2 then 12+3. GPT-2's pattern would keep
  // "1234" whole, and 3+4 (rank 0) would win: [12, 34].
  EXPECT_EQ(t.encode("1234", false), (Ids{k123, '4'}));
  // "$hello": one piece, so $+h merges.
  EXPECT_EQ(t.encode("$hello", false), (Ids{kDollarH, 'e', 'l', 'l', 'o'}));
  // ignore_merges: the piece " world" is a token, used as is.
  EXPECT_EQ(t.encode("a world", false), (Ids{'a', kSpaceWorld}));
  EXPECT_EQ(t.encode("<|eot_id|>x", true), (Ids{kEot, 'x'}));
  EXPECT_EQ(t.encode("<|eot_id|>", false).size(), 10u);  // < | eot _ id | > as ordinary text
  EXPECT_EQ(t.decode(t.encode("a world 1234\n\n", false)).value(), "a world 1234\n\n");
}

TEST(TokenizerJson, Llama3WithoutIgnoreMergesMergesTheWholePiece) {
  test::TempDir dir;
  auto tok = load_text(dir, llama3_doc(/*ignore_merges=*/false).dump());
  ASSERT_TRUE(tok.is_ok()) << tok.message();
  // " world": Ġ+w (rank 4), nothing else: Ġw o r l d.
  EXPECT_EQ(tok.value()->encode("a world", false), (Ids{'a', kSpaceW, 'o', 'r', 'l', 'd'}));
}

TEST(TokenizerJson, Gpt2FileHasNoBos) {
  test::TempDir dir;
  ordered_json doc = llama3_doc(false);
  doc["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  doc.erase("post_processor");
  auto tok = load_text(dir, doc.dump());
  ASSERT_TRUE(tok.is_ok()) << tok.message();
  EXPECT_FALSE(tok.value()->add_bos());
  EXPECT_EQ(tok.value()->encode("1234", false), (Ids{k12, k34}));  // GPT-2's split: "1234"
}

// ---- errors ----

std::string sentencepiece_with(const std::function<void(ordered_json&)>& change) {
  ordered_json doc = ordered_json::parse(sp_test::tokenizer_json());
  change(doc);
  return doc.dump(1);
}

TEST(TokenizerJsonErrors, UnsupportedModelTypes) {
  test::TempDir dir;
  for (const char* type : {"Unigram", "WordPiece", "WordLevel"}) {
    expect_error(
        load_text(dir, sentencepiece_with([&](ordered_json& d) { d["model"]["type"] = type; })),
        {dir.file("tokenizer.json") + " line ",
         "model.type is \"" + std::string(type) + "\", expected \"BPE\""});
  }
}

TEST(TokenizerJsonErrors, BrokenFiles) {
  test::TempDir dir;
  const std::string good = sp_test::tokenizer_json();
  expect_error(load_text(dir, good.substr(0, good.size() / 2)),
               {"tokenizer.json line", "invalid JSON"});
  expect_error(load_text(dir, good + "x"), {"unexpected text after the top-level object"});
  expect_error(
      load_text(dir, sentencepiece_with([](ordered_json& d) { d["model"].erase("vocab"); })),
      {"tokenizer.json: no model.vocab"});
  expect_error(
      load_text(dir, sentencepiece_with([](ordered_json& d) { d["model"].erase("merges"); })),
      {"tokenizer.json: no model.merges"});
  expect_error(load_text(dir, sentencepiece_with(
                                  [](ordered_json& d) { d["model"]["merges"].push_back("▁ zz"); })),
               {"tokenizer.json line", "token \"zz\", which is not in the vocabulary"});
  expect_error(load_text(dir, sentencepiece_with(
                                  [](ordered_json& d) { d["model"]["merges"].push_back("h o"); })),
               {"tokenizer.json line", "makes \"ho\", which is not in the vocabulary"});
  expect_error(load_text(dir, sentencepiece_with([](ordered_json& d) {
                           d["model"]["merges"].push_back({"h", "e", "l"});
                         })),
               {"two tokens, found 3"});
  expect_error(
      load_text(dir, sentencepiece_with([](ordered_json& d) {
                  d["added_tokens"].push_back({{"id", sp_test::kSpaceHello}, {"content", "hi"}});
                })),
      {"added token \"hi\" has id 271, which model.vocab gives to \"▁hello\""});
  expect_error(load_text(dir, sentencepiece_with([](ordered_json& d) {
                           d["added_tokens"].push_back({{"id", 300}, {"content", ""}});
                         })),
               {"tokenizer.json line", "an added token needs an id in 0..", "non-empty content"});
  expect_error(
      load_text(dir, sentencepiece_with([](ordered_json& d) { d["model"]["dropout"] = 0.1; })),
      {"model.dropout is 0.1"});
  expect_error(load_text(dir, sentencepiece_with([](ordered_json& d) {
                           d["model"]["continuing_subword_prefix"] = "##";
                         })),
               {"model.continuing_subword_prefix is \"##\""});
}

TEST(TokenizerJsonErrors, ByteFallbackNeedsEveryByteToken) {
  test::TempDir dir;
  expect_error(load_text(dir, sentencepiece_with(
                                  [](ordered_json& d) { d["model"]["vocab"].erase("<0x41>"); })),
               {"tokenizer.json: model.byte_fallback is true but model.vocab has no \"<0x41>\""});
}

TEST(TokenizerJsonErrors, SentencePiecePipelinesKvlmDoesNotRun) {
  test::TempDir dir;
  // Metaspace or Prepend without byte fallback: the rest of the SentencePiece kind.
  expect_error(load_text(dir, sentencepiece_with(
                                  [](ordered_json& d) { d["model"]["byte_fallback"] = false; })),
               {"tokenizer.json line",
                "normalizer \"Sequence\" is not supported without "
                "model.byte_fallback"});
  auto metaspace_without_fallback =
      ordered_json::parse(sp_test::tokenizer_json(sp_test::Style::kMetaspaceFirst));
  metaspace_without_fallback["model"]["byte_fallback"] = false;
  expect_error(load_text(dir, metaspace_without_fallback.dump()),
               {"pre_tokenizer \"Metaspace\" is not supported without model.byte_fallback"});
  expect_error(load_text(dir, sentencepiece_with([](ordered_json& d) {
                           d["normalizer"]["normalizers"].push_back({{"type", "NFKC"}});
                         })),
               {"tokenizer.json line", "normalizer step \"NFKC\" is not supported",
                "found {\"type\":\"Sequence\""});
  expect_error(load_text(dir, sentencepiece_with([](ordered_json& d) {
                           d["normalizer"]["normalizers"][1]["pattern"] = {{"Regex", " +"}};
                         })),
               {"normalizer step \"Replace\" is not supported"});
  expect_error(load_text(dir, sentencepiece_with([](ordered_json& d) {
                           d["pre_tokenizer"] = {{"type", "Whitespace"}};
                         })),
               {"pre_tokenizer \"Whitespace\" is not supported"});
  expect_error(load_text(dir, sentencepiece_with([](ordered_json& d) {
                           d["pre_tokenizer"] = {{"type", "Metaspace"},
                                                 {"replacement", "▁"},
                                                 {"prepend_scheme", "sometimes"}};
                         })),
               {"pre_tokenizer \"Metaspace\" is not supported", "\"sometimes\""});
  expect_error(load_text(dir, sentencepiece_with([](ordered_json& d) { d.erase("decoder"); })),
               {"tokenizer.json (no decoder member): decoder null is not supported"});
  expect_error(load_text(dir, sentencepiece_with([](ordered_json& d) { d["decoder"] = nullptr; })),
               {"decoder null is not supported"});
  expect_error(load_text(dir, sentencepiece_with([](ordered_json& d) {
                           d["decoder"]["decoders"][0] = {{"type", "WordPiece"}};
                         })),
               {"decoder step \"WordPiece\" is not supported"});
  expect_error(load_text(dir, sentencepiece_with([](ordered_json& d) {
                           std::swap(d["decoder"]["decoders"][2], d["decoder"]["decoders"][3]);
                         })),
               {"decoder step \"Strip\" (before Fuse"});
}

TEST(TokenizerJsonErrors, ByteLevelPipelinesKvlmDoesNotRun) {
  test::TempDir dir;
  ordered_json doc = llama3_doc(false);
  doc["normalizer"] = {{"type", "NFC"}};
  expect_error(load_text(dir, doc.dump()), {"normalizer \"NFC\" is not supported"});
  doc = llama3_doc(false);
  doc["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed";
  expect_error(load_text(dir, doc.dump()), {"pre_tokenizer \"Sequence\"", "\"Isolated\""});
  doc = llama3_doc(false);
  doc["pre_tokenizer"]["pretokenizers"][1]["use_regex"] = true;
  expect_error(load_text(dir, doc.dump()), {"splits again"});
  doc = llama3_doc(false);
  doc["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"Regex", "(ab"}};
  expect_error(load_text(dir, doc.dump()), {"pre_tokenizer: PCRE2 rejected the pattern"});
  doc = llama3_doc(false);
  doc["pre_tokenizer"]["pretokenizers"][0].erase("pattern");
  expect_error(load_text(dir, doc.dump()), {"without a Regex or String pattern"});
  doc = llama3_doc(false);
  doc["pre_tokenizer"] = nullptr;
  expect_error(load_text(dir, doc.dump()), {"pre_tokenizer null is not supported"});
}

}  // namespace
}  // namespace kvlm
