// GPT-2's pre-tokenizer: splits text into the pieces that BPE merges within, using OpenAI's
// pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// with Unicode categories from PCRE2. Two details make it exact to OpenAI's encoder, which ran
// the pattern with Python's `regex` module:
//  * `\s` is spelled out as Python's set (Unicode White_Space). PCRE2's \s also matches U+180E
//    (it adds all of \h), which Python's does not. Both include U+0085 and exclude U+FEFF.
//  * Any byte string is accepted, as GPT-2 works on bytes. PCRE2 is run with
//    PCRE2_MATCH_INVALID_UTF, so a byte that is not part of valid UTF-8 can never be inside a
//    match; each run of such bytes becomes a piece of its own. (OpenAI's encoder only takes valid
//    text, so there is nothing to match there; this keeps decode(encode(x)) == x for any x.)
// ASCII, most of real text, is split by a hand-written scanner that defers to PCRE2 whenever it
// would have to classify a non-ASCII byte; a test checks the two agree.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "kvlm/status.h"

namespace kvlm {

struct Piece {
  size_t begin;  // byte offsets into the text
  size_t end;
};

class Gpt2Pretokenizer {
 public:
  static Result<Gpt2Pretokenizer> create();

  // Appends the pieces of text[pos..] in order, stopping after about max_pieces (one more at
  // most), and returns where the next call resumes: text.size() when done. Resuming where a piece
  // ends gives the same pieces as one pass, since the pattern never looks behind; this lets the
  // encoder work through a large text in small batches.
  size_t split(std::string_view text, size_t pos, size_t max_pieces,
               std::vector<Piece>* pieces) const;

  // All pieces of `text`, in order; they cover it exactly.
  void split(std::string_view text, std::vector<Piece>* pieces) const;

  // The same, using PCRE2 for every piece (the reference the fast path is tested against).
  void split_regex_only(std::string_view text, std::vector<Piece>* pieces) const;

 private:
  struct Regex;  // PCRE2's compiled code, kept out of this header
  explicit Gpt2Pretokenizer(std::shared_ptr<const Regex> regex) : regex_(std::move(regex)) {}
  size_t split_impl(std::string_view text, size_t pos, size_t max_pieces, bool fast_ascii,
                    std::vector<Piece>* pieces) const;

  std::shared_ptr<const Regex> regex_;  // immutable once compiled, so copies can share it
};

}  // namespace kvlm
