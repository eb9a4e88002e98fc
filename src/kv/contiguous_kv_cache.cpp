#include "kv/contiguous_kv_cache.h"

#include <algorithm>
#include <cstdint>
#include <string>

namespace kvlm {

ContiguousKvCache::ContiguousKvCache(int n_layer, int kv_dim, std::vector<int> capacities,
                                     const KvStorageOptions& storage, int max_step_positions)
    : n_layer_(n_layer),
      kv_dim_(kv_dim),
      codec_(storage, n_layer, kv_dim),
      window_(storage.window),
      capacities_(std::move(capacities)) {
  // The ring: the sinks, then the W - S - 1 positions before a step's first row, then the step.
  const int64_t ring = window_.enabled() && max_step_positions > 0
                           ? static_cast<int64_t>(window_.window) - 1 + max_step_positions
                           : INT64_MAX;
  for (int capacity : capacities_) {
    slabs_.push_back(static_cast<int>(std::min<int64_t>(capacity, ring)));
    offsets_.push_back(total_positions_);
    total_positions_ += static_cast<size_t>(slabs_.back());
  }
  n_bytes_ = static_cast<size_t>(n_layer_) * total_positions_ * codec_.row_bytes();
  // Zero-filled: positions are always written before they are read, but zeros make any bug
  // reproducible instead of reading stale memory. In huge pages: attention streams the cache.
  keys_ = HugePageBuffer(n_bytes_);
  values_ = HugePageBuffer(n_bytes_);
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

Status ContiguousKvCache::check_step(int seq, int begin, int end) const {
  KVLM_RETURN_IF_ERROR(check_reserved(seq, end));
  if (slabs_[seq] == capacities_[seq]) return Status::ok();  // every position has its own row
  // The step's first row reads back to recent_begin(begin) (or the sinks); its last write lands
  // on the slot of end - 1, which must not be one of those.
  const int64_t oldest = std::max<int64_t>(window_.recent_begin(begin), window_.sinks);
  const int64_t ring = slabs_[seq] - window_.sinks;
  if (end - oldest > ring)
    return Status::error("KV cache: sequence " + std::to_string(seq) + "'s window ring holds " +
                         std::to_string(ring) + " recent positions; a step writing positions " +
                         std::to_string(begin) + ".." + std::to_string(end - 1) + " needs " +
                         std::to_string(end - oldest) + " (write fewer positions per step)");
  return Status::ok();
}

void ContiguousKvCache::write_row(int seq, int layer, int pos, const float* k, const float* v) {
  const size_t offset = row_offset(seq, layer, pos);
  codec_.encode_key(keys_.data() + offset, layer, k);
  codec_.encode_value(values_.data() + offset, layer, v);
}

void ContiguousKvCache::runs(int seq, int layer, int n_positions, std::vector<KvRun>* out) const {
  range_runs(seq, layer, 0, n_positions, out);
}

void ContiguousKvCache::range_runs(int seq, int layer, int begin, int end,
                                   std::vector<KvRun>* out) const {
  // Slots follow positions up to the slab's end (the sinks run straight into the ring's first
  // slots), so only the ring's wrap cuts a run.
  for (int pos = begin; pos < end;) {
    const int n = std::min(end - pos, slabs_[seq] - slot(seq, pos));
    const size_t offset = row_offset(seq, layer, pos);
    out->push_back({keys_.data() + offset, values_.data() + offset, n});
    pos += n;
  }
}

}  // namespace kvlm
