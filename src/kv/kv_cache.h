// KvCache: where a model keeps each sequence's keys and values, per layer, so that decode
// never recomputes them. Positions of a sequence are written once and then only read.
//
// The model sees the cache through this small interface: reserve room (plan; may say "no
// room" and change nothing), get the row to write a new position's K and V into, and get the
// runs of rows that hold positions [0, n) for attention. The contiguous cache gives one run per
// sequence; a paged cache gives one per block. Cell metadata (lengths, tables) lives in the
// implementation, apart from the tensors.
#pragma once

#include <cstddef>
#include <vector>

#include "kvlm/status.h"
#include "ops/attention.h"

namespace kvlm {

class KvCache {
 public:
  virtual ~KvCache() = default;

  // Makes positions [0, n_positions) of sequence `seq` writable. Fails, changing nothing, when
  // there is no room.
  virtual Status reserve(int seq, int n_positions) = 0;
  // Rows [kv_dim] receiving position `pos` of sequence `seq` in layer `layer`.
  virtual float* key_row(int seq, int layer, int pos) = 0;
  virtual float* value_row(int seq, int layer, int pos) = 0;
  // Appends to `out` the runs holding positions [0, n_positions) of `seq` in `layer`.
  virtual void runs(int seq, int layer, int n_positions, std::vector<KvRun>* out) const = 0;
  // Bytes of K and V storage this cache holds now.
  virtual size_t allocated_bytes() const = 0;
};

}  // namespace kvlm
