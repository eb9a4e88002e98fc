// The parts of BPE vocabulary files that every format shares: the JSON object of token -> id
// (vocab.json, encoder.json, tokenizer.json's model.vocab), merges as written ("left right" or
// ["left", "right"]) and their resolution to ids, and quoting of tokens for error messages.
// Tokens stay as the file spells them ("Ġthe", "▁the"); what they stand for is each format's
// business.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kvlm/status.h"
#include "tokenizer/bpe_merge.h"
#include "tokenizer/json_cursor.h"

namespace kvlm {

// Generous for any real vocabulary; keeps a corrupt id from allocating gigabytes.
constexpr int64_t kMaxVocab = int64_t{1} << 24;

// A token or line for an error message: quoted, control characters escaped, long ones cut.
std::string quote(std::string_view s);

// Tokens as written in the file, with where each was written.
struct VocabEntries {
  std::vector<std::string> text;  // [n_vocab]
  std::vector<size_t> offset;     // [n_vocab] byte offset of the token in the file
  std::vector<bool> present;      // [n_vocab]
  std::unordered_map<std::string, int32_t> id_of;

  // Records `token` at `id` (growing the lists); the caller has checked both are new.
  void add(const std::string& token, size_t id, size_t at);
};

// Reads a JSON object of token -> id at the cursor. Fails, naming the place, on a duplicate
// token or id and on ids outside 0..kMaxVocab-1.
Status read_vocab_object(JsonCursor& json, VocabEntries* vocab);

// A merge as the file writes it, before its tokens are looked up.
struct RawMerge {
  std::string left, right;
  size_t offset;  // in the file, for messages
};

// Reads one tokenizer.json merge at the cursor: "left right" (older files) or ["left", "right"].
Status read_merge(JsonCursor& json, size_t at, std::vector<RawMerge>* merges);

// Turns left + right into a merge rule. where() names the place for messages; it is only called
// on error, since finding a line in a large file is not free.
template <typename Where>
Result<MergeRule> resolve_merge(const std::string& left, const std::string& right,
                                const VocabEntries& vocab, const std::string& vocab_file,
                                Where&& where) {
  MergeRule rule{};
  for (const std::string* part : {&left, &right}) {
    auto it = vocab.id_of.find(*part);
    if (it == vocab.id_of.end()) {
      return Status::error(where() + ": the merge names token " + quote(*part) +
                           ", which is not in the vocabulary (" + vocab_file + ")");
    }
    (part == &left ? rule.left : rule.right) = it->second;
  }
  auto it = vocab.id_of.find(left + right);
  if (it == vocab.id_of.end()) {
    return Status::error(where() + ": the merge of " + quote(left) + " and " + quote(right) +
                         " makes " + quote(left + right) + ", which is not in the vocabulary (" +
                         vocab_file + ")");
  }
  rule.merged = it->second;
  return rule;
}

}  // namespace kvlm
