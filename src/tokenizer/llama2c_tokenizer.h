// llama2.c's tokenizer.bin (tok512.bin, tok4096.bin, the Llama 2 32000-piece vocabulary): a
// SentencePiece-style vocabulary with one score per piece, encoded and decoded exactly as
// karpathy's run.c does, so that run.c's printed text can be reproduced byte for byte.
//
// File layout (little-endian): int32 max_token_length, then for each token: float score,
// int32 length, `length` bytes. run.c reads as many tokens as the model's vocab_size; the file
// itself holds no count, so without one we read tokens until the file ends.
//
// Conventions (from run.c): ids 0, 1, 2 are <unk>, BOS and EOS; ids 3..258 are the byte
// tokens <0x00>..<0xFF>; pieces are C strings (compared up to a NUL byte).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kvlm/status.h"
#include "tokenizer/tokenizer.h"

namespace kvlm {

class Llama2cTokenizer final : public Tokenizer {
 public:
  static constexpr int32_t kBos = 1;
  static constexpr int32_t kEos = 2;
  static constexpr int32_t kFirstByteToken = 3;  // <0x00>; byte b falls back to id b + 3

  // Reads `path`. expected_vocab > 0: read exactly that many tokens (the model's vocab_size,
  // as run.c does), failing when the file ends first; 0: read tokens until the file ends.
  static Result<std::unique_ptr<Llama2cTokenizer>> load(const std::string& path,
                                                        int expected_vocab = 0);
  // Parses tokenizer.bin bytes held in memory; `source` names them in errors.
  static Result<std::unique_ptr<Llama2cTokenizer>> parse(std::string_view bytes,
                                                         const std::string& source,
                                                         int expected_vocab = 0);

  // Builds the tokenizer from pieces and scores already read (e.g. from another file format
  // holding the same SentencePiece vocabulary); the same checks as parse().
  static Result<std::unique_ptr<Llama2cTokenizer>> from_pieces(std::vector<std::string> pieces,
                                                               std::vector<float> scores,
                                                               const std::string& source,
                                                               int max_token_length = 0);

  // run.c's encode(text, bos, eos): optional BOS, a dummy-prefix " " piece when the text is not
  // empty, one piece per UTF-8 character (or byte tokens when the character has no piece), then
  // repeatedly the adjacent pair whose concatenation is the piece with the best score is merged
  // (the leftmost pair on ties), optional EOS. The text ends at its first NUL byte, as a C
  // string would.
  std::vector<int32_t> encode(std::string_view text, bool bos, bool eos) const;
  // Tokenizer interface: run.c's encoding without BOS or EOS (allow_special is ignored: run.c
  // never turns text into control tokens).
  std::vector<int32_t> encode(std::string_view text, bool allow_special) const override;

  // The bytes token `id` stands for: a byte token <0xXX> is that one byte, any other its piece.
  Result<std::string_view> token_bytes(int32_t id) const override;
  // Pieces joined as run.c's decode() gives them: after BOS a piece's leading space is dropped.
  Result<std::string> decode(std::span<const int32_t> ids) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(pieces_.size()); }
  std::optional<int32_t> eos_id() const override { return kEos; }
  std::optional<int32_t> bos_id() const override { return kBos; }
  bool add_bos() const override { return true; }  // run.c's encode(text, bos=1, ...)
  const std::string& source() const override { return source_; }

  // run.c's decode(prev_token, token): the piece of `token` as a C string, minus its leading
  // space when prev_token is BOS, the single byte for a <0xXX> piece. Both ids must be valid.
  std::string_view piece_after(int32_t prev_token, int32_t token) const;
  // What run.c's generate() prints for `token` following `prev_token`: piece_after filtered as
  // safe_printf does (a lone byte that is neither printable nor whitespace prints nothing).
  std::string_view printed_piece(int32_t prev_token, int32_t token) const;
  // run.c's whole standard output for a run whose fed-and-sampled sequence is `ids` (starting
  // with the prompt's BOS): each ids[i] printed after ids[i-1], stopping before a BOS at i >= 1
  // (run.c ends there without printing it), then run.c's final "\n". Invalid ids fail.
  Result<std::string> run_c_output(std::span<const int32_t> ids) const;

  float score(int32_t id) const { return scores_[id]; }
  const std::string& piece(int32_t id) const { return pieces_[id]; }
  int max_token_length() const { return max_token_length_; }

 private:
  Llama2cTokenizer() = default;
  // Id of the piece equal to `text` (compared as a C string), or -1.
  int32_t lookup(std::string_view text) const;
  // encode's two steps: the text's characters (or their bytes) as pieces, then run.c's merges.
  void append_characters(std::string_view text, std::vector<int32_t>* tokens) const;
  std::vector<int32_t> merge_pairs(const std::vector<int32_t>& tokens) const;

  std::string source_;
  int max_token_length_ = 0;
  std::vector<std::string> pieces_;  // as stored
  std::vector<float> scores_;
  std::unordered_map<std::string_view, int32_t> ids_;  // C-string piece -> lowest id with it
  std::string byte_chars_;                             // byte_chars_[b] == char(b)
};

// llama2.c's generate() contract, for the command-line program: run.c's `-n steps` counts
// positions including the prompt, so it generates steps + 1 - prompt_ids.size() tokens
// (prompt_ids counting BOS). Returns that count (0 when the prompt alone fills the steps).
int llama2c_steps_to_max_new(int steps, size_t n_prompt_ids);

}  // namespace kvlm
