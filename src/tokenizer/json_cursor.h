// JsonCursor: a small pull reader for the JSON of vocabulary files that knows where it is, so
// an error can name the line and column (nlohmann::json keeps no positions once parsed, and a
// duplicate id is only found after parsing). It reads strings, integers and objects/arrays on
// demand and skips whatever the caller does not ask for.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kvlm/status.h"

namespace kvlm {

class JsonCursor {
 public:
  // `file` is only used in error messages; `text` must outlive the cursor.
  JsonCursor(std::string_view text, std::string file) : text_(text), file_(std::move(file)) {}

  // Byte offset of the next unread character (after skipping whitespace).
  size_t offset();
  // The whole text being read (for taking out a value's spelling between two offsets).
  std::string_view text() const { return text_; }
  // "FILE line L, column C" for a byte offset.
  std::string where(size_t offset) const;
  // An error at `offset`: "FILE line L, column C: message".
  Status error_at(size_t offset, const std::string& message) const;

  Status expect(char c);
  // Consumes c and returns true when it is the next character.
  bool consume(char c);
  // Consumes a literal such as "null" and returns true when it comes next.
  bool consume_literal(std::string_view word);
  // The next character, or '\0' at the end.
  char peek();
  bool at_end();

  Result<std::string> read_string();
  Result<int64_t> read_integer();
  Result<bool> read_bool();
  Status skip_value();

  // Calls f(key, key_offset) for each member of the object that starts here; f must consume
  // the member's value and return a Status.
  template <typename F>
  Status read_object(F&& f) {
    KVLM_RETURN_IF_ERROR(expect('{'));
    if (consume('}')) return Status::ok();
    while (true) {
      const size_t key_offset = offset();
      Result<std::string> key = read_string();
      KVLM_RETURN_IF_ERROR(key);
      KVLM_RETURN_IF_ERROR(expect(':'));
      KVLM_RETURN_IF_ERROR(f(key.value(), key_offset));
      if (consume('}')) return Status::ok();
      KVLM_RETURN_IF_ERROR(expect(','));
    }
  }

  // Calls f(index, element_offset) for each element of the array that starts here.
  template <typename F>
  Status read_array(F&& f) {
    KVLM_RETURN_IF_ERROR(expect('['));
    if (consume(']')) return Status::ok();
    for (size_t index = 0;; ++index) {
      KVLM_RETURN_IF_ERROR(f(index, offset()));
      if (consume(']')) return Status::ok();
      KVLM_RETURN_IF_ERROR(expect(','));
    }
  }

 private:
  void skip_whitespace();
  std::string describe_next() const;  // "'x'" or "end of file", for "expected ..., found ..."
  Status skip_literal();
  // The escape at pos_ (a backslash) inside the string that opened at string_start.
  Status read_escape(size_t string_start, std::string* out);
  Status read_unicode_escape(size_t escape_at, std::string* out);  // after "\\u"
  bool read_hex4(uint32_t* value);
  Status skip_container(int depth);

  std::string_view text_;
  std::string file_;
  size_t pos_ = 0;
};

}  // namespace kvlm
