#include "tokenizer/json_cursor.h"

#include <algorithm>
#include <cstdio>

#include "tokenizer/byte_unicode.h"

namespace kvlm {
namespace {

// Files nest far less than this; the limit keeps a hostile file from overflowing the stack.
constexpr int kMaxDepth = 64;

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

void JsonCursor::skip_whitespace() {
  while (pos_ < text_.size()) {
    const char c = text_[pos_];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
    ++pos_;
  }
}

size_t JsonCursor::offset() {
  skip_whitespace();
  return pos_;
}

std::string JsonCursor::where(size_t offset) const {
  offset = std::min(offset, text_.size());
  const std::string_view before = text_.substr(0, offset);
  const size_t line = 1 + static_cast<size_t>(std::count(before.begin(), before.end(), '\n'));
  const size_t line_start = before.rfind('\n');
  const size_t column = line_start == std::string_view::npos ? offset + 1 : offset - line_start;
  return file_ + " line " + std::to_string(line) + ", column " + std::to_string(column);
}

Status JsonCursor::error_at(size_t offset, const std::string& message) const {
  return Status::error(where(offset) + ": " + message);
}

std::string JsonCursor::describe_next() const {
  if (pos_ >= text_.size()) return "end of file";
  const unsigned char c = static_cast<unsigned char>(text_[pos_]);
  char buf[32];
  if (c >= 0x20 && c < 0x7F) {
    std::snprintf(buf, sizeof buf, "'%c'", c);
  } else {
    std::snprintf(buf, sizeof buf, "byte 0x%02X", c);
  }
  return buf;
}

Status JsonCursor::expect(char c) {
  skip_whitespace();
  if (pos_ < text_.size() && text_[pos_] == c) {
    ++pos_;
    return Status::ok();
  }
  return error_at(pos_,
                  std::string("invalid JSON: expected '") + c + "', found " + describe_next());
}

bool JsonCursor::consume(char c) {
  skip_whitespace();
  if (pos_ < text_.size() && text_[pos_] == c) {
    ++pos_;
    return true;
  }
  return false;
}

bool JsonCursor::consume_literal(std::string_view word) {
  skip_whitespace();
  if (text_.substr(pos_, word.size()) != word) return false;
  pos_ += word.size();
  return true;
}

char JsonCursor::peek() {
  skip_whitespace();
  return pos_ < text_.size() ? text_[pos_] : '\0';
}

bool JsonCursor::at_end() {
  skip_whitespace();
  return pos_ >= text_.size();
}

Result<std::string> JsonCursor::read_string() {
  skip_whitespace();
  const size_t start = pos_;
  if (pos_ >= text_.size() || text_[pos_] != '"') {
    return error_at(pos_, "invalid JSON: expected a string, found " + describe_next());
  }
  ++pos_;
  std::string out;
  while (true) {
    if (pos_ >= text_.size()) return error_at(start, "invalid JSON: unterminated string");
    const char c = text_[pos_];
    if (c == '"') {
      ++pos_;
      return out;
    }
    if (static_cast<unsigned char>(c) < 0x20) {
      return error_at(pos_, "invalid JSON: raw control character in a string (must be escaped)");
    }
    if (c != '\\') {
      out.push_back(c);
      ++pos_;
      continue;
    }
    KVLM_RETURN_IF_ERROR(read_escape(start, &out));
  }
}

Status JsonCursor::read_escape(size_t string_start, std::string* out) {
  const size_t escape_at = pos_;
  if (pos_ + 1 >= text_.size()) return error_at(string_start, "invalid JSON: unterminated string");
  const char e = text_[pos_ + 1];
  pos_ += 2;
  switch (e) {
    case '"':
      out->push_back('"');
      break;
    case '\\':
      out->push_back('\\');
      break;
    case '/':
      out->push_back('/');
      break;
    case 'b':
      out->push_back('\b');
      break;
    case 'f':
      out->push_back('\f');
      break;
    case 'n':
      out->push_back('\n');
      break;
    case 'r':
      out->push_back('\r');
      break;
    case 't':
      out->push_back('\t');
      break;
    case 'u':
      return read_unicode_escape(escape_at, out);
    default:
      return error_at(escape_at, std::string("invalid JSON: unknown escape '\\") + e + "'");
  }
  return Status::ok();
}

bool JsonCursor::read_hex4(uint32_t* value) {
  if (pos_ + 4 > text_.size()) return false;
  uint32_t v = 0;
  for (int k = 0; k < 4; ++k) {
    const int h = hex_value(text_[pos_ + k]);
    if (h < 0) return false;
    v = v * 16 + static_cast<uint32_t>(h);
  }
  pos_ += 4;
  *value = v;
  return true;
}

Status JsonCursor::read_unicode_escape(size_t escape_at, std::string* out) {
  uint32_t cp = 0;
  if (!read_hex4(&cp)) {
    return error_at(escape_at, "invalid JSON: \\u must be followed by 4 hex digits");
  }
  if (cp >= 0xD800 && cp <= 0xDBFF) {
    // A character outside the BMP is written as a high and a low surrogate escape.
    uint32_t low = 0;
    bool paired = false;
    if (text_.substr(pos_, 2) == "\\u") {
      pos_ += 2;
      paired = read_hex4(&low) && low >= 0xDC00 && low <= 0xDFFF;
    }
    if (!paired) {
      return error_at(escape_at, "invalid JSON: unpaired UTF-16 surrogate in \\u escape");
    }
    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
  } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
    return error_at(escape_at, "invalid JSON: unpaired UTF-16 surrogate in \\u escape");
  }
  append_utf8(cp, out);
  return Status::ok();
}

Result<int64_t> JsonCursor::read_integer() {
  skip_whitespace();
  const size_t start = pos_;
  bool negative = false;
  if (pos_ < text_.size() && text_[pos_] == '-') {
    negative = true;
    ++pos_;
  }
  int64_t value = 0;
  size_t digits = 0;
  while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
    if (value > (int64_t{1} << 53)) return error_at(start, "integer is too large");
    value = value * 10 + (text_[pos_] - '0');
    ++pos_;
    ++digits;
  }
  const bool fraction =
      pos_ < text_.size() && (text_[pos_] == '.' || text_[pos_] == 'e' || text_[pos_] == 'E');
  if (digits == 0 || fraction) {
    pos_ = start;
    return error_at(start, "expected an integer, found " + describe_next());
  }
  return negative ? -value : value;
}

