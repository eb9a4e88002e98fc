// IncrementalDecoder: turns a stream of token ids into text that is safe to print as it comes.
// A byte-level token can end in the middle of a UTF-8 character (an emoji is often two or three
// tokens), so each push returns only complete characters and holds back a trailing partial one
// until the next token completes it. Bytes that can never become a valid character (invalid
// UTF-8) are passed through rather than held, so the concatenation of everything returned plus
// flush() is exactly the tokens' token_bytes(): decode(ids), except that a SentencePiece-style
// decode() drops the space its encoder put at the start of a text (see tokenizer.h). Streamed
// text continues a prompt, so it keeps that space.
#pragma once

#include <string>

#include "tokenizer/tokenizer.h"

namespace kvlm {

class IncrementalDecoder {
 public:
  // The tokenizer must outlive the decoder.
  explicit IncrementalDecoder(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}

  // The text completed by token `id` (possibly empty). Fails for an id outside the vocabulary,
  // leaving the held bytes as they were.
  Result<std::string> push(int32_t id);

  // Whatever is still held (an incomplete character at the end of the stream); resets.
  std::string flush();

  // Bytes held back now.
  size_t pending_size() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  std::string pending_;  // an incomplete UTF-8 character, at most 3 bytes
};

// The length of the longest prefix of `bytes` that does not end inside a UTF-8 character that
// the following bytes could still complete. Exposed for tests.
size_t complete_utf8_prefix(std::string_view bytes);

}  // namespace kvlm
