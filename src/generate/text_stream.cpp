#include "generate/text_stream.h"

namespace kvlm {

Result<TextStream> TextStream::create(const Tokenizer& tokenizer, std::vector<std::string> stops) {
  KVLM_ASSIGN_OR_RETURN(auto matcher, StopMatcher::create(std::move(stops)));
  return TextStream(tokenizer, std::move(matcher));
}

Result<TextStream::Step> TextStream::push(int32_t token) {
  Step step;
  if (matcher_.stopped()) {
    step.stopped = true;
    return step;
  }
  KVLM_ASSIGN_OR_RETURN(auto piece, decoder_.push(token));
  StopMatcher::Step matched = matcher_.feed(piece);
  step.emit = std::move(matched.emit);
  step.stopped = matched.stopped;
  text_ += step.emit;
  return step;
}

std::string TextStream::finish() {
  if (matcher_.stopped()) return "";
  StopMatcher::Step matched = matcher_.feed(decoder_.flush());
  std::string rest = matched.emit;
  if (!matched.stopped) rest += matcher_.flush();
  text_ += rest;
  return rest;
}

}  // namespace kvlm
