#include "tokenizer/incremental_decoder.h"

namespace kvlm {
namespace {

// How many bytes the character starting with lead byte c has; 0 if c cannot start one.
int sequence_length(unsigned char c) {
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return 2;
  if (c >= 0xE0 && c <= 0xEF) return 3;
  if (c >= 0xF0 && c <= 0xF4) return 4;
  return 0;  // a continuation byte, or C0, C1, F5..FF which never appear in UTF-8
}

// Whether c can be the second byte after lead byte `lead`: the ranges that exclude overlong
// forms, surrogates and code points past U+10FFFF.
bool valid_second_byte(unsigned char lead, unsigned char c) {
  if (lead == 0xE0) return c >= 0xA0 && c <= 0xBF;
  if (lead == 0xED) return c >= 0x80 && c <= 0x9F;
  if (lead == 0xF0) return c >= 0x90 && c <= 0xBF;
  if (lead == 0xF4) return c >= 0x80 && c <= 0x8F;
  return (c & 0xC0) == 0x80;
}

}  // namespace

size_t complete_utf8_prefix(std::string_view bytes) {
  const size_t n = bytes.size();
  // Only the last 3 bytes can belong to an unfinished character (4-byte maximum).
  const size_t first = n >= 3 ? n - 3 : 0;
  for (size_t start = n; start-- > first;) {
    const auto lead = static_cast<unsigned char>(bytes[start]);
    if ((lead & 0xC0) == 0x80) continue;  // continuation byte: keep looking for its lead
    const int len = sequence_length(lead);
    const size_t have = n - start;
    if (len <= 1 || have >= static_cast<size_t>(len)) return n;  // complete, or never valid
    // An unfinished character is held only if what has arrived can still become valid.
    for (size_t k = 1; k < have; ++k) {
      const auto c = static_cast<unsigned char>(bytes[start + k]);
      const bool ok = k == 1 ? valid_second_byte(lead, c) : (c & 0xC0) == 0x80;
      if (!ok) return n;
    }
    return start;
  }
  return n;
}

Result<std::string> IncrementalDecoder::push(int32_t id) {
  Result<std::string_view> bytes = tokenizer_->token_bytes(id);
  KVLM_RETURN_IF_ERROR(bytes);
  pending_ += bytes.value();
  const size_t ready = complete_utf8_prefix(pending_);
  std::string out = pending_.substr(0, ready);
  pending_.erase(0, ready);
  return out;
}

std::string IncrementalDecoder::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace kvlm
