#include "tokenizer/byte_unicode.h"

#include <array>
#include <cstdio>

namespace kvlm {
namespace {

constexpr bool is_printable_byte(int b) {
  return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
}

constexpr std::array<uint16_t, 256> make_byte_to_cp() {
  std::array<uint16_t, 256> table{};
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    table[b] = static_cast<uint16_t>(is_printable_byte(b) ? b : next++);
  }
  return table;
}

constexpr std::array<uint16_t, 256> kByteToCp = make_byte_to_cp();

// Decodes one UTF-8 character at text[*pos]; returns -1 (and advances one byte) when invalid.
int32_t next_code_point(std::string_view text, size_t* pos) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  const size_t i = *pos;
  const unsigned c = s[i];
  int len = 0;
  uint32_t cp = 0;
  uint32_t min = 0;
  if (c < 0x80) {
    *pos = i + 1;
    return static_cast<int32_t>(c);
  } else if ((c & 0xE0) == 0xC0) {
    len = 2, cp = c & 0x1F, min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3, cp = c & 0x0F, min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4, cp = c & 0x07, min = 0x10000;
  } else {
    *pos = i + 1;
    return -1;
  }
  if (i + len > n) {
    *pos = i + 1;
    return -1;
  }
  for (int k = 1; k < len; ++k) {
    if ((s[i + k] & 0xC0) != 0x80) {
      *pos = i + 1;
      return -1;
    }
    cp = (cp << 6) | (s[i + k] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    *pos = i + 1;
    return -1;
  }
  *pos = i + len;
  return static_cast<int32_t>(cp);
}

}  // namespace

uint32_t byte_to_code_point(uint8_t b) {
  return kByteToCp[b];
}

std::optional<uint8_t> code_point_to_byte(uint32_t cp) {
  if (cp < 256 && is_printable_byte(static_cast<int>(cp))) return static_cast<uint8_t>(cp);
  // The 68 remapped bytes are 256.. in byte order: find the one with this code point.
  if (cp >= 256 && cp < 256 + 68) {
    for (int b = 0; b < 256; ++b) {
      if (kByteToCp[b] == cp) return static_cast<uint8_t>(b);
    }
  }
  return std::nullopt;
}

Result<std::string> byte_level_to_bytes(std::string_view token) {
  std::string bytes;
  bytes.reserve(token.size());
  size_t pos = 0;
  while (pos < token.size()) {
    const size_t at = pos;
    const int32_t cp = next_code_point(token, &pos);
    if (cp < 0) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "invalid UTF-8 (byte 0x%02X at offset %zu)",
                    static_cast<unsigned char>(token[at]), at);
      return Status::error(buf);
    }
    const std::optional<uint8_t> b = code_point_to_byte(static_cast<uint32_t>(cp));
    if (!b) {
      char buf[128];
      std::snprintf(buf, sizeof buf,
                    "character U+%04X is not in GPT-2's byte-level alphabet (not a byte-level "
                    "BPE vocabulary?)",
                    static_cast<unsigned>(cp));
      return Status::error(buf);
    }
    bytes.push_back(static_cast<char>(*b));
  }
  return bytes;
}

std::string bytes_to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) append_utf8(kByteToCp[static_cast<unsigned char>(c)], &out);
  return out;
}

void append_utf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace kvlm
