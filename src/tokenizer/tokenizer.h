// Tokenizer: text <-> token ids, whatever the model's vocabulary format. The engine and the
// command-line program only see this interface; load_tokenizer() picks the implementation from
// the files it finds (GPT-2 byte-level BPE today; llama2.c's tokenizer.bin slots into the same
// factory).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvlm/status.h"

namespace kvlm {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Encodes any byte string; never fails (byte-level vocabularies cover every byte, invalid UTF-8
  // included). With allow_special, the text of a special token such as "<|endoftext|>" becomes
  // that token's id; without it, that text is ordinary text (OpenAI's encode, tiktoken's
  // encode_ordinary). Safe to call from several threads at once.
  virtual std::vector<int32_t> encode(std::string_view text, bool allow_special) const = 0;

  // The bytes of token `id`. The view lives as long as the tokenizer. Fails for an id outside
  // the vocabulary.
  virtual Result<std::string_view> token_bytes(int32_t id) const = 0;

  // The concatenated bytes of `ids`, which need not be valid UTF-8 (a token can hold part of a
  // character). Fails, naming the id and the vocabulary size, for an id outside the vocabulary.
  virtual Result<std::string> decode(std::span<const int32_t> ids) const;

  // One more than the largest id.
  virtual int32_t vocab_size() const = 0;

  // Ids of end-of-text and beginning-of-text, when the vocabulary has them (GPT-2 uses
  // <|endoftext|> for both).
  virtual std::optional<int32_t> eos_id() const = 0;
  virtual std::optional<int32_t> bos_id() const = 0;

  // Where the vocabulary came from, e.g. "/models/gpt2/vocab.json + merges.txt".
  virtual const std::string& source() const = 0;
};

// Loads a tokenizer from `path`: a folder holding tokenizer.json, vocab.json + merges.txt, or
// encoder.json + vocab.bpe (tried in that order), or a tokenizer.json file itself. A folder with
// none of these is an error that lists what was looked for.
Result<std::unique_ptr<Tokenizer>> load_tokenizer(const std::string& path);

}  // namespace kvlm
