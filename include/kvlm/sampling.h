// Public sampling types: the user's sampling controls and the log-probabilities reported with
// each token. The samplers themselves live in src/generate/sampler.h.
#pragma once

#include <cstdint>
#include <vector>

#include "kvlm/status.h"

namespace kvlm {

using TokenId = int32_t;

// One field per command-line flag (and per OpenAI request field), meanings documented in
// docs/sampling.md. validate() is the single place that rejects bad values, so the CLI and the
// server give the same errors naming the flag.
struct SamplingParams {
  float temperature = 1.0f;         // --temperature: 0 means greedy (argmax)
  int32_t top_k = 0;                // --top-k: keep the k most likely tokens; 0 = off
  float top_p = 1.0f;               // --top-p: nucleus mass in (0, 1]; 1 = off
  float min_p = 0.0f;               // --min-p: drop p < min_p * p_max, in [0, 1); 0 = off
  float repetition_penalty = 1.0f;  // --repeat-penalty: > 0; 1 = off (Hugging Face meaning)
  float presence_penalty = 0.0f;    // --presence-penalty: 0 = off (OpenAI meaning)
  float frequency_penalty = 0.0f;   // --frequency-penalty: 0 = off (OpenAI meaning)
  uint64_t seed = 0;                // --seed: request seed; sequence i uses sequence_seed(seed, i)

  // Ok, or an error naming the first bad flag with what was expected and what was found.
  Status validate() const;
  // True when the chain reduces to argmax (temperature 0); top-k, top-p and min-p are then
  // irrelevant and the RNG is not used.
  bool is_greedy() const { return temperature == 0.0f; }
};

struct TokenLogprob {
  TokenId id;
  float logprob;  // natural log, <= 0
};

// The chosen token's log-probability and the most likely alternatives, from the RAW model
// distribution (softmax of the logits before any penalty, temperature or filter), as the
// OpenAI API reports them.
struct LogprobInfo {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;  // [min(n_top, n_vocab)] by (logprob desc, id asc)
};

}  // namespace kvlm
