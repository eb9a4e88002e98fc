// Tokenizer: text <-> token ids, whatever the model's vocabulary format. The engine and the
// command-line program only see this interface; load_tokenizer() picks the implementation from
// the files it finds: byte-level BPE (GPT-2's files, or a tokenizer.json such as GPT-2's or
// Llama 3's), SentencePiece-style BPE with byte fallback (a Llama 2 / Mistral tokenizer.json),
// or llama2.c's tokenizer.bin.
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

  // encode() that says when it cannot be exact: a tokenizer.json pre-tokenizer pattern that
  // PCRE2 gives up on (its match or depth limit) is an error naming the file and the byte,
  // where encode() falls back to one token per byte for the rest of the text. Front ends
  // (the CLI, the server) call this one.
  virtual Result<std::vector<int32_t>> try_encode(std::string_view text, bool allow_special) const {
    return encode(text, allow_special);
  }

  // The bytes of token `id`. The view lives as long as the tokenizer. Fails for an id outside
  // the vocabulary.
  virtual Result<std::string_view> token_bytes(int32_t id) const = 0;

  // The concatenated bytes of `ids`, which need not be valid UTF-8 (a token can hold part of a
  // character). Fails, naming the id and the vocabulary size, for an id outside the vocabulary.
  // SentencePiece-style vocabularies differ only at the start of the text: their encoders put a
  // space before the text, and decode() takes it off again as their reference decoders do
  // (Hugging Face's Strip / Metaspace decoder, run.c after BOS), while token_bytes(), and so
  // IncrementalDecoder, keep it: generated text continues a prompt, so its first space is real.
  virtual Result<std::string> decode(std::span<const int32_t> ids) const;

  // One more than the largest id.
  virtual int32_t vocab_size() const = 0;

  // Ids of end-of-text and beginning-of-text, when the vocabulary has them (GPT-2 uses
  // <|endoftext|> for both).
  virtual std::optional<int32_t> eos_id() const = 0;
  virtual std::optional<int32_t> bos_id() const = 0;

  // Whether a prompt should start with bos_id(): the model was trained on texts that begin with
  // it. Llama's tokenizers say so (Hugging Face's post-processor template "<s> $A", llama2.c's
  // run.c); GPT-2's do not. encode() never adds it, so that encode and decode stay inverses and
  // pieces of text can be encoded separately; whoever builds the prompt adds it.
  virtual bool add_bos() const { return false; }

  // Where the vocabulary came from, e.g. "/models/gpt2/vocab.json + merges.txt".
  virtual const std::string& source() const = 0;
};

// Loads a tokenizer from `path`: a folder holding tokenizer.json, vocab.json + merges.txt,
// encoder.json + vocab.bpe or tokenizer.bin (tried in that order), or one of the one-file formats
// itself (tokenizer.json, tokenizer.bin). A tokenizer.json is read as the kind its model,
// normalizer and pre-tokenizer describe (see tokenizer_json.h). A folder with none of these is
// an error that lists what was looked for.
Result<std::unique_ptr<Tokenizer>> load_tokenizer(const std::string& path);

}  // namespace kvlm
