#include "kv/contiguous_kv_cache.h"

#include <string>

namespace kvlm {

ContiguousKvCache::ContiguousKvCache(int n_layer, int kv_dim, std::vector<int> capacities,
                                     const KvStorageOptions& storage)
    : n_layer_(n_layer),
      kv_dim_(kv_dim),
      codec_(storage, n_layer, kv_dim),
      window_(storage.window),
      capacities_(std::move(capacities)) {
  for (int capacity : capacities_) {
    offsets_.push_back(total_positions_);
    total_positions_ += static_cast<size_t>(capacity);
  }
  n_bytes_ = static_cast<size_t>(n_layer_) * total_positions_ * codec_.row_bytes();
  // Value-initialised: positions are always written before they are read, but zeros make
  // any bug reproducible instead of reading stale memory.
  keys_ = std::make_unique<std::byte[]>(n_bytes_);
  values_ = std::make_unique<std::byte[]>(n_bytes_);
}

Status ContiguousKvCache::check_reserved(int seq, int n_positions) const {
  if (seq < 0 || seq >= n_sequences())
    return Status::error("KV cache: no sequence " + std::to_string(seq));
  if (n_positions > capacities_[seq])
    return Status::error("KV cache: sequence " + std::to_string(seq) + " needs " +
                         std::to_string(n_positions) + " positions but was allocated " +
                         std::to_string(capacities_[seq]));
  return Status::ok();
}

void ContiguousKvCache::write_row(int seq, int layer, int pos, const float* k, const float* v) {
  const size_t offset = row_offset(seq, layer, pos);
  codec_.encode_key(keys_.get() + offset, layer, k);
  codec_.encode_value(values_.get() + offset, layer, v);
}

void ContiguousKvCache::runs(int seq, int layer, int n_positions, std::vector<KvRun>* out) const {
  const size_t first = row_offset(seq, layer, 0);
  out->push_back({keys_.get() + first, values_.get() + first, n_positions});
}

}  // namespace kvlm
