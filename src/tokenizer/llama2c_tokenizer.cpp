#include "tokenizer/llama2c_tokenizer.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <queue>
#include <sstream>

namespace kvlm {

namespace {

// A piece as run.c sees it: a C string, ending at its first NUL byte.
std::string_view c_string(std::string_view s) {
  const size_t nul = s.find('\0');
  return nul == std::string_view::npos ? s : s.substr(0, nul);
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// run.c's sscanf(piece, "<0x%02hhX>", &byte): "<0x" then one or two hex digits (what follows
// them is not checked, as sscanf does not report on the trailing '>'). -1 when it fails.
int parse_byte_piece(std::string_view piece) {
  if (piece.size() < 4 || piece.substr(0, 3) != "<0x") return -1;
  const int hi = hex_digit(piece[3]);
  if (hi < 0) return -1;
  const int lo = piece.size() > 4 ? hex_digit(piece[4]) : -1;
  return lo < 0 ? hi : hi * 16 + lo;
}

// isprint || isspace in the C locale (run.c never calls setlocale).
bool printable_or_space(unsigned char b) {
  return (b >= 0x20 && b <= 0x7e) || b == '\t' || b == '\n' || b == '\v' || b == '\f' || b == '\r';
}

}  // namespace

Result<std::unique_ptr<Llama2cTokenizer>> Llama2cTokenizer::load(const std::string& path,
                                                                 int expected_vocab) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error(path + ": cannot open the tokenizer file");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) return Status::error(path + ": read error");
  return parse(bytes.str(), path, expected_vocab);
}

Result<std::unique_ptr<Llama2cTokenizer>> Llama2cTokenizer::parse(std::string_view bytes,
                                                                  const std::string& source,
                                                                  int expected_vocab) {
  std::unique_ptr<Llama2cTokenizer> t(new Llama2cTokenizer());
  t->source_ = source;
  const std::string where = source + " (llama2.c tokenizer.bin): ";
  size_t at = 0;
  auto read_i32 = [&](int32_t* out) {
    std::memcpy(out, bytes.data() + at, 4);
    at += 4;
  };
  if (bytes.size() < 4)
    return Status::error(source + ": not a tokenizer file kvlm knows: it ends after " +
                         std::to_string(bytes.size()) +
                         " bytes, before a llama2.c tokenizer.bin's 4-byte max_token_length");
  int32_t max_len;
  read_i32(&max_len);
  if (max_len < 0)
    return Status::error(where + "max_token_length is " + std::to_string(max_len) +
                         ", expected a non-negative length");
  t->max_token_length_ = max_len;
  auto ended_early = [&](const std::string& what) {
    std::string message = where + "ends early: " + std::to_string(bytes.size()) + " bytes, " +
                          what + " of token " + std::to_string(t->pieces_.size());
    if (expected_vocab > 0)
      message += " (expected " + std::to_string(expected_vocab) + " tokens, the model's vocab)";
    return Status::error(message);
  };
  while (expected_vocab > 0 ? t->pieces_.size() < static_cast<size_t>(expected_vocab)
                            : at < bytes.size()) {
    if (bytes.size() - at < 8)
      return ended_early(at == bytes.size() ? "before the score and length"
                                            : "inside the score and length");
    float score;
    std::memcpy(&score, bytes.data() + at, 4);
    at += 4;
    int32_t len;
    read_i32(&len);
    if (len < 0)
      return Status::error(where + "token " + std::to_string(t->pieces_.size()) + " has length " +
                           std::to_string(len) + ", expected >= 0");
    if (bytes.size() - at < static_cast<size_t>(len))
      return ended_early("inside the " + std::to_string(len) + "-byte piece");
    t->scores_.push_back(score);
    t->pieces_.emplace_back(bytes.substr(at, len));
    at += len;
  }
  if (at != bytes.size())
    return Status::error(where + std::to_string(bytes.size() - at) + " bytes follow the " +
                         std::to_string(expected_vocab) +
                         " tokens the model's vocab_size asks for: tokenizer and model differ");
  return from_pieces(std::move(t->pieces_), std::move(t->scores_), source, max_len);
}

