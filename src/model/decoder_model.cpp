#include "model/decoder_model.h"

#include <algorithm>

#include "ops/matmul.h"

namespace kvlm {

Status DecoderModel::forward(float* logits, std::span<const SequenceChunk> chunks, KvCache& cache,
                             const Parallel& par) {
  const ModelConfig& c = config();
  const KvWindow window = cache.window();
  KVLM_RETURN_IF_ERROR(check_kv_window(window));
  KVLM_RETURN_IF_ERROR(validate_chunks(chunks, c, window.enabled()));
  // The caller plans, we compute: each sequence's positions this pass writes (its chunks
  // together, as perplexity sends one chunk per position) must be reserved and still readable
  // once all are written.
  int n_rows = 0;
  std::vector<SeqSpan>& spans = step_spans_;
  spans.clear();
  for (const SequenceChunk& chunk : chunks) {
    spans.push_back(
        {chunk.seq, chunk.start_pos, chunk.start_pos + static_cast<int>(chunk.tokens.size())});
    n_rows += static_cast<int>(chunk.tokens.size());
  }
  std::sort(spans.begin(), spans.end(),
            [](const SeqSpan& a, const SeqSpan& b) { return a.seq < b.seq; });
  for (size_t i = 0; i < spans.size();) {
    SeqSpan all = spans[i];
    for (++i; i < spans.size() && spans[i].seq == all.seq; ++i) {
      all.begin = std::min(all.begin, spans[i].begin);
      all.end = std::max(all.end, spans[i].end);
    }
    KVLM_RETURN_IF_ERROR(cache.check_step(all.seq, all.begin, all.end));
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
