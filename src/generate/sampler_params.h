// SamplingParams: the user's sampling controls, one field per command-line flag, with the
// meanings documented in docs/sampling.md. validate() is the single place that rejects bad
// values, so the CLI and any later front end (HTTP) give the same errors naming the flag.
#pragma once

#include <cstdint>

#include "kvlm/status.h"

namespace kvlm {

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

}  // namespace kvlm
