// An independent check of SentencePieceBpe: llama2.c's tok512.bin (a SentencePiece BPE
// vocabulary with one score per piece) converted to a Hugging Face tokenizer.json the way
// Hugging Face's converter does it (transformers' SentencePieceExtractor: every split of a piece
// into two pieces is a merge, merges ordered by the score of the piece they make), then both
// tokenizers must give the same ids. llama2.c merges by score, Hugging Face by rank: two
// algorithms that agree only if the converter, the normalizer and the byte fallback are right.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "support/test_support.h"
#include "tokenizer/llama2c_tokenizer.h"
#include "tokenizer/sentencepiece_bpe.h"
#include "tokenizer/sentencepiece_test_data.h"

namespace kvlm {
namespace {

using nlohmann::ordered_json;

// tok512.bin's pieces spell spaces as " " (llama2.c's export replaced "▁"), and its control
// tokens as "\n<s>\n"; the tokenizer.json spells them as Hugging Face does.
std::string hf_piece(const Llama2cTokenizer& t, int32_t id) {
  if (id == Llama2cTokenizer::kBos) return "<s>";
  if (id == Llama2cTokenizer::kEos) return "</s>";
  std::string piece = t.piece(id), out;
  for (char c : piece) out += c == ' ' ? std::string("▁") : std::string(1, c);
  return out;
}

std::string converted_tokenizer_json(const Llama2cTokenizer& t) {
  const int32_t n = t.vocab_size();
  std::unordered_map<std::string, int32_t> id_of;
  ordered_json vocab = ordered_json::object();
  for (int32_t id = 0; id < n; ++id) {
    id_of.emplace(hf_piece(t, id), id);
    vocab[hf_piece(t, id)] = id;
  }
  // SentencePieceExtractor.extract: for each piece, its splits into two pieces in the
  // vocabulary (ordered by the ids of the parts), then all merges stably sorted by the merged
  // piece's score, highest first.
  struct Merge {
    std::string left, right;
    float score;
  };
  std::vector<Merge> merges;
  for (int32_t id = 0; id < n; ++id) {
    const std::string piece = hf_piece(t, id);
    std::vector<std::pair<std::pair<int32_t, int32_t>, Merge>> local;
    for (size_t cut = 1; cut < piece.size(); ++cut) {
      if ((static_cast<unsigned char>(piece[cut]) & 0xC0) == 0x80) continue;  // mid-character
      auto l = id_of.find(piece.substr(0, cut)), r = id_of.find(piece.substr(cut));
      if (l == id_of.end() || r == id_of.end()) continue;
      local.push_back({{l->second, r->second}, {l->first, r->first, t.score(id)}});
    }
    std::sort(local.begin(), local.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [ids, m] : local) merges.push_back(std::move(m));
  }
  std::stable_sort(merges.begin(), merges.end(),
                   [](const Merge& a, const Merge& b) { return a.score > b.score; });
  ordered_json merge_list = ordered_json::array();
  for (const Merge& m : merges) merge_list.push_back(ordered_json::array({m.left, m.right}));

  ordered_json doc;
  doc["added_tokens"] = ordered_json::array();
  for (int32_t id : {0, 1, 2})
    doc["added_tokens"].push_back({{"id", id}, {"content", hf_piece(t, id)}, {"special", true}});
  doc["normalizer"] = {{"type", "Sequence"},
                       {"normalizers",
                        {{{"type", "Prepend"}, {"prepend", "▁"}},
                         {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}}}}};
  doc["pre_tokenizer"] = nullptr;
  doc["decoder"] = sp_test::llama2_decoder_json();
  doc["model"] = {{"type", "BPE"},         {"unk_token", "<unk>"}, {"fuse_unk", true},
                  {"byte_fallback", true}, {"vocab", vocab},       {"merges", merge_list}};
  return doc.dump();
}

TEST(SentencePieceCrossCheck, Tok512ConvertedGivesLlama2cIds) {
  KVLM_REQUIRE_SHARED_DATA("stories260K/tok512.bin");
  auto llama2c = Llama2cTokenizer::load(test::shared_data_path("stories260K/tok512.bin"));
  ASSERT_TRUE(llama2c.is_ok()) << llama2c.message();
  test::TempDir dir;
  test::write_text(dir.file("tokenizer.json"), converted_tokenizer_json(*llama2c.value()));
  Result<std::unique_ptr<Tokenizer>> hf = load_tokenizer(dir.file("tokenizer.json"));
  ASSERT_TRUE(hf.is_ok()) << hf.message();
  ASSERT_NE(dynamic_cast<const SentencePieceBpe*>(hf.value().get()), nullptr);
  ASSERT_EQ(hf.value()->vocab_size(), llama2c.value()->vocab_size());

  const std::vector<std::string> texts = {
      "Once upon a time, there was a little girl named Lily.",
      "She loved to play outside in the park with her friends.",
      "One day, Tom and Sam were walking to the store.",
      "\"Can I have a cookie?\" asked the boy. Mom said, \"Yes!\"",
      " leading space",
      "two  spaces   and three",
      "new\nlines\n\nand\ttabs",
      "Numbers 12345 and 3.14159",
      "Caf\xc3\xa9 cr\xc3\xa8me br\xc3\xbbl\xc3\xa9\x65 na\xc3\xafve",
      "emoji \xf0\x9f\x98\x80 and \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e",
      "UPPER lower MiXeD",
      "a",
      "",
      "The end.",
  };
  int compared_tokens = 0;
  for (const std::string& text : texts) {
    const std::vector<int32_t> expected = llama2c.value()->encode(text, false, false);
    EXPECT_EQ(hf.value()->encode(text, false), expected) << "text: " << text;
    compared_tokens += static_cast<int>(expected.size());
    // Decoding: the same bytes per token, and the whole text back.
    Result<std::string> back = hf.value()->decode(hf.value()->encode(text, false));
    ASSERT_TRUE(back.is_ok()) << back.message();
    EXPECT_EQ(back.value(), text);
  }
  EXPECT_GT(compared_tokens, 150);
  for (int32_t id = 3; id < llama2c.value()->vocab_size(); ++id) {
    EXPECT_EQ(hf.value()->token_bytes(id).value(), llama2c.value()->token_bytes(id).value())
        << "id " << id;
  }
}

}  // namespace
}  // namespace kvlm
