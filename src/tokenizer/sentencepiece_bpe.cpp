#include "tokenizer/sentencepiece_bpe.h"

#include <algorithm>
#include <cstdio>
#include <iterator>

namespace kvlm {
namespace {

// The length of the valid UTF-8 character at text[i], or 0 when the bytes there are not one
// (a stray continuation byte, an overlong form, a surrogate, a truncated sequence).
size_t utf8_char_length(std::string_view text, size_t i) {
  const auto lead = static_cast<unsigned char>(text[i]);
  size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) {
    len = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    len = 3;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    len = 4;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (text.size() - i < len) return 0;
  for (size_t k = 1; k < len; ++k) {
    const auto c = static_cast<unsigned char>(text[i + k]);
    if (k == 1 ? (c < lo || c > hi) : (c & 0xC0) != 0x80) return 0;
  }
  return len;
}

void replace_all(std::string* s, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  std::string out;
  size_t pos = 0;
  for (size_t at; (at = s->find(from, pos)) != std::string::npos; pos = at + from.size()) {
    out.append(*s, pos, at - pos);
    out += to;
  }
  out.append(*s, pos);
  *s = std::move(out);
}

// The byte of a "<0xNN>" token (either case of hex digit, as Hugging Face's ByteFallback
// decoder reads it), or -1.
int byte_token_value(std::string_view piece) {
  if (piece.size() != 6 || !piece.starts_with("<0x") || piece[5] != '>') return -1;
  int value = 0;
  for (char c : piece.substr(3, 2)) {
    int d = -1;
    if (c >= '0' && c <= '9') d = c - '0';
    if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    if (d < 0) return -1;
    value = value * 16 + d;
  }
  return value;
}

}  // namespace

Result<std::unique_ptr<SentencePieceBpe>> SentencePieceBpe::create(SentencePieceModel model) {
  auto bpe = std::unique_ptr<SentencePieceBpe>(new SentencePieceBpe(std::move(model)));
  const SentencePieceModel& m = bpe->model_;
  const auto n_vocab = static_cast<int32_t>(m.pieces.size());
  auto in_vocab = [&](int32_t id) { return id >= 0 && id < n_vocab && m.present[id]; };
  if (m.present.size() != m.pieces.size()) {
    return Status::error(m.source + ": internal error: piece and presence lists differ in size");
  }
  for (const MergeRule& r : m.merges) {
    if (!in_vocab(r.left) || !in_vocab(r.right) || !in_vocab(r.merged)) {
      return Status::error(m.source + ": a merge refers to an id outside the vocabulary");
    }
  }
  std::vector<bool> special(m.pieces.size(), false);
  for (int32_t id : m.special_ids) {
    if (!in_vocab(id)) {
      return Status::error(m.source + ": special token id " + std::to_string(id) +
                           " is outside the vocabulary");
    }
    special[id] = true;
  }
  // Special tokens are only produced by allow_special, never from ordinary text.
  for (int32_t id = 0; id < n_vocab; ++id) {
    if (m.present[id] && !special[id]) bpe->ids_.emplace(m.pieces[id], id);
  }
  std::fill(std::begin(bpe->byte_ids_), std::end(bpe->byte_ids_), -1);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    auto it = bpe->ids_.find(name);
    if (it == bpe->ids_.end()) {
      return Status::error(m.source + ": model.byte_fallback is true but model.vocab has no \"" +
                           name +
                           "\" token (byte fallback needs all 256 byte tokens <0x00>..<0xFF>)");
    }
    bpe->byte_ids_[b] = it->second;
  }
  bpe->bytes_.resize(m.pieces.size());
  for (int32_t id = 0; id < n_vocab; ++id) bpe->bytes_[id] = bpe->token_text(id, false);
  for (const SentencePieceDecoder::Step& step : m.decoder.steps)
    bpe->first_token_differs_ |= step.drop_in_first;
  return bpe;
}

SentencePieceBpe::SentencePieceBpe(SentencePieceModel model)
    : model_(std::move(model)), merges_(model_.merges) {}

std::string SentencePieceBpe::token_text(int32_t id, bool first) const {
  std::string text = model_.pieces[id];
  for (const SentencePieceDecoder::Step& step : model_.decoder.steps) {
    switch (step.kind) {
      case SentencePieceDecoder::Step::Kind::kReplace:
        replace_all(&text, step.from, step.to);
        break;
      case SentencePieceDecoder::Step::Kind::kByteFallback:
        if (const int byte = byte_token_value(text); byte >= 0)
          text.assign(1, static_cast<char>(byte));
        break;
      case SentencePieceDecoder::Step::Kind::kMetaspace:
        replace_all(&text, step.from, first && step.drop_in_first ? "" : " ");
        break;
    }
  }
  return text;
}

