// Loaders for the files byte-level BPE vocabularies come in. Each checks what it reads and
// names the file, line and column of the first problem: malformed JSON, a merge line that is
// not two tokens, a merge naming a token the vocabulary lacks, two tokens sharing an id.
// (Hugging Face's tokenizer.json is read by tokenizer_json.h, which uses the helpers here.)
#pragma once

#include <string>
#include <string_view>

#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/json_cursor.h"
#include "tokenizer/vocab_json.h"

namespace kvlm {

// A JSON object of token -> id and a merges list, one "left right" pair per line in rank order
// after an optional "#version" line: Hugging Face's vocab.json + merges.txt or OpenAI's
// encoder.json + vocab.bpe (the same formats).
Result<BpeModel> load_vocab_and_merges(const std::string& vocab_path,
                                       const std::string& merges_path);
// The same from the two files' bytes held in memory; the paths name them in errors.
Result<BpeModel> parse_vocab_and_merges(std::string_view vocab_text, const std::string& vocab_path,
                                        std::string_view merges_text,
                                        const std::string& merges_path);

// Converts the byte-level text of each token ("Ġthe") to its bytes (" the") into `model`'s tokens
// and presence flags; a character outside GPT-2's alphabet is an error at the token's place.
Status byte_level_vocab_to_model(const VocabEntries& vocab, const JsonCursor& json,
                                 BpeModel* model);

// GPT-2 marks the end of a text (and, having nothing else, the start) with <|endoftext|>: when
// the vocabulary has it, it becomes eos_id, bos_id and a special token.
void set_end_of_text(const VocabEntries& vocab, BpeModel* model);

}  // namespace kvlm
