// DecoderModel: the forward pass every decoder-only architecture shares, written once. A step
// checks its chunks (token ids, context length) and that the caller reserved their cache
// positions, embeds every new row into the residual stream x [T, C], runs the layers over all
// rows, then puts only each chunk's last row through the final norm and the output head:
// logits [n_chunks, V]. GPT-2 and the Llama family supply the steps that differ (buffers,
// embedding, one layer, final norm, head).
#pragma once

#include <span>
#include <vector>

#include "model/model.h"
#include "ops/weight_matrix.h"

namespace kvlm {

// Grows an activation buffer to at least n values (steps reuse their buffers, never shrink them).
inline void ensure_size(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

class DecoderModel : public Model {
 public:
  Status forward(float* logits, std::span<const SequenceChunk> chunks, KvCache& cache,
                 const Parallel& par) final;

 protected:
  // Grows the activation buffers for a step of n_rows rows (never shrinks them).
  virtual void prepare(size_t n_rows, const Parallel& par) = 0;
  // The residual stream x [n_rows, C], every row the embedding of its token at its position.
  virtual float* embed(std::span<const SequenceChunk> chunks) = 0;
  // One transformer block over every row of x, in place; writes the rows' K/V into the cache.
  virtual void layer_forward(int layer, float* x, int n_rows, std::span<const SequenceChunk> chunks,
                             KvCache& cache, const Parallel& par) = 0;
  // out [C] = the final norm of one row x [C].
  virtual void final_norm(float* out, const float* x) const = 0;
  virtual const WeightMatrix& output_head() const = 0;

 private:
  std::vector<float> last_;  // [n_chunks, C] final-normed last row of each chunk
  struct SeqSpan {
    int seq, begin, end;  // positions [begin, end) of seq written by one pass
  };
  std::vector<SeqSpan> step_spans_;  // [n_chunks] forward()'s check of what each sequence writes
};

}  // namespace kvlm