Result<std::unique_ptr<Llama2cTokenizer>> Llama2cTokenizer::from_pieces(
    std::vector<std::string> pieces, std::vector<float> scores, const std::string& source,
    int max_token_length) {
  const std::string where = source + " (llama2.c tokenizer.bin): ";
  if (pieces.size() != scores.size())
    return Status::error(where + std::to_string(pieces.size()) + " pieces but " +
                         std::to_string(scores.size()) + " scores");
  std::unique_ptr<Llama2cTokenizer> t(new Llama2cTokenizer());
  t->source_ = source;
  t->max_token_length_ = max_token_length;
  t->pieces_ = std::move(pieces);
  t->scores_ = std::move(scores);
  const size_t kNeeded = kFirstByteToken + 256;
  if (t->pieces_.size() < kNeeded)
    return Status::error(where + "holds " + std::to_string(t->pieces_.size()) +
                         " tokens; run.c's byte fallback needs at least " +
                         std::to_string(kNeeded) + " (<unk>, BOS, EOS, <0x00>..<0xFF>)");
  // run.c's byte fallback maps byte b to id b + 3, so those ids must be the byte pieces. This
  // also tells a tokenizer.bin from other .bin files (a llama2.c model.bin, say).
  for (int b = 0; b < 256; ++b) {
    char expected[8];
    std::snprintf(expected, sizeof(expected), "<0x%02X>", b);
    const std::string& piece = t->pieces_[kFirstByteToken + b];
    if (piece != expected)
      return Status::error(where + "token " + std::to_string(kFirstByteToken + b) + " is \"" +
                           piece.substr(0, 16) + "\", expected \"" + expected +
                           "\" (llama2.c tokenizers keep the 256 byte tokens at ids 3..258)");
  }
  for (size_t id = 0; id < t->pieces_.size(); ++id)
    t->ids_.emplace(c_string(t->pieces_[id]), static_cast<int32_t>(id));  // first id wins
  t->byte_chars_.resize(256);
  for (int b = 0; b < 256; ++b) t->byte_chars_[b] = static_cast<char>(b);
  return t;
}

int32_t Llama2cTokenizer::lookup(std::string_view text) const {
  const auto it = ids_.find(c_string(text));
  return it == ids_.end() ? -1 : it->second;
}

std::vector<int32_t> Llama2cTokenizer::encode(std::string_view text, bool allow_special) const {
  (void)allow_special;
  return encode(text, false, false);
}

std::vector<int32_t> Llama2cTokenizer::encode(std::string_view text, bool bos, bool eos) const {
  text = c_string(text);
  std::vector<int32_t> tokens;
  if (bos) tokens.push_back(kBos);
  if (!text.empty()) {
    // run.c's add_dummy_prefix. It would push -1 for a vocabulary without " "; we skip it.
    const int32_t space = lookup(" ");
    if (space >= 0) tokens.push_back(space);
  }
  append_characters(text, &tokens);
  std::vector<int32_t> out = merge_pairs(tokens);
  if (eos) out.push_back(kEos);
  return out;
}

// One piece per UTF-8 character (at most 4 bytes), else one byte token per byte. This is
// run.c's loop as written, so malformed UTF-8 splits exactly where run.c splits it.
void Llama2cTokenizer::append_characters(std::string_view text,
                                         std::vector<int32_t>* tokens) const {
  std::string buffer;
  for (size_t c = 0; c < text.size(); ++c) {
    const unsigned char byte = text[c];
    if ((byte & 0xC0) != 0x80) buffer.clear();
    buffer.push_back(static_cast<char>(byte));
    const unsigned char next = c + 1 < text.size() ? text[c + 1] : 0;
    if ((next & 0xC0) == 0x80 && buffer.size() < 4) continue;
    const int32_t id = lookup(buffer);
    if (id >= 0) {
      tokens->push_back(id);
    } else {
      for (unsigned char b : buffer) tokens->push_back(static_cast<int32_t>(b) + kFirstByteToken);
    }
    buffer.clear();
  }
}

