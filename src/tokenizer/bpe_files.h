// Loaders for the files byte-level BPE vocabularies come in. Each checks what it reads and
// names the file, line and column of the first problem: malformed JSON, a merge line that is
// not two tokens, a merge naming a token the vocabulary lacks, two tokens sharing an id.
#pragma once

#include <string>

#include "tokenizer/byte_level_bpe.h"

namespace kvlm {

// A JSON object of token -> id and a merges list, one "left right" pair per line in rank order
// after an optional "#version" line: Hugging Face's vocab.json + merges.txt or OpenAI's
// encoder.json + vocab.bpe (the same formats).
Result<BpeModel> load_vocab_and_merges(const std::string& vocab_path,
                                       const std::string& merges_path);

// Hugging Face's tokenizer.json with a BPE model. Only GPT-2's byte-level pre-tokenizer is
// supported (another pattern would split text differently), so anything else is an error that
// says what the file asks for.
Result<BpeModel> load_tokenizer_json(const std::string& path);

}  // namespace kvlm
