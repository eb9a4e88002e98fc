// JSON in and out for the server. Model text need not be valid UTF-8 (echoed id prompts, a
// token holding part of a character), and nlohmann's dump() throws on that by default, so every
// body is written through json_text(), which writes U+FFFD for invalid bytes instead.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace kvlm::serve {

using Json = nlohmann::ordered_json;  // fields in the order OpenAI writes them

inline std::string json_text(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// What an error message says it found: a number or literal as written, otherwise the type
// ("string", "array", "object"): client text is not echoed, and a deeply nested value is not
// walked.
inline std::string describe(const Json& value) {
  if (value.is_string() || value.is_array() || value.is_object()) return value.type_name();
  return json_text(value);
}

}  // namespace kvlm::serve
