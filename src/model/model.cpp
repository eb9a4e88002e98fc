#include "model/model.h"

namespace kvlm {

Status validate_chunks(std::span<const SequenceChunk> chunks, const ModelConfig& config) {
  for (const SequenceChunk& c : chunks) {
    if (c.tokens.empty())
      return Status::error("sequence " + std::to_string(c.seq) + ": no tokens to process");
    for (int32_t id : c.tokens)
      if (id < 0 || id >= config.n_vocab)
        return Status::error("sequence " + std::to_string(c.seq) + ": token id " +
                             std::to_string(id) + " is outside the vocabulary [0, " +
                             std::to_string(config.n_vocab) + ")");
    const int64_t end = static_cast<int64_t>(c.start_pos) + c.tokens.size();
    if (c.start_pos < 0 || end > config.n_ctx)
      return Status::error("sequence " + std::to_string(c.seq) + ": positions up to " +
                           std::to_string(end) + " exceed the context length " +
                           std::to_string(config.n_ctx));
  }
  return Status::ok();
}

}  // namespace kvlm