std::vector<int32_t> Llama2cTokenizer::merge_pairs(const std::vector<int32_t>& tokens) const {
  // Merges. run.c rescans all adjacent pairs and merges the one whose concatenated piece has
  // the highest score (the leftmost on ties; scores must beat -1e10), until none is in the
  // vocabulary. A heap over the pairs, with stale entries skipped, does the same merges in the
  // same order in O(n log n): symbols stay in text order, so the smallest left index is the
  // leftmost pair.
  struct Symbol {
    int32_t id;
    int prev, next;
    int version;
  };
  struct Candidate {
    float score;
    int left, right;
    int left_version, right_version;
    int32_t merged;
  };
  auto lower_priority = [](const Candidate& a, const Candidate& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  std::priority_queue<Candidate, std::vector<Candidate>, decltype(lower_priority)> heap(
      lower_priority);
  const int n = static_cast<int>(tokens.size());
  std::vector<Symbol> symbols(n);
  for (int i = 0; i < n; ++i) symbols[i] = {tokens[i], i - 1, i + 1 < n ? i + 1 : -1, 0};
  std::string pair;
  auto consider = [&](int left) {
    if (left < 0 || symbols[left].next < 0) return;
    const int right = symbols[left].next;
    pair.assign(c_string(pieces_[symbols[left].id]));
    pair.append(c_string(pieces_[symbols[right].id]));
    const int32_t merged = lookup(pair);
    if (merged < 0 || !(scores_[merged] > -1e10f)) return;
    heap.push(
        {scores_[merged], left, right, symbols[left].version, symbols[right].version, merged});
  };
  for (int i = 0; i + 1 < n; ++i) consider(i);
  while (!heap.empty()) {
    const Candidate top = heap.top();
    heap.pop();
    Symbol& left = symbols[top.left];
    if (left.version != top.left_version || left.next != top.right ||
        symbols[top.right].version != top.right_version)
      continue;  // one side has changed since this pair was scored
    Symbol& right = symbols[top.right];
    left.id = top.merged;
    ++left.version;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.left;
    right.version = -1;  // removed: never matches a candidate again
    right.next = -1;
    consider(left.prev);
    consider(top.left);
  }
  std::vector<int32_t> out;
  out.reserve(tokens.size() + 1);
  for (int i = n > 0 ? 0 : -1; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
  return out;
}

Result<std::string_view> Llama2cTokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size())
    return Status::error("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                         std::to_string(vocab_size()) + ") of " + source_);
  const int byte = parse_byte_piece(pieces_[id]);
  if (byte >= 0) return std::string_view(&byte_chars_[byte], 1);
  return std::string_view(pieces_[id]);
}

std::string_view Llama2cTokenizer::piece_after(int32_t prev_token, int32_t token) const {
  std::string_view piece = c_string(pieces_[token]);
  if (prev_token == kBos && !piece.empty() && piece[0] == ' ') piece.remove_prefix(1);
  const int byte = parse_byte_piece(piece);
  if (byte >= 0) return std::string_view(&byte_chars_[byte], byte == 0 ? 0 : 1);
  return piece;
}

std::string_view Llama2cTokenizer::printed_piece(int32_t prev_token, int32_t token) const {
  const std::string_view piece = piece_after(prev_token, token);
  if (piece.size() == 1 && !printable_or_space(static_cast<unsigned char>(piece[0]))) return {};
  return piece;
}

Result<std::string> Llama2cTokenizer::decode(std::span<const int32_t> ids) const {
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) {
    KVLM_RETURN_IF_ERROR(token_bytes(ids[i]));  // range check with a clear message
    text += piece_after(i > 0 ? ids[i - 1] : -1, ids[i]);
  }
  return text;
}

Result<std::string> Llama2cTokenizer::run_c_output(std::span<const int32_t> ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    KVLM_RETURN_IF_ERROR(token_bytes(ids[i]));
    if (i == 0) continue;  // run.c feeds the first token and prints only what follows it
    if (ids[i] == kBos) break;
    out += printed_piece(ids[i - 1], ids[i]);
  }
  out += '\n';
  return out;
}

int llama2c_steps_to_max_new(int steps, size_t n_prompt_ids) {
  const int64_t n = static_cast<int64_t>(steps) + 1 - static_cast<int64_t>(n_prompt_ids);
  return n > 0 ? static_cast<int>(n) : 0;
}

}  // namespace kvlm
