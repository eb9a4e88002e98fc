// StopMatcher: --stop strings matched on the decoded text stream of one sequence. Text arrives
// in pieces (one per generated token) and a stop string may span several pieces, so the
// matcher holds back any tail that could still be the start of a stop string and releases it
// once it cannot. The stop string itself, and anything after it, is never emitted. It works
// on text only (no tokenizer); one matcher per sequence.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvlm/status.h"

namespace kvlm {

class StopMatcher {
 public:
  // Errors (naming --stop) on an empty stop string or one that is not valid UTF-8. No stop
  // strings at all is fine: every piece is then emitted at once.
  static Result<StopMatcher> create(std::vector<std::string> stops);

  struct Step {
    std::string emit;      // text now safe to show; before a stop, or held back until safe
    bool stopped = false;  // a stop string completed: the sequence is finished
  };
  // Appends a decoded piece. After a stop, further pieces emit nothing and keep stopped set.
  Step feed(std::string_view piece);
  // At the end of generation without a stop (end-of-text, --max-new): the held-back text.
  std::string flush();

  bool stopped() const { return matched_.has_value(); }
  // Which stop string matched (index into the list given to create()), once stopped. The
  // text stops where a stop string first completes (its earliest end); if several end there,
  // the longest wins (the cut is earliest), then the one listed first. So the result does not
  // depend on how the text was split into pieces.
  std::optional<size_t> matched_stop() const { return matched_; }
  // Bytes currently held back (at most the longest stop string's length minus one).
  size_t held_bytes() const { return pending_.size(); }

 private:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  std::vector<std::string> stops_;
  std::string pending_;  // text received but not yet emitted
  std::optional<size_t> matched_;
};

}  // namespace kvlm