Result<bool> JsonCursor::read_bool() {
  skip_whitespace();
  if (text_.substr(pos_, 4) == "true") {
    pos_ += 4;
    return true;
  }
  if (text_.substr(pos_, 5) == "false") {
    pos_ += 5;
    return false;
  }
  return error_at(pos_, "expected true or false, found " + describe_next());
}

Status JsonCursor::skip_literal() {
  // Numbers, true, false, null: everything up to the next delimiter.
  const size_t start = pos_;
  while (pos_ < text_.size()) {
    const char c = text_[pos_];
    const bool literal_char = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '-' ||
                              c == '+' || c == '.' || c == 'E';
    if (!literal_char) break;
    ++pos_;
  }
  const std::string_view word = text_.substr(start, pos_ - start);
  const bool number = !word.empty() && (word[0] == '-' || (word[0] >= '0' && word[0] <= '9'));
  if (word == "true" || word == "false" || word == "null" || number) return Status::ok();
  pos_ = start;
  return error_at(start, "invalid JSON: expected a value, found " + describe_next());
}

Status JsonCursor::skip_container(int depth) {
  if (depth > kMaxDepth) return error_at(pos_, "invalid JSON: nested too deeply");
  skip_whitespace();
  if (pos_ >= text_.size())
    return error_at(pos_, "invalid JSON: expected a value, found end of file");
  const char c = text_[pos_];
  if (c == '"') return read_string().status();
  if (c == '{') {
    return read_object([&](const std::string&, size_t) { return skip_container(depth + 1); });
  }
  if (c == '[') return read_array([&](size_t, size_t) { return skip_container(depth + 1); });
  return skip_literal();
}

Status JsonCursor::skip_value() {
  return skip_container(0);
}

}  // namespace kvlm
