// SentencePieceBpe: the BPE of Llama 2, TinyLlama and Mistral as Hugging Face's tokenizer.json
// describes it (model.type "BPE" with byte_fallback). Spaces are written as "▁" (U+2581) and a
// "▁" goes before the text, so "Hello world" is BPE'd as "▁Hello▁world". BPE starts from one
// symbol per UTF-8 character; a character the vocabulary lacks becomes its bytes' <0xNN>
// tokens. Merges then go by rank, lowest first, leftmost on ties, as in Hugging Face's BPE.
//
// How "▁" gets into the text is what the file says:
//  * older files: a normalizer Sequence of Prepend("▁") and Replace(" " -> "▁"), run on each
//    stretch of text between special tokens (so " Hi" becomes "▁▁Hi");
//  * newer files: a Metaspace pre-tokenizer: spaces become "▁", and "▁" is prepended unless
//    the text already starts with one, on the first stretch only (prepend_scheme "first") or on
//    every one ("always"); with split, each "▁" starts a piece of its own.
// Decoding follows the file's decoder: "▁" is a space, <0xNN> is that byte, and the space the
// encoder added at the start of the text is dropped (Strip after Fuse, or Metaspace's first-token
// rule). Bytes that are not valid UTF-8 are returned as they are (Hugging Face would write U+FFFD)
// so that streamed text can assemble characters split over tokens.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/bpe_merge.h"
#include "tokenizer/tokenizer.h"

namespace kvlm {

// Where "▁" comes from, read from the normalizer and pre_tokenizer.
struct SentencePieceNormalizer {
  // The normalizer's steps, applied in order to each stretch of text: Prepend (when `prepend`,
  // `text` goes before a non-empty stretch) or Replace (every `from` becomes `text`).
  struct Step {
    bool prepend = false;
    std::string from;
    std::string text;
  };
  std::vector<Step> steps;

  // The Metaspace pre-tokenizer; `replacement` empty when the file has none.
  enum class Prepend { kAlways, kFirst, kNever };
  std::string replacement;
  Prepend prepend = Prepend::kAlways;
  bool split = true;
};

// The decoder, read from a Sequence of Replace, ByteFallback, Fuse, Strip and Metaspace steps.
struct SentencePieceDecoder {
  // What happens to each token's text, in the file's order.
  struct Step {
    enum class Kind { kReplace, kByteFallback, kMetaspace };
    Kind kind = Kind::kReplace;
    std::string from;            // kReplace: the text replaced; kMetaspace: the replacement ("▁")
    std::string to;              // kReplace: what replaces it (kMetaspace: always a space)
    bool drop_in_first = false;  // kMetaspace: in the first token it reads as nothing
  };
  std::vector<Step> steps;
  // Strip after Fuse: up to strip_start leading and strip_stop trailing `strip_char`s of the
  // whole text are removed.
  char strip_char = ' ';
  int strip_start = 0;
  int strip_stop = 0;
};

struct SentencePieceModel {
  std::vector<std::string> pieces;   // [n_vocab] as the file writes them ("▁the", "<0x0A>")
  std::vector<bool> present;         // [n_vocab] false for ids the file never assigns
  std::vector<MergeRule> merges;     // by rank
  std::vector<int32_t> special_ids;  // matched as whole strings when allow_special
  bool ignore_merges = false;        // a piece that is a token is that token, unmerged
  SentencePieceNormalizer normalizer;
  SentencePieceDecoder decoder;
  std::optional<int32_t> bos_id;
  std::optional<int32_t> eos_id;
  bool add_bos = false;  // the post-processor puts bos_id before the text
  std::string source;    // the file, for messages
};

class SentencePieceBpe final : public Tokenizer {
 public:
  // Fails when a byte has no <0xNN> token (the byte fallback could not encode some text) or a
  // merge or special id is outside the vocabulary.
  static Result<std::unique_ptr<SentencePieceBpe>> create(SentencePieceModel model);

  // Any byte string: a byte that is not part of valid UTF-8 is encoded as its <0xNN> token.
  std::vector<int32_t> encode(std::string_view text, bool allow_special) const override;
  // The token's text as the decoder writes it inside a text: "▁" a space, <0xNN> one byte.
  Result<std::string_view> token_bytes(int32_t id) const override;
  // token_bytes joined, the start of the text as the decoder leaves it (see the header comment).
  Result<std::string> decode(std::span<const int32_t> ids) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(model_.pieces.size()); }
  std::optional<int32_t> eos_id() const override { return model_.eos_id; }
  std::optional<int32_t> bos_id() const override { return model_.bos_id; }
  bool add_bos() const override { return model_.add_bos && model_.bos_id.has_value(); }
  const std::string& source() const override { return model_.source; }

 private:
  explicit SentencePieceBpe(SentencePieceModel model);
  // The text BPE runs on for one stretch between special tokens, split into pieces; `first`
  // when the stretch starts the text.
  std::vector<std::string> pretokenize(std::string_view stretch, bool first) const;
  void encode_piece(std::string_view piece, std::vector<int32_t>* out) const;
  // Token `id`'s text after the decoder's per-token steps; `first` for the text's first token.
  std::string token_text(int32_t id, bool first) const;

  SentencePieceModel model_;
  MergeTable merges_;
  std::unordered_map<std::string_view, int32_t> ids_;  // ordinary pieces -> id
  int32_t byte_ids_[256];                              // <0xNN> of each byte
  std::vector<std::string> bytes_;                     // [n_vocab] what token_bytes returns
  bool first_token_differs_ = false;                   // a Metaspace step drops in the first
};

}  // namespace kvlm
