// The tokenizer a GGUF file carries (tokenizer.ggml.*), built through kvlm's own classes:
//   model "gpt2":  byte-level BPE from tokens + merges (GPT-2's byte-level spelling), the
//                  pre-tokenizer named by `pre` (gpt-2 / default, or llama-bpe: Llama 3's);
//   model "llama": SentencePiece pieces + scores (run.c's encoder, "▁" read as a space), with
//                  <unk>, <s>, </s> at 0, 1, 2 and the byte pieces at 3..258.
// BOS/EOS ids and the add-BOS flag come from their keys. Lengths of tokens, scores, token types
// and special ids are checked against each other before use.
#pragma once

#include <memory>
#include <string>

#include "model/gguf.h"
#include "tokenizer/tokenizer.h"

namespace kvlm {

Result<std::unique_ptr<Tokenizer>> gguf_tokenizer(const GgufFile& file);
Result<std::unique_ptr<Tokenizer>> load_gguf_tokenizer(const std::string& path);

}  // namespace kvlm
