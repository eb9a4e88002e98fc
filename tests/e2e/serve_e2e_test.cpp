// kvlm serve end to end, driven by the official openai npm client (tests/e2e/serve_e2e.mjs).
// This test writes the two small random models the script serves (a GPT-2 with a byte-level
// tokenizer and no chat template; a Llama with a SentencePiece-style tokenizer.json and a
// Llama 2 chat template in tokenizer_config.json), installs the client from the committed
// package-lock.json with `npm ci` into the build folder (once), and runs the script, which
// starts `kvlm serve` on free 127.0.0.1 ports and kills every server it started, pass or fail.
// Skips, saying why, without node >= 20 or when npm cannot install the client.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "model/llama_random.h"
#include "model/random_gpt2.h"
#include "support/node_package.h"
#include "support/test_support.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/sentencepiece_test_data.h"

namespace kvlm {
namespace {

namespace fs = std::filesystem;

// A GPT-2 whose vocabulary is the 256 bytes plus <|endoftext|> (id 256), no merges: every text
// encodes, byte by byte. 1024 positions, so a stream can run long enough to be interrupted.
void write_gpt2(const std::string& dir) {
  ModelConfig c = test::tiny_gpt2_config();
  c.n_vocab = 257;
  c.n_ctx = 1024;
  c.n_embd = 64;
  c.eos_token_id = 256;
  c.bos_token_id = 256;
  ASSERT_TRUE(write_random_gpt2(dir, c, RandomGpt2Options{}).is_ok());
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) {
    vocab[bytes_to_byte_level(std::string(1, static_cast<char>(b)))] = b;
  }
  vocab["<|endoftext|>"] = 256;
  test::write_text(dir + "/vocab.json", vocab.dump());
  test::write_text(dir + "/merges.txt", "#version: 0.2\n");
}

// A Llama with tests/tokenizer's Llama-2-style tokenizer.json and a Llama 2 chat template;
// `n_ctx` 48 for the sliding window's check, which runs past it.
void write_llama(const std::string& dir, int n_ctx = 512) {
  LlamaConfig lc = tiny_llama_config();
  lc.model.n_vocab = 279;  // the tokenizer's 279 tokens: every id the model samples decodes
  lc.model.n_ctx = n_ctx;
  const LlamaHostWeights w = random_llama_weights(lc, 5);
  ASSERT_TRUE(write_llama_hf(dir, w, HfWriteOptions{}).is_ok());
  test::write_text(dir + "/tokenizer.json", sp_test::tokenizer_json());
  const nlohmann::json config = {
      {"bos_token", "<s>"},
      {"eos_token", "</s>"},
      {"chat_template",
       "{% for message in messages %}{% if message['role'] == 'system' %}{{ '<<SYS>>\\n' + "
       "message['content'] + '\\n<</SYS>>\\n\\n' }}{% elif message['role'] == 'user' %}{{ "
       "bos_token + '[INST] ' + message['content'] + ' [/INST]' }}{% endif %}{% endfor %}"}};
  test::write_text(dir + "/tokenizer_config.json", config.dump());
}

TEST(ServeE2e, OpenAiClient) {
  // The client is installed beside the test binary, from the committed lock file.
  const fs::path work = fs::path(KVLM_BINARY).parent_path() / "e2e";
  const std::string not_ready = test::prepare_node_package(
      "e2e", work, {"package.json", "package-lock.json", "serve_e2e.mjs"}, "openai");
  KVLM_REQUIRE_TOOL(not_ready.empty(), not_ready);
  test::TempDir gpt2, llama, llama_short;
  write_gpt2(gpt2.path());
  write_llama(llama.path());
  write_llama(llama_short.path(), 48);
  // KVLM_SERVE_BINARY: another kvlm to test (say, a sanitizer build) with this test binary.
  const char* other = std::getenv("KVLM_SERVE_BINARY");
  const std::string kvlm = other != nullptr ? other : KVLM_BINARY;
  std::string output;
  const int code =
      test::run_shell("cd '" + work.string() + "' && node serve_e2e.mjs --kvlm '" + kvlm +
                          "' --gpt2 '" + gpt2.path() + "' --llama '" + llama.path() +
                          "' --llama-short '" + llama_short.path() + "'",
                      &output);
  std::printf("%s", output.c_str());
  EXPECT_EQ(code, 0) << "serve_e2e.mjs failed (its output is above)";
}

}  // namespace
}  // namespace kvlm
