#include "generate/text_stream.h"

namespace kvlm {

Result<TextStream> TextStream::create(const Tokenizer& tokenizer, std::vector<std::string> stops) {
  auto matcher = StopMatcher::create(std::move(stops));
  if (!matcher) return matcher.status();
  return TextStream(tokenizer, std::move(matcher.value()));
}

Result<TextStream::Step> TextStream::push(int32_t token) {
  Step step;
  if (matcher_.stopped()) {
    step.stopped = true;
    return step;
  }
  auto piece = decoder_.push(token);
  if (!piece) return piece.status();
  StopMatcher::Step matched = matcher_.feed(piece.value());
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
