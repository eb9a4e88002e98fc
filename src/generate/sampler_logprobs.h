// Log-probabilities for --logprobs: the chosen token's log-probability and the N most likely
// alternatives, computed from the RAW model distribution (softmax of the logits before any
// penalty, temperature or filter), which is what the OpenAI API reports.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "generate/sampler.h"
#include "kvlm/sampling.h"
#include "kvlm/status.h"

namespace kvlm {

// out[i] = logits[i] - log(sum_j exp(logits[j])), the sum in double.
// Precondition: out.size() == logits.size() > 0 and check_logits(logits) passes.
void log_softmax(std::span<float> out, std::span<const float> logits);
std::vector<float> log_softmax(std::span<const float> logits);

// The chosen token's log-probability and the n_top best alternatives (which include the
// chosen token when it is among them, as in the OpenAI API). O(n_vocab log n_top); does not
// build the whole log-softmax. Errors on bad logits or a token outside [0, n_vocab).
Result<LogprobInfo> token_logprobs(std::span<const float> logits, TokenId token, size_t n_top);

}  // namespace kvlm
