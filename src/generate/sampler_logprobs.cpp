#include "generate/sampler_logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace kvlm {

namespace {

// log(sum exp(logits)) with the max factored out; accumulated in double.
double log_sum_exp(std::span<const float> logits) {
  float m = -std::numeric_limits<float>::infinity();
  for (float l : logits) m = std::max(m, l);
  double total = 0.0;
  // exp in float (about twice as fast as in double; its relative error, ~1e-7, is that of
  // the logits themselves), summed in double.
  for (float l : logits) total += std::exp(l - m);
  return static_cast<double>(m) + std::log(total);
}

bool better(const TokenLogprob& a, const TokenLogprob& b) {
  return a.logprob > b.logprob || (a.logprob == b.logprob && a.id < b.id);
}

}  // namespace

void log_softmax(std::span<float> out, std::span<const float> logits) {
  const double lse = log_sum_exp(logits);
  for (size_t i = 0; i < logits.size(); ++i) {
    out[i] = static_cast<float>(static_cast<double>(logits[i]) - lse);
  }
}

std::vector<float> log_softmax(std::span<const float> logits) {
  std::vector<float> out(logits.size());
  log_softmax(out, logits);
  return out;
}

Result<LogprobInfo> token_logprobs(std::span<const float> logits, TokenId token, size_t n_top) {
  KVLM_RETURN_IF_ERROR(check_logits(logits));
  if (token < 0 || static_cast<size_t>(token) >= logits.size()) {
    return Status::error("logprobs: token " + std::to_string(token) +
                         " is outside the vocabulary [0, " + std::to_string(logits.size()) + ")");
  }
  const double lse = log_sum_exp(logits);
  auto logprob = [&](size_t i) { return static_cast<float>(static_cast<double>(logits[i]) - lse); };
  LogprobInfo info;
  info.chosen = TokenLogprob{token, logprob(static_cast<size_t>(token))};
  n_top = std::min(n_top, logits.size());
  if (n_top == 0) return info;
  // A heap of the n_top best so far, worst on top, so each token costs O(log n_top).
  std::vector<TokenLogprob>& top = info.top;
  top.reserve(n_top);
  for (size_t i = 0; i < logits.size(); ++i) {
    const TokenLogprob cand{static_cast<TokenId>(i), logprob(i)};
    if (top.size() < n_top) {
      top.push_back(cand);
      std::push_heap(top.begin(), top.end(), better);
    } else if (better(cand, top.front())) {
      std::pop_heap(top.begin(), top.end(), better);
      top.back() = cand;
      std::push_heap(top.begin(), top.end(), better);
    }
  }
  std::sort_heap(top.begin(), top.end(), better);
  return info;
}

}  // namespace kvlm
