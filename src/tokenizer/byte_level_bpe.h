// ByteLevelBpe: GPT-2's tokenizer, and those built the same way (Llama 3's). Text is split by a
// pre-tokenizer (GPT-2's pattern, or the one a tokenizer.json names), each piece's bytes start
// as one token each, and BPE merges them by rank. Pieces seen before come from a merge cache,
// since in prose most words repeat.
#pragma once

#include <mutex>
#include <string>
#include <unordered_map>

#include "tokenizer/bpe_merge.h"
#include "tokenizer/merge_cache.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"

namespace kvlm {

// A byte-level BPE vocabulary in byte form, as the file loaders produce it.
struct BpeModel {
  std::vector<std::string> tokens;   // [n_vocab] each token's bytes ("Ġthe" is stored as " the")
  std::vector<bool> present;         // [n_vocab] false for ids no file assigned
  std::vector<MergeRule> merges;     // by rank
  std::vector<int32_t> special_ids;  // matched as whole strings when allow_special
  std::optional<int32_t> eos_id;
  std::optional<int32_t> bos_id;
  bool add_bos = false;              // prompts start with bos_id (Llama 3's post-processor)
  std::string pretokenizer_pattern;  // empty: GPT-2's
  bool ignore_merges = false;        // a piece that is a token is that token, unmerged
  std::string source;                // files it came from, for messages
};

class ByteLevelBpe final : public Tokenizer {
 public:
  // Fails when some byte has no single-byte token (then some text could not be encoded).
  static Result<std::unique_ptr<ByteLevelBpe>> create(BpeModel model);

  // When PCRE2 gives up on a tokenizer.json's pattern (see Pretokenizer::split), encode() takes
  // the rest of the text one byte per token (still decoding to the text); try_encode() fails.
  std::vector<int32_t> encode(std::string_view text, bool allow_special) const override;
  Result<std::vector<int32_t>> try_encode(std::string_view text, bool allow_special) const override;
  Result<std::string_view> token_bytes(int32_t id) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(model_.tokens.size()); }
  std::optional<int32_t> eos_id() const override { return model_.eos_id; }
  std::optional<int32_t> bos_id() const override { return model_.bos_id; }
  bool add_bos() const override { return model_.add_bos && model_.bos_id.has_value(); }
  const std::string& source() const override { return model_.source; }

  const MergeTable& merge_table() const { return merges_; }
  // The vocabulary as loaded (tokens, merges by rank, pattern): what a GGUF writer stores.
  const BpeModel& model() const { return model_; }

  // Encoding with the merge cache switched off, for tests and the benchmark.
  void set_cache_enabled(bool enabled) { cache_enabled_ = enabled; }
  void clear_cache() const;

 private:
  ByteLevelBpe(BpeModel model, Pretokenizer pretokenizer);
  Status encode_into(std::string_view text, bool allow_special, bool bytes_on_error,
                     std::vector<int32_t>* out) const;
  // `cache` may be null (another thread holds it, or caching is off).
  Status encode_ordinary(std::string_view text, MergeCache* cache, bool bytes_on_error,
                         std::vector<int32_t>* out) const;

  BpeModel model_;
  Pretokenizer pretokenizer_;
  MergeTable merges_;
  int32_t byte_ids_[256];  // the single-byte token of each byte
  // With ignore_merges: every ordinary token's bytes -> its id (views into model_.tokens).
  std::unordered_map<std::string_view, int32_t> whole_tokens_;

  // One thread at a time uses the cache: encode() takes it with try_lock for the whole call, and
  // a thread that finds it busy encodes without it rather than waiting.
  bool cache_enabled_ = true;
  mutable std::mutex cache_mutex_;
  mutable MergeCache cache_;
};

}  // namespace kvlm
