// The command-line program with a Llama-2-style tokenizer.json (tests/tokenizer/
// sentencepiece_test_data.h): `kvlm tokenize` / `detokenize` print the hand-derived ids and
// text, and a Hugging Face Llama folder (config.json + safetensors + tokenizer.json) generates
// from a text prompt, its JSON text continuing the prompt exactly as detokenize reads the ids.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "model/llama_random.h"
#include "support/test_support.h"
#include "tokenizer/sentencepiece_test_data.h"
#include "tokenizer/tokenizer.h"

namespace kvlm {
namespace {

using namespace sp_test;

std::string join(const std::vector<int32_t>& ids) {
  std::string out;
  for (int32_t id : ids) {
    if (!out.empty()) out += ' ';
    out += std::to_string(id);
  }
  return out;
}

TEST(CliLlamaTokenizer, TokenizeAndDetokenize) {
  test::TempDir dir;
  test::write_text(dir.file("tokenizer.json"), tokenizer_json());
  const std::string flag = "--tokenizer '" + dir.path() + "'";
  // "hello world" -> "▁hello▁world" -> ▁hello ▁world (sentencepiece_bpe_test.cpp derives it).
  test::CommandResult r = test::run_kvlm("tokenize " + flag, "hello world");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, std::to_string(kSpaceHello) + " " + std::to_string(kSpaceWorld) + "\n");
  // "é" falls back to its bytes C3 A9 (ids 0xC3 + 3, 0xA9 + 3).
  r = test::run_kvlm("tokenize --json " + flag, "é");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"ids\":[259,198,172]}\n");
  // "<s>" is BOS only with --special.
  r = test::run_kvlm("tokenize " + flag, "<s>hello");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "259 63 118 65 261 269 263\n");
  r = test::run_kvlm("tokenize --special " + flag, "<s>hello");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "1 271\n");
  // Detokenize drops the space the encoder put first, so the two commands round-trip.
  r = test::run_kvlm("detokenize " + flag, "271 277");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hello world");
  const std::string text = " two  spaces, caf\xc3\xa9 \xf0\x9f\x98\x80\n";
  test::CommandResult ids = test::run_kvlm("tokenize " + flag, text);
  ASSERT_EQ(ids.exit_code, 0) << ids.err;
  r = test::run_kvlm("detokenize " + flag, ids.out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, text);
}

TEST(CliLlamaTokenizer, HuggingFaceLlamaFolderGeneratesFromText) {
  test::TempDir dir;
  LlamaConfig lc = tiny_llama_config();
  lc.model.n_vocab = 288;  // the tokenizer's 279 tokens, and some the tokenizer never uses
  LlamaHostWeights w = random_llama_weights(lc, 11);
  // --json prints the text as a JSON string, which cannot hold bytes that are not UTF-8, and a
  // random model would pick lone <0x80>..<0xFF> tokens (and ids past the tokenizer's). Their
  // (tied) embedding rows are zeroed, so their logits are 0, and two tokens get opposite rows,
  // so one of those two always has a logit above 0: greedy decoding never picks them.
  const size_t C = lc.model.n_embd;
  auto zero_row = [&](int32_t id) { std::fill_n(w.embed.begin() + id * C, C, 0.0f); };
  for (int b = 0x80; b < 0x100; ++b) zero_row(byte_id(static_cast<unsigned char>(b)));
  for (int32_t id = kVocab; id < lc.model.n_vocab; ++id) zero_row(id);
  for (size_t i = 0; i < C; ++i) w.embed[kSpaceWorld * C + i] = -w.embed[kSpaceHello * C + i];
  ASSERT_TRUE(write_llama_hf(dir.path(), w, HfWriteOptions{}).is_ok());
  test::write_text(dir.file("tokenizer.json"), tokenizer_json());

  const std::string args = "generate --model '" + dir.path() + "' --prompt 'hello world' ";
  const auto json = test::run_kvlm(args + "--max-new 8 --ignore-eos --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto j = nlohmann::json::parse(json.out);
  const auto& seq = j["sequences"][0];
  const auto prompt = seq["prompt_ids"].get<std::vector<int32_t>>();
  const auto ids = seq["ids"].get<std::vector<int32_t>>();
  ASSERT_EQ(ids.size(), 8u);
  // BOS first, as the file's post-processor (TemplateProcessing) says, then the text's ids.
  EXPECT_EQ(prompt, (std::vector<int32_t>{kBos, kSpaceHello, kSpaceWorld}));

  // The new text continues the prompt: detokenizing prompt + new ids gives the prompt's text
  // followed by exactly the JSON text (its first space included).
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), ids.begin(), ids.end());
  const auto whole = test::run_kvlm("detokenize --model '" + dir.path() + "'", join(all));
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  const auto head = test::run_kvlm("detokenize --model '" + dir.path() + "'", join(prompt));
  ASSERT_EQ(head.exit_code, 0) << head.err;
  const std::string text = seq["text"].get<std::string>();
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(whole.out, head.out + text);

  // Streaming prints the same text, then a newline.
  const auto streamed = test::run_kvlm(args + "--max-new 8 --ignore-eos");
  ASSERT_EQ(streamed.exit_code, 0) << streamed.err;
  EXPECT_EQ(streamed.out, text + "\n");
}

// Lone bytes that are not UTF-8 (a generation stopped inside a character) cannot go into a JSON
// string: --json still prints valid JSON, the text with U+FFFD, the ids exact.
TEST(CliLlamaTokenizer, JsonOfTextThatIsNotUtf8) {
  test::TempDir dir;
  LlamaConfig lc = tiny_llama_config();
  lc.model.n_vocab = kVocab;
  lc.model.tied_embeddings = false;
  LlamaHostWeights w = random_llama_weights(lc, 12);
  ASSERT_EQ(w.lm_head.size(), w.embed.size());
  // Only two rows of the output head are not zero, opposite each other: one of <0xC3> and
  // <0xFF> always has the largest logit, so every generated token is a lone byte that is not
  // valid UTF-8.
  const size_t C = lc.model.n_embd;
  std::vector<float> row(w.lm_head.begin() + byte_id(0xC3) * C,
                         w.lm_head.begin() + (byte_id(0xC3) + 1) * C);
  std::fill(w.lm_head.begin(), w.lm_head.end(), 0.0f);
  for (size_t i = 0; i < C; ++i) {
    w.lm_head[byte_id(0xC3) * C + i] = row[i];
    w.lm_head[byte_id(0xFF) * C + i] = -row[i];
  }
  ASSERT_TRUE(write_llama_hf(dir.path(), w, HfWriteOptions{}).is_ok());
  test::write_text(dir.file("tokenizer.json"), tokenizer_json());
  const auto r = test::run_kvlm("generate --model '" + dir.path() +
                                "' --prompt 'hello' --max-new 3 --ignore-eos --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto ids = j["sequences"][0]["ids"].get<std::vector<int32_t>>();
  ASSERT_EQ(ids.size(), 3u);
  for (int32_t id : ids) EXPECT_TRUE(id == byte_id(0xC3) || id == byte_id(0xFF)) << id;
  EXPECT_NE(j["sequences"][0]["text"].get<std::string>().find("\xEF\xBF\xBD"), std::string::npos);
}

}  // namespace
}  // namespace kvlm
