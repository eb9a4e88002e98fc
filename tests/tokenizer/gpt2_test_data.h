// Shared by the tokenizer tests: where GPT-2's files are, the loaded GPT-2 tokenizer, and GPT-2's
// vocabulary rewritten as a Hugging Face tokenizer.json (the shared data has none).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "support/test_support.h"
#include "tokenizer/tokenizer.h"

namespace kvlm::gpt2_test {

inline std::string gpt2_dir() {
  return test::shared_data_path("gpt2-tokenizer");
}

// The shared-data guard (support/test_support.h) for every GPT-2 tokenizer file; then fails the
// test when the files are there but do not load.
#define KVLM_REQUIRE_GPT2_TOKENIZER()                                                              \
  KVLM_REQUIRE_SHARED_DATA("gpt2-tokenizer/golden.json", "gpt2-tokenizer/vocab.json",              \
                           "gpt2-tokenizer/merges.txt", "gpt2-tokenizer/encoder.json",             \
                           "gpt2-tokenizer/vocab.bpe");                                            \
  if (std::string kvlm_gpt2_error_; ::kvlm::gpt2_test::gpt2_or_null(&kvlm_gpt2_error_) == nullptr) \
  FAIL() << "GPT-2 tokenizer failed to load: " << kvlm_gpt2_error_

// GPT-2's vocab.json + merges.txt as one tokenizer.json, the way Hugging Face writes it, with
// the merges either as "a b" strings or as ["a", "b"] pairs (newer files).
inline std::string gpt2_tokenizer_json(bool pair_merges) {
  nlohmann::json vocab = nlohmann::json::parse(test::read_text(gpt2_dir() + "/vocab.json"));
  nlohmann::json merges = nlohmann::json::array();
  std::istringstream lines(test::read_text(gpt2_dir() + "/merges.txt"));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line.starts_with("#version")) continue;
    const size_t space = line.find(' ');
    if (pair_merges) {
      merges.push_back({line.substr(0, space), line.substr(space + 1)});
    } else {
      merges.push_back(line);
    }
  }
  nlohmann::json doc = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens",
       {{{"id", 50256},
         {"content", "<|endoftext|>"},
         {"single_word", false},
         {"lstrip", false},
         {"rstrip", false},
         {"normalized", true},
         {"special", true}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "ByteLevel"},
        {"add_prefix_space", false},
        {"trim_offsets", true},
        {"use_regex", true}}},
      {"post_processor",
       {{"type", "ByteLevel"},
        {"add_prefix_space", true},
        {"trim_offsets", false},
        {"use_regex", true}}},
      {"decoder",
       {{"type", "ByteLevel"},
        {"add_prefix_space", true},
        {"trim_offsets", true},
        {"use_regex", true}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"vocab", vocab},
        {"merges", merges}}},
  };
  return doc.dump(2);
}

// The GPT-2 tokenizer from vocab.json + merges.txt, loaded once for all tests; null (with the
// reason in *error) when loading failed.
inline const Tokenizer* gpt2_or_null(std::string* error = nullptr) {
  static std::string load_error;
  static std::unique_ptr<Tokenizer> tok = [] {
    Result<std::unique_ptr<Tokenizer>> t = load_tokenizer(gpt2_dir());
    if (!t) load_error = t.message();
    return t ? std::move(t).value() : nullptr;
  }();
  if (error != nullptr) *error = load_error;
  return tok.get();
}

// Only after KVLM_REQUIRE_GPT2_TOKENIZER(), which checks that it loaded.
inline const Tokenizer& gpt2() {
  return *gpt2_or_null();
}

}  // namespace kvlm::gpt2_test
