// TextStream: one sequence's generated tokens turned into printable text as they arrive:
// bytes decoded incrementally (only whole UTF-8 characters leave), then --stop strings matched
// across token boundaries (the stop text is never emitted). Shared by the CLI and, later, the
// server, so both stream and stop identically.
#pragma once

#include <string>
#include <vector>

#include "generate/sampler_stop.h"
#include "tokenizer/incremental_decoder.h"
#include "tokenizer/tokenizer.h"

namespace kvlm {

class TextStream {
 public:
  // The tokenizer must outlive the stream. `stops` are validated (errors name --stop).
  static Result<TextStream> create(const Tokenizer& tokenizer, std::vector<std::string> stops);

  struct Step {
    std::string emit;      // text safe to show now
    bool stopped = false;  // a stop string completed
  };
  Result<Step> push(int32_t token);
  // End of generation: what is still held back (a partial character, a possible stop prefix).
  std::string finish();
  // All text emitted so far, including finish()'s.
  const std::string& text() const { return text_; }
  bool stopped() const { return matcher_.stopped(); }

 private:
  TextStream(const Tokenizer& tokenizer, StopMatcher matcher)
      : decoder_(tokenizer), matcher_(std::move(matcher)) {}
  IncrementalDecoder decoder_;
  StopMatcher matcher_;
  std::string text_;
};

}  // namespace kvlm
