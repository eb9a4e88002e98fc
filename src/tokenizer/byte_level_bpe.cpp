#include "tokenizer/byte_level_bpe.h"

#include <algorithm>
#include <cstdio>
#include <iterator>

namespace kvlm {

Result<std::unique_ptr<ByteLevelBpe>> ByteLevelBpe::create(BpeModel model) {
  Result<Pretokenizer> pretokenizer =
      model.pretokenizer_pattern.empty()
          ? Pretokenizer::create()
          : Pretokenizer::create(model.pretokenizer_pattern, model.source + ": pre_tokenizer");
  KVLM_RETURN_IF_ERROR(pretokenizer);
  auto bpe = std::unique_ptr<ByteLevelBpe>(
      new ByteLevelBpe(std::move(model), std::move(pretokenizer).value()));
  const BpeModel& m = bpe->model_;
  const auto n_vocab = static_cast<int32_t>(m.tokens.size());
  auto in_vocab = [&](int32_t id) { return id >= 0 && id < n_vocab && m.present[id]; };
  if (m.present.size() != m.tokens.size()) {
    return Status::error(m.source + ": internal error: token and presence lists differ in size");
  }
  for (const MergeRule& r : m.merges) {
    if (!in_vocab(r.left) || !in_vocab(r.right) || !in_vocab(r.merged)) {
      return Status::error(m.source + ": a merge refers to an id outside the vocabulary");
    }
  }
  // Special tokens are only produced by allow_special, never by merging ordinary text, so a
  // special token whose text is one byte must not stand for that byte.
  std::vector<bool> special(m.tokens.size(), false);
  for (int32_t id : m.special_ids) {
    if (!in_vocab(id)) {
      return Status::error(m.source + ": special token id " + std::to_string(id) +
                           " is outside the vocabulary");
    }
    special[id] = true;
  }
  std::fill(std::begin(bpe->byte_ids_), std::end(bpe->byte_ids_), -1);
  for (int32_t id = 0; id < n_vocab; ++id) {
    const std::string& t = m.tokens[id];
    if (m.present[id] && !special[id] && t.size() == 1) {
      int32_t& slot = bpe->byte_ids_[static_cast<unsigned char>(t[0])];
      if (slot < 0) slot = id;
    }
  }
  if (m.ignore_merges) {
    for (int32_t id = 0; id < n_vocab; ++id) {
      if (m.present[id] && !special[id]) bpe->whole_tokens_.emplace(m.tokens[id], id);
    }
  }
  for (int b = 0; b < 256; ++b) {
    if (bpe->byte_ids_[b] < 0) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", b);
      return Status::error(m.source + ": the vocabulary has no token for byte " + hex +
                           " (a byte-level BPE vocabulary needs all 256)");
    }
  }
  return bpe;
}

ByteLevelBpe::ByteLevelBpe(BpeModel model, Pretokenizer pretokenizer)
    : model_(std::move(model)), pretokenizer_(std::move(pretokenizer)), merges_(model_.merges) {}

void ByteLevelBpe::clear_cache() const {
  std::lock_guard<std::mutex> lock(cache_mutex_);
  cache_.clear();
}

std::vector<int32_t> ByteLevelBpe::encode(std::string_view text, bool allow_special) const {
  std::vector<int32_t> ids;
  encode_into(text, allow_special, /*bytes_on_error=*/true, &ids);
  return ids;
}

Result<std::vector<int32_t>> ByteLevelBpe::try_encode(std::string_view text,
                                                      bool allow_special) const {
  std::vector<int32_t> ids;
  KVLM_RETURN_IF_ERROR(encode_into(text, allow_special, /*bytes_on_error=*/false, &ids));
  return ids;
}

Status ByteLevelBpe::encode_into(std::string_view text, bool allow_special, bool bytes_on_error,
                                 std::vector<int32_t>* out) const {
  std::vector<int32_t>& ids = *out;
  ids.reserve(text.size() / 3);
  std::unique_lock<std::mutex> lock(cache_mutex_, std::try_to_lock);
  MergeCache* cache = cache_enabled_ && lock.owns_lock() ? &cache_ : nullptr;
  if (!allow_special || model_.special_ids.empty()) {
    return encode_ordinary(text, cache, bytes_on_error, &ids);
  }
  // Cut the text at each special token's text (the earliest, then the longest at one place).
  size_t pos = 0;
  while (pos < text.size()) {
    size_t best_at = std::string_view::npos;
    int32_t best_id = -1;
    for (int32_t id : model_.special_ids) {
      const std::string& s = model_.tokens[id];
      if (s.empty()) continue;
      const size_t at = text.find(s, pos);
      if (at == std::string_view::npos) continue;
      if (at < best_at || (at == best_at && s.size() > model_.tokens[best_id].size())) {
        best_at = at;
        best_id = id;
      }
    }
    if (best_id < 0) break;
    KVLM_RETURN_IF_ERROR(
        encode_ordinary(text.substr(pos, best_at - pos), cache, bytes_on_error, &ids));
    ids.push_back(best_id);
    pos = best_at + model_.tokens[best_id].size();
  }
  return encode_ordinary(text.substr(pos), cache, bytes_on_error, &ids);
}

Status ByteLevelBpe::encode_ordinary(std::string_view text, MergeCache* cache, bool bytes_on_error,
                                     std::vector<int32_t>* out) const {
  // Pieces come in batches, so a large text needs no offsets array of its own size.
  constexpr size_t kBatch = 4096;
  std::vector<Piece> pieces;
  pieces.reserve(kBatch + 1);
  std::vector<int32_t> ids;  // one piece's ids while merging
  for (size_t pos = 0; pos < text.size();) {
    pieces.clear();
    Result<size_t> next = pretokenizer_.split(text, pos, kBatch, &pieces);
    if (!next) {
      if (!bytes_on_error) return next.status();
      for (char c : text.substr(pos)) out->push_back(byte_ids_[static_cast<unsigned char>(c)]);
      return Status::ok();
    }
    pos = next.value();
    for (const Piece& p : pieces) {
      const std::string_view piece = text.substr(p.begin, p.end - p.begin);
      if (piece.size() == 1) {
        out->push_back(byte_ids_[static_cast<unsigned char>(piece[0])]);
        continue;
      }
      if (model_.ignore_merges) {  // Hugging Face's BPE looks the whole piece up first
        if (auto it = whole_tokens_.find(piece); it != whole_tokens_.end()) {
          out->push_back(it->second);
          continue;
        }
      }
      const uint64_t hash = cache ? MergeCache::hash(piece) : 0;
      if (cache && cache->lookup(piece, hash, out)) continue;
      ids.clear();
      for (char c : piece) ids.push_back(byte_ids_[static_cast<unsigned char>(c)]);
      bpe_merge(merges_, &ids);
      out->insert(out->end(), ids.begin(), ids.end());
      if (cache) cache->insert(piece, hash, ids.data(), ids.size());
    }
  }
  return Status::ok();
}

Result<std::string_view> ByteLevelBpe::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size()) {
    return Status::error("token id " + std::to_string(id) + " is outside the vocabulary (ids 0.." +
                         std::to_string(vocab_size() - 1) + " in " + model_.source + ")");
  }
  if (!model_.present[id]) {
    return Status::error("token id " + std::to_string(id) + " has no token in " + model_.source);
  }
  return std::string_view(model_.tokens[id]);
}

}  // namespace kvlm
