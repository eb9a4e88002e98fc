// GPT-2's byte-level alphabet. Vocabulary files are text, so GPT-2 writes every byte as a
// printable Unicode character: bytes that are already printable (33-126, 161-172, 174-255)
// stand for themselves and the other 68 take code points 256, 257, ... in byte order (OpenAI's
// bytes_to_unicode()). A vocabulary token such as "Ġthe" is the byte string " the".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kvlm/status.h"

namespace kvlm {

// The character that stands for byte b in vocabulary files.
uint32_t byte_to_code_point(uint8_t b);

// The byte that code point cp stands for, or nullopt when cp is outside the alphabet.
std::optional<uint8_t> code_point_to_byte(uint32_t cp);

// "Ġthe" -> " the". Fails when the token is not valid UTF-8 or holds a character outside the
// 256-character alphabet; the message names that character.
Result<std::string> byte_level_to_bytes(std::string_view token);

// " the" -> "Ġthe" (UTF-8). The inverse of byte_level_to_bytes.
std::string bytes_to_byte_level(std::string_view bytes);

// Appends code point cp to out as UTF-8.
void append_utf8(uint32_t cp, std::string* out);

}  // namespace kvlm
