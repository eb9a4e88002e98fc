// Model: what the generation loop needs from any architecture. A forward step takes, for
// each sequence of the batch, the new tokens to append (a whole prompt in prefill, one token
// in decode, the whole sequence again when uncached) and returns the logits of each sequence's
// last new position. Keys and values of the new positions go into the KvCache.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "kv/kv_cache.h"
#include "kvlm/status.h"
#include "model/config.h"
#include "ops/parallel.h"

namespace kvlm {

// New tokens of one sequence for one forward step.
struct SequenceChunk {
  int seq = 0;        // the sequence's slot in the KvCache
  int start_pos = 0;  // position of tokens[0] == positions already cached for this sequence
  std::span<const int32_t> tokens;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;
  // logits [n_chunks, n_vocab]: the last position of each chunk. Checks token ids and the
  // context length before computing anything.
  virtual Status forward(float* logits, std::span<const SequenceChunk> chunks, KvCache& cache,
                         const Parallel& par) = 0;
  // Bytes of weights a decode step reads (the bandwidth roofline's numerator).
  virtual size_t weight_bytes() const = 0;
  // Storage type of the big matrices ("F32", "F16", "BF16").
  virtual std::string weight_dtype() const = 0;
  // Every weight matrix's storage type, counted ("Q4_K x 10, Q5_0 x 4, F16 x 2"): what
  // `--weights` made of matrices whose rows do not fit its blocks.
  virtual std::string weight_types() const { return weight_dtype(); }
  // Ok when forward() can run on a cache with this sinks + sliding window: only rotary models
  // can renumber positions within a window, so the default (GPT-2's learned absolute
  // positions) refuses, naming the flag.
  virtual Status check_kv_window(const KvWindow& window) const;
};

// Checks the chunks against the config: token ids in [0, n_vocab), non-empty, within n_ctx
// (unless `windowed`: a cache window renumbers positions, so a sequence may run past n_ctx).
Status validate_chunks(std::span<const SequenceChunk> chunks, const ModelConfig& config,
                       bool windowed = false);

}  // namespace kvlm
