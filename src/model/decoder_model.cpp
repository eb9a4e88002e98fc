#include "model/decoder_model.h"

#include "ops/matmul.h"

namespace kvlm {

Status DecoderModel::forward(float* logits, std::span<const SequenceChunk> chunks, KvCache& cache,
                             const Parallel& par) {
  const ModelConfig& c = config();
  const KvWindow window = cache.window();
  KVLM_RETURN_IF_ERROR(check_kv_window(window));
  KVLM_RETURN_IF_ERROR(validate_chunks(chunks, c, window.enabled()));
  int n_rows = 0;
  for (const SequenceChunk& chunk : chunks) {
    const int end = chunk.start_pos + static_cast<int>(chunk.tokens.size());
    KVLM_RETURN_IF_ERROR(cache.check_reserved(chunk.seq, end));  // the caller plans, we compute
    n_rows += static_cast<int>(chunk.tokens.size());
  }
  prepare(n_rows, par);
  float* x = embed(chunks);
  for (int layer = 0; layer < c.n_layer; ++layer)
    layer_forward(layer, x, n_rows, chunks, cache, par);
  // Only each chunk's last position needs logits: the final norm and the head run on those rows.
  const size_t C = c.n_embd;
  if (last_.size() < chunks.size() * C) last_.resize(chunks.size() * C);
  size_t row = 0;
  for (size_t k = 0; k < chunks.size(); ++k) {
    row += chunks[k].tokens.size();
    final_norm(last_.data() + k * C, x + (row - 1) * C);
  }
  matmul_forward(logits, last_.data(), output_head(), nullptr, static_cast<int>(chunks.size()),
                 par);
  return Status::ok();
}

}  // namespace kvlm
