// What a Hugging Face tokenizer.json's pipeline members (normalizer, pre_tokenizer, decoder,
// post_processor) ask for, read into the plain settings of the two kinds of BPE kvlm runs.
// Anything else is refused with a message that names the file, the place, the member, what kvlm
// expected and what it found: a tokenizer must not encode text differently without a word.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "kvlm/status.h"
#include "tokenizer/sentencepiece_bpe.h"

namespace kvlm {

// One pipeline member as the file has it.
struct JsonComponent {
  std::string name;              // "pre_tokenizer"
  nlohmann::ordered_json value;  // null when the member is absent or null (members in file order)
  std::string where;             // "FILE line L, column C" of the member, for messages
};

// Whether the normalizer or pre-tokenizer writes spaces as "▁" the SentencePiece way (a Prepend
// or Replace normalizer, a Metaspace pre-tokenizer), whatever else they hold.
bool uses_metaspace(const JsonComponent& normalizer, const JsonComponent& pre_tokenizer);

// The byte-level kind: normalizer null, and pre_tokenizer ByteLevel (GPT-2's pattern: returns
// "") or a Sequence of Split (a Regex or String, behavior "Isolated", not inverted) and
// ByteLevel with use_regex false (Llama 3's: returns the Split's pattern, a String escaped).
// add_prefix_space must be false.
Result<std::string> read_byte_level_pattern(const JsonComponent& normalizer,
                                            const JsonComponent& pre_tokenizer);

// The SentencePiece kind's normalizer (null, or a Sequence of Prepend and Replace with String
// patterns) and pre-tokenizer (null or Metaspace).
Result<SentencePieceNormalizer> read_sentencepiece_normalizer(const JsonComponent& normalizer,
                                                              const JsonComponent& pre_tokenizer);

// The SentencePiece kind's decoder: Replace (String patterns), ByteFallback, Fuse, Strip (after
// Fuse, one-byte content) and Metaspace, alone or in a Sequence.
Result<SentencePieceDecoder> read_sentencepiece_decoder(const JsonComponent& decoder);

// The special token a TemplateProcessing post-processor (alone or in a Sequence) puts before the
// text of a single sequence, when it puts exactly one there ("<s>", "<|begin_of_text|>").
struct TemplateBos {
  std::string token;
  std::optional<int64_t> id;  // from the template's special_tokens, when it lists one
};
std::optional<TemplateBos> read_template_bos(const JsonComponent& post_processor);

}  // namespace kvlm
