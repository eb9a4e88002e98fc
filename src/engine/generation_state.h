// GenerationState: one request's generation policy, in the library rather than in each front
// end: the sampler chain with the request's own RNG, log-probabilities, the ids that end it,
// --stop strings matched on the incremental text, and the finish reason. The engine hands it
// each new logits row of its sequence; it answers with the token chosen and what to report.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "generate/rng.h"
#include "generate/sampler.h"
#include "generate/text_stream.h"
#include "kvlm/engine.h"

namespace kvlm {

class GenerationState {
 public:
  // Checks the request's sampling values, stop strings and logprobs count (errors name the
  // field); the model's tokenizer must outlive the state.
  static Result<GenerationState> create(const LoadedModel& model, const Request& request);

  // Chooses the token following `history` from its logits [n_vocab] and reports it: the
  // event's token, text delta, logprobs and, when this token ends the request, the finish
  // reason (eos, stop, or length once max_new tokens exist). `id` is left for the caller.
  Event next(std::span<const float> logits, const TokenHistory& history);
  // The text still held back (a partial character, a possible stop prefix) when the request
  // ends for a reason the state did not decide itself (cancellation).
  std::string flush();

  int n_generated() const { return n_generated_; }
  bool finished() const { return finished_; }
  // New tokens kept (the end id that stopped it included, run.c's BOS excluded).
  const std::vector<int32_t>& kept() const { return kept_; }

 private:
  GenerationState() = default;
  bool is_end(int32_t token) const;

  SamplerChain chain_;
  Rng rng_{0};
  std::optional<TextStream> text_;
  std::vector<int32_t> end_ids_;
  int max_new_ = 0;
  std::optional<int> n_logprobs_;  // Request::logprobs
  bool drop_end_token_ = false;    // run.c: the BOS that ends a run is not part of it
  int n_generated_ = 0;
  bool finished_ = false;
  std::vector<int32_t> kept_;
};

}  // namespace kvlm
