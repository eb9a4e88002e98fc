#include "engine/generation_state.h"

#include <algorithm>

#include "generate/sampler_logprobs.h"

namespace kvlm {

Result<GenerationState> GenerationState::create(const LoadedModel& model, const Request& request) {
  GenerationState s;
  KVLM_ASSIGN_OR_RETURN(s.chain_, SamplerChain::from_params(request.sampling));
  if (request.logprobs && (*request.logprobs < 0 || *request.logprobs > 20))
    return Status::error("logprobs must be between 0 and 20, found " +
                         std::to_string(*request.logprobs));
  if (request.max_new_tokens < 1)
    return Status::error("max_new_tokens must be at least 1, found " +
                         std::to_string(request.max_new_tokens));
  s.n_logprobs_ = request.logprobs;
  s.max_new_ = request.max_new_tokens;
  s.rng_ = Rng(sequence_seed(request.sampling.seed, request.seed_index));
  if (model.tokenizer()) {
    KVLM_ASSIGN_OR_RETURN(s.text_, TextStream::create(*model.tokenizer(), request.stop));
  } else if (!request.stop.empty()) {
    return Status::error("stop strings need a tokenizer to decode text (pass --tokenizer PATH)");
  }
  if (!request.ignore_eos) s.end_ids_ = model.end_ids();
  for (int32_t id : request.stop_ids) {
    if (id < 0 || id >= model.n_vocab())
      return Status::error("stop id " + std::to_string(id) + " is outside the vocabulary [0, " +
                           std::to_string(model.n_vocab()) + ")");
    s.end_ids_.push_back(id);
  }
  s.drop_end_token_ = model.run_c_conventions();
  return s;
}

bool GenerationState::is_end(int32_t token) const {
  return std::find(end_ids_.begin(), end_ids_.end(), token) != end_ids_.end();
}

Event GenerationState::next(std::span<const float> logits, const TokenHistory& history) {
  Event event;
  auto token = chain_.sample(logits, history, rng_);
  if (!token) {
    finished_ = true;
    event.finish = FinishReason::kError;
    event.error = token.message();
    return event;
  }
  event.token = token.value();
  ++n_generated_;
  if (n_logprobs_) {
    auto info = token_logprobs(logits, event.token, static_cast<size_t>(*n_logprobs_));
    if (info) event.logprobs = std::move(info.value());
  }
  if (is_end(event.token)) {
    event.finish = FinishReason::kEos;
    if (drop_end_token_) {
      event.token = -1;  // run.c neither prints nor keeps the BOS that ends its run
    } else {
      kept_.push_back(event.token);
    }
    if (text_) event.text = text_->finish();
    finished_ = true;
    return event;
  }
  kept_.push_back(event.token);
  if (text_) {
    auto step = text_->push(event.token);
    if (!step) {
      finished_ = true;
      event.finish = FinishReason::kError;
      event.error = step.message();
      return event;
    }
    event.text = std::move(step->emit);
    if (step->stopped) {
      event.finish = FinishReason::kStop;
      finished_ = true;
      return event;
    }
  }
  if (n_generated_ >= max_new_) {
    event.finish = FinishReason::kLength;
    if (text_) event.text += text_->finish();
    finished_ = true;
  }
  return event;
}

std::string GenerationState::flush() {
  finished_ = true;
  return text_ ? text_->finish() : std::string();
}

}  // namespace kvlm
