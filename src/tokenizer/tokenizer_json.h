// Hugging Face's tokenizer.json: one file holding the vocabulary, the merges, the added (special)
// tokens and the pipeline around the model. kvlm reads two kinds, chosen by what the file says:
//
//  * byte-level BPE (model.type "BPE", no byte_fallback): GPT-2's (pre_tokenizer ByteLevel) and
//    Llama 3's (pre_tokenizer Sequence of a Split regex and ByteLevel without its own regex),
//    run by ByteLevelBpe with the file's pattern; model.ignore_merges is honoured;
//  * SentencePiece-style BPE (model.type "BPE" with byte_fallback, spaces written as "▁" by a
//    Prepend/Replace normalizer or a Metaspace pre-tokenizer): Llama 2, TinyLlama, Mistral,
//    run by SentencePieceBpe.
//
// The post-processor's template says whether prompts start with a BOS token (add_bos()).
// Other model types (Unigram, WordPiece, WordLevel) and pipelines kvlm does not implement are
// errors naming the file, the place, the member, what was expected and what was found.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "tokenizer/tokenizer.h"

namespace kvlm {

Result<std::unique_ptr<Tokenizer>> load_tokenizer_json(const std::string& path);
// The same from the file's bytes held in memory; `source` names them in errors. The tokenizer
// keeps no reference to `text`.
Result<std::unique_ptr<Tokenizer>> parse_tokenizer_json(std::string_view text,
                                                        const std::string& source);

}  // namespace kvlm
