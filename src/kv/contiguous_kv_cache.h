// ContiguousKvCache: every sequence gets one slab of rows sized for its whole run (prompt +
// new tokens), allocated once when the run starts; keys and values are written into place
// and never moved or copied (the seed's "preallocate a buffer and write into a slice").
#pragma once

#include <memory>
#include <vector>

#include "kv/kv_cache.h"

namespace kvlm {

class ContiguousKvCache final : public KvCache {
 public:
  // capacities[s] = positions sequence s may hold. kv_dim = n_kv_head * head_dim.
  ContiguousKvCache(int n_layer, int kv_dim, std::vector<int> capacities);

  Status reserve(int seq, int n_positions) override;
  float* key_row(int seq, int layer, int pos) override;
  float* value_row(int seq, int layer, int pos) override;
  void runs(int seq, int layer, int n_positions, std::vector<KvRun>* out) const override;
  size_t allocated_bytes() const override { return n_floats_ * 2 * sizeof(float); }

  int n_sequences() const { return static_cast<int>(capacities_.size()); }

 private:
  size_t row_index(int seq, int layer, int pos) const {
    return (static_cast<size_t>(layer) * total_positions_ + offsets_[seq] + pos) * kv_dim_;
  }
  int n_layer_;
  int kv_dim_;
  std::vector<int> capacities_;
  std::vector<size_t> offsets_;  // first position of each sequence's slab
  size_t total_positions_ = 0;
  size_t n_floats_ = 0;
  std::unique_ptr<float[]> keys_;    // [n_layer][total_positions, kv_dim]
  std::unique_ptr<float[]> values_;  // [n_layer][total_positions, kv_dim]
};

}  // namespace kvlm
