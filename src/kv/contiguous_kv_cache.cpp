#include "kv/contiguous_kv_cache.h"

#include <string>

namespace kvlm {

ContiguousKvCache::ContiguousKvCache(int n_layer, int kv_dim, std::vector<int> capacities)
    : n_layer_(n_layer), kv_dim_(kv_dim), capacities_(std::move(capacities)) {
  for (int capacity : capacities_) {
    offsets_.push_back(total_positions_);
    total_positions_ += static_cast<size_t>(capacity);
  }
  n_floats_ = static_cast<size_t>(n_layer_) * total_positions_ * kv_dim_;
  // Value-initialised: positions are always written before they are read, but zeros make
  // any bug reproducible instead of reading stale memory.
  keys_ = std::make_unique<float[]>(n_floats_);
  values_ = std::make_unique<float[]>(n_floats_);
}

Status ContiguousKvCache::reserve(int seq, int n_positions) {
  if (seq < 0 || seq >= n_sequences())
    return Status::error("KV cache: no sequence " + std::to_string(seq));
  if (n_positions > capacities_[seq])
    return Status::error("KV cache: sequence " + std::to_string(seq) + " needs " +
                         std::to_string(n_positions) + " positions but was allocated " +
                         std::to_string(capacities_[seq]));
  return Status::ok();
}

float* ContiguousKvCache::key_row(int seq, int layer, int pos) {
  return keys_.get() + row_index(seq, layer, pos);
}

float* ContiguousKvCache::value_row(int seq, int layer, int pos) {
  return values_.get() + row_index(seq, layer, pos);
}

void ContiguousKvCache::runs(int seq, int layer, int n_positions, std::vector<KvRun>* out) const {
  const size_t first = row_index(seq, layer, 0);
  out->push_back({keys_.get() + first, values_.get() + first, n_positions});
}

}  // namespace kvlm
