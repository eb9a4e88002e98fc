// The byte-level pre-tokenizer: splits text into the pieces that BPE merges within, with a regular
// expression. By default that is GPT-2's, OpenAI's pattern
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
//
// Other patterns come from a Hugging Face tokenizer.json's Split pre-tokenizer (Llama 3's, for
// one) and run on PCRE2 alone, with `\s` and `\S` rewritten to the same White_Space set (the
// Rust `onig` engine Hugging Face uses follows Unicode's White_Space too). Text between matches
// becomes a piece of its own, as a Split with behavior "Isolated" does.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kvlm/status.h"

namespace kvlm {

struct Piece {
  size_t begin;  // byte offsets into the text
  size_t end;
};

class Pretokenizer {
 public:
  // GPT-2's pattern, with the ASCII scanner.
  static Result<Pretokenizer> create();
  // Any pattern (PCRE2 syntax, which covers the Perl-style patterns of tokenizer.json files,
  // (?i:...) included). An error names the offset PCRE2 rejected; `source` starts the message.
  static Result<Pretokenizer> create(std::string_view pattern, const std::string& source);

  // Appends the pieces of text[pos..] in order, stopping after about max_pieces (one more at
  // most), and returns where the next call resumes: text.size() when done. Resuming where a piece
  // ends gives the same pieces as one pass, since the pattern never looks behind; this lets the
  // encoder work through a large text in small batches. Pieces are never empty, also for a
  // pattern that can match the empty string. Fails, naming the place, when PCRE2 gives up
  // (its match or depth limit, which a pattern that backtracks badly can reach): the pieces
  // would then be wrong.
  Result<size_t> split(std::string_view text, size_t pos, size_t max_pieces,
                       std::vector<Piece>* pieces) const;

  // All pieces of `text`, in order; they cover it exactly.
  Status split(std::string_view text, std::vector<Piece>* pieces) const;

  // The same, using PCRE2 for every piece (the reference the fast path is tested against).
  Status split_regex_only(std::string_view text, std::vector<Piece>* pieces) const;

  // Whether the ASCII scanner is used (GPT-2's pattern, however it was given).
  bool has_ascii_scanner() const { return fast_ascii_; }

 private:
  struct Regex;  // PCRE2's compiled code, kept out of this header
  Pretokenizer(std::shared_ptr<const Regex> regex, bool fast_ascii, std::string source)
      : regex_(std::move(regex)), fast_ascii_(fast_ascii), source_(std::move(source)) {}
  static Result<Pretokenizer> compile(const std::string& pcre2_pattern, bool fast_ascii,
                                      const std::string& source);
  Result<size_t> split_impl(std::string_view text, size_t pos, size_t max_pieces, bool fast_ascii,
                            std::vector<Piece>* pieces) const;

  std::shared_ptr<const Regex> regex_;  // immutable once compiled, so copies can share it
  bool fast_ascii_;
  std::string source_;  // where the pattern came from, for messages
};

// The name the GPT-2 code and the benchmark know it by.
using Gpt2Pretokenizer = Pretokenizer;

// `pattern` with \s and \S spelled out as Unicode's White_Space set, outside and inside
// character classes (where \S is left to PCRE2, which has no way to subtract inside a class).
// Exposed for tests.
std::string spell_out_whitespace(std::string_view pattern);

}  // namespace kvlm
