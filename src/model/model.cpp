#include "model/model.h"

namespace kvlm {

Status Model::check_kv_window(const KvWindow& window) const {
  if (!window.enabled()) return Status::ok();
  return Status::error(
      "--kv-window: this model's learned absolute position embeddings (GPT-2) cannot be "
      "renumbered within a window; attention sinks + a sliding window need rotary positions "
      "(Llama-family models)");
}

Status validate_chunks(std::span<const SequenceChunk> chunks, const ModelConfig& config,
                       bool windowed) {
  for (const SequenceChunk& c : chunks) {
    if (c.tokens.empty())
      return Status::error("sequence " + std::to_string(c.seq) + ": no tokens to process");
    for (int32_t id : c.tokens)
      if (id < 0 || id >= config.n_vocab)
        return Status::error("sequence " + std::to_string(c.seq) + ": token id " +
                             std::to_string(id) + " is outside the vocabulary [0, " +
                             std::to_string(config.n_vocab) + ")");
    const int64_t end = static_cast<int64_t>(c.start_pos) + c.tokens.size();
    if (c.start_pos < 0 || (!windowed && end > config.n_ctx))
      return Status::error("sequence " + std::to_string(c.seq) + ": positions up to " +
                           std::to_string(end) + " exceed the context length " +
                           std::to_string(config.n_ctx));
  }
  return Status::ok();
}

}  // namespace kvlm
