// ContiguousKvCache: every sequence gets one slab of rows sized for its whole run (prompt +
// new tokens), allocated once when the run starts; keys and values are written into place
// and never moved or copied (the seed's "preallocate a buffer and write into a slice").
// Rows are stored as the storage options' dtype (f32 by default). With a window (sinks +
// sliding window) the slab still holds every position: attention reads only each row's view.
// Bounded memory past the context is the paged cache's job (it evicts whole blocks).
#pragma once

#include <memory>
#include <vector>

#include "kv/kv_cache.h"

namespace kvlm {

class ContiguousKvCache final : public KvCache {
 public:
  // capacities[s] = positions sequence s may hold. kv_dim = n_kv_head * head_dim. The storage
  // options must pass validate_kv_storage().
  ContiguousKvCache(int n_layer, int kv_dim, std::vector<int> capacities,
                    const KvStorageOptions& storage = {});

  Status check_reserved(int seq, int n_positions) const override;
  void write_row(int seq, int layer, int pos, const float* k, const float* v) override;
  void runs(int seq, int layer, int n_positions, std::vector<KvRun>* out) const override;
  KvRowFormat row_format(int layer) const override { return codec_.format(layer); }
  size_t allocated_bytes() const override { return n_bytes_ * 2; }
  KvWindow window() const override { return window_; }

  int n_sequences() const { return static_cast<int>(capacities_.size()); }

 private:
  size_t row_offset(int seq, int layer, int pos) const {
    return (static_cast<size_t>(layer) * total_positions_ + offsets_[seq] + pos) *
           codec_.row_bytes();
  }
  int n_layer_;
  int kv_dim_;
  KvRowCodec codec_;
  KvWindow window_;
  std::vector<int> capacities_;
  std::vector<size_t> offsets_;  // first position of each sequence's slab
  size_t total_positions_ = 0;
  size_t n_bytes_ = 0;                   // of K (and of V)
  std::unique_ptr<std::byte[]> keys_;    // [n_layer][total_positions] rows of row_bytes
  std::unique_ptr<std::byte[]> values_;  // [n_layer][total_positions] rows of row_bytes
};

}  // namespace kvlm
