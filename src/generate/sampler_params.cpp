#include "kvlm/sampling.h"

#include <cmath>
#include <sstream>
#include <string>

namespace kvlm {

namespace {

std::string number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

Status bad(const char* flag, const char* expected, double found) {
  return Status::error(std::string(flag) + ": expected " + expected + ", found " + number(found));
}

}  // namespace

Status SamplingParams::validate() const {
  // Comparisons are written so that NaN fails them (every comparison with NaN is false).
  if (!(temperature >= 0.0f) || std::isinf(temperature))
    return bad("--temperature", "a finite number >= 0 (0 means greedy)", temperature);
  if (top_k < 0) return bad("--top-k", "an integer >= 0 (0 means off)", top_k);
  if (!(top_p > 0.0f && top_p <= 1.0f))
    return bad("--top-p", "a number in (0, 1] (1 means off)", top_p);
  if (!(min_p >= 0.0f && min_p < 1.0f))
    return bad("--min-p", "a number in [0, 1) (0 means off)", min_p);
  if (!(repetition_penalty > 0.0f) || std::isinf(repetition_penalty))
    return bad("--repeat-penalty", "a finite number > 0 (1 means off)", repetition_penalty);
  if (!std::isfinite(presence_penalty))
    return bad("--presence-penalty", "a finite number (0 means off)", presence_penalty);
  if (!std::isfinite(frequency_penalty))
    return bad("--frequency-penalty", "a finite number (0 means off)", frequency_penalty);
  return Status::ok();
}

}  // namespace kvlm