std::vector<std::string> SentencePieceBpe::pretokenize(std::string_view stretch, bool first) const {
  const SentencePieceNormalizer& n = model_.normalizer;
  std::string text(stretch);
  for (const SentencePieceNormalizer::Step& step : n.steps) {
    if (step.prepend) {
      if (!text.empty()) text.insert(0, step.text);
    } else {
      replace_all(&text, step.from, step.text);
    }
  }
  std::vector<std::string> pieces;
  if (n.replacement.empty()) {
    if (!text.empty()) pieces.push_back(std::move(text));
    return pieces;
  }
  replace_all(&text, " ", n.replacement);
  const bool prepend = n.prepend == SentencePieceNormalizer::Prepend::kAlways ||
                       (n.prepend == SentencePieceNormalizer::Prepend::kFirst && first);
  if (prepend && !text.starts_with(n.replacement)) text.insert(0, n.replacement);
  if (!n.split) {
    if (!text.empty()) pieces.push_back(std::move(text));
    return pieces;
  }
  // Each replacement starts a new piece (Hugging Face's MergedWithNext).
  size_t begin = 0;
  for (size_t at = text.find(n.replacement, 1); at != std::string::npos;
       at = text.find(n.replacement, at + n.replacement.size())) {
    if (at > begin) pieces.push_back(text.substr(begin, at - begin));
    begin = at;
  }
  if (begin < text.size()) pieces.push_back(text.substr(begin));
  return pieces;
}

void SentencePieceBpe::encode_piece(std::string_view piece, std::vector<int32_t>* out) const {
  if (model_.ignore_merges) {  // Hugging Face's BPE looks the whole piece up first
    if (auto it = ids_.find(piece); it != ids_.end()) {
      out->push_back(it->second);
      return;
    }
  }
  std::vector<int32_t> ids;
  ids.reserve(piece.size());
  for (size_t i = 0; i < piece.size();) {
    size_t len = utf8_char_length(piece, i);
    if (len > 0) {
      if (auto it = ids_.find(piece.substr(i, len)); it != ids_.end()) {
        ids.push_back(it->second);
        i += len;
        continue;
      }
    } else {
      len = 1;  // not UTF-8: the byte stands alone
    }
    for (size_t k = 0; k < len; ++k)
      ids.push_back(byte_ids_[static_cast<unsigned char>(piece[i + k])]);
    i += len;
  }
  bpe_merge(merges_, &ids);
  out->insert(out->end(), ids.begin(), ids.end());
}

std::vector<int32_t> SentencePieceBpe::encode(std::string_view text, bool allow_special) const {
  std::vector<int32_t> ids;
  // Stretches between special tokens are normalized separately, as Hugging Face does: each
  // gets its own Prepend, and only the one at the very start counts as first.
  auto encode_stretch = [&](size_t begin, size_t end) {
    if (begin == end) return;
    for (const std::string& piece : pretokenize(text.substr(begin, end - begin), begin == 0))
      encode_piece(piece, &ids);
  };
  size_t pos = 0;
  while (allow_special && pos < text.size()) {
    // The earliest special token's text, the longest when several start at one place.
    size_t best_at = std::string_view::npos;
    int32_t best_id = -1;
    for (int32_t id : model_.special_ids) {
      const std::string& s = model_.pieces[id];
      if (s.empty()) continue;
      const size_t at = text.find(s, pos);
      if (at == std::string_view::npos) continue;
      if (at < best_at || (at == best_at && s.size() > model_.pieces[best_id].size())) {
        best_at = at;
        best_id = id;
      }
    }
    if (best_id < 0) break;
    encode_stretch(pos, best_at);
    ids.push_back(best_id);
    pos = best_at + model_.pieces[best_id].size();
  }
  encode_stretch(pos, text.size());
  return ids;
}

Result<std::string_view> SentencePieceBpe::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size()) {
    return Status::error("token id " + std::to_string(id) + " is outside the vocabulary (ids 0.." +
                         std::to_string(vocab_size() - 1) + " in " + model_.source + ")");
  }
  if (!model_.present[id]) {
    return Status::error("token id " + std::to_string(id) + " has no token in " + model_.source);
  }
  return std::string_view(bytes_[id]);
}

Result<std::string> SentencePieceBpe::decode(std::span<const int32_t> ids) const {
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) {
    Result<std::string_view> bytes = token_bytes(ids[i]);
    KVLM_RETURN_IF_ERROR(bytes);
    if (i == 0 && first_token_differs_) {
      text += token_text(ids[i], true);
    } else {
      text += bytes.value();
    }
  }
  const SentencePieceDecoder& d = model_.decoder;
  size_t begin = 0, end = text.size();
  while (begin < end && begin < static_cast<size_t>(d.strip_start) && text[begin] == d.strip_char)
    ++begin;
  while (end > begin && text.size() - end < static_cast<size_t>(d.strip_stop) &&
         text[end - 1] == d.strip_char)
    --end;
  return text.substr(begin, end - begin);
}

}  // namespace kvlm
