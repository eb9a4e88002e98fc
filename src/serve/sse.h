// Server-Sent Events framing of a streamed response, as OpenAI streams: one `data: <json>`
// event per chunk, a blank line after each, and `data: [DONE]` last. A JSON text never holds a
// raw newline (json_text escapes them), so each event is a single data line.
#pragma once

#include <string>

#include "serve/json_text.h"

namespace kvlm::serve {

inline std::string sse_event(const Json& chunk) {
  return "data: " + json_text(chunk) + "\n\n";
}

inline std::string sse_done() {
  return "data: [DONE]\n\n";
}

// A comment line: clients ignore it (the SSE rule for lines starting with ':').
inline std::string sse_comment(const std::string& text) {
  return ": " + text + "\n\n";
}

}  // namespace kvlm::serve
