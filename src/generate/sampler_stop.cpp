#include "generate/sampler_stop.h"

#include <algorithm>

namespace kvlm {

namespace {

// Strict UTF-8 (no overlongs, surrogates or values past U+10FFFF); returns the offset of the
// first bad byte, or npos.
size_t first_invalid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (b < 0x80) {
      len = 1;
    } else if (b >= 0xC2 && b <= 0xDF) {
      len = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
      len = 3;
      if (b == 0xE0) lo = 0xA0;
      if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      len = 4;
      if (b == 0xF0) lo = 0x90;
      if (b == 0xF4) hi = 0x8F;
    } else {
      return i;
    }
    if (i + len > s.size()) return i;
    for (size_t k = 1; k < len; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) return i;
    }
    i += len;
  }
  return std::string_view::npos;
}

}  // namespace

Result<StopMatcher> StopMatcher::create(std::vector<std::string> stops) {
  for (size_t i = 0; i < stops.size(); ++i) {
    if (stops[i].empty()) {
      return Status::error("--stop: expected a non-empty string, found an empty one (stop #" +
                           std::to_string(i + 1) + ")");
    }
    const size_t bad = first_invalid_utf8(stops[i]);
    if (bad != std::string_view::npos) {
      return Status::error("--stop: expected valid UTF-8, found an invalid byte at offset " +
                           std::to_string(bad) + " of stop #" + std::to_string(i + 1));
    }
  }
  return StopMatcher(std::move(stops));
}

StopMatcher::Step StopMatcher::feed(std::string_view piece) {
  Step step;
  if (matched_) {
    step.stopped = true;
    return step;
  }
  pending_.append(piece);

  // A complete stop string? The one that completes first (earliest end) wins, so the result
  // does not depend on how the text was cut into pieces; on a tie, the longer one (earlier
  // start), then the one listed first.
  size_t stop_at = std::string::npos, stop_end = std::string::npos;
  for (size_t s = 0; s < stops_.size(); ++s) {
    const size_t at = pending_.find(stops_[s]);
    if (at == std::string::npos) continue;
    const size_t end = at + stops_[s].size();
    if (end < stop_end || (end == stop_end && at < stop_at)) {
      stop_at = at;
      stop_end = end;
      matched_ = s;
    }
  }
  if (matched_) {
    step.emit = pending_.substr(0, stop_at);
    step.stopped = true;
    pending_.clear();
    return step;
  }

  // Hold back the longest suffix that is a proper prefix of some stop string: any stop that
  // could still complete must start there, so everything before it is safe. Because stops are
  // valid UTF-8, the cut falls on a character boundary of valid text.
  size_t keep = 0;
  for (const std::string& stop : stops_) {
    const size_t max_len = std::min(stop.size() - 1, pending_.size());
    for (size_t len = max_len; len > keep; --len) {
      if (std::string_view(pending_).substr(pending_.size() - len) ==
          std::string_view(stop).substr(0, len)) {
        keep = len;
        break;
      }
    }
  }
  step.emit = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return step;
}

std::string StopMatcher::flush() {
  std::string out;
  if (!matched_) out.swap(pending_);
  return out;
}

}  // namespace kvlm
