// ContiguousKvCache: every sequence gets one slab of rows sized for its whole run (prompt +
// new tokens), allocated once when the run starts; keys and values are written into place
// and never moved or copied (the seed's "preallocate a buffer and write into a slice").
// Rows are stored as the storage options' dtype (f32 by default).
//
// With a window (sinks + sliding window) and a bound on the positions one forward pass writes
// per sequence (`max_step_positions`), a sequence's slab is a ring: its S sink positions, then
// W - 1 + max_step_positions slots that recent positions cycle through (position p >= S at slot
// S + (p - S) mod that), so memory stays at the window's size however long the sequence runs.
// That is the most a step can need: its first row reads back to W - S - 1 positions before it,
// and its last writes max_step_positions - 1 after. check_step() refuses a larger step rather
// than let it overwrite a position a row still reads. Without the bound (0) the slab holds every
// position, as without a window.
#pragma once

#include <memory>
#include <vector>

#include "kv/kv_cache.h"
#include "util/huge_pages.h"

namespace kvlm {

class ContiguousKvCache final : public KvCache {
 public:
  // capacities[s] = positions sequence s may hold. kv_dim = n_kv_head * head_dim. The storage
  // options must pass validate_kv_storage(). max_step_positions: with a window, the most
  // positions of one sequence a forward pass writes (0: no bound, no ring).
  ContiguousKvCache(int n_layer, int kv_dim, std::vector<int> capacities,
                    const KvStorageOptions& storage = {}, int max_step_positions = 0);

  Status check_reserved(int seq, int n_positions) const override;
  Status check_step(int seq, int begin, int end) const override;
  void write_row(int seq, int layer, int pos, const float* k, const float* v) override;
  // Positions [0, n_positions) must all still be held (always so without a ring).
  void runs(int seq, int layer, int n_positions, std::vector<KvRun>* out) const override;
  void range_runs(int seq, int layer, int begin, int end, std::vector<KvRun>* out) const override;
  KvRowFormat row_format(int layer) const override { return codec_.format(layer); }
  size_t allocated_bytes() const override { return n_bytes_ * 2; }
  KvWindow window() const override { return window_; }

  int n_sequences() const { return static_cast<int>(capacities_.size()); }
  // Rows the slab of `seq` holds: its capacity, or the window's ring when smaller.
  int slab_positions(int seq) const { return slabs_[seq]; }

 private:
  // The slab slot of position `pos`: itself, or its place in the window's ring.
  int slot(int seq, int pos) const {
    const int sinks = window_.sinks;
    return pos < slabs_[seq] ? pos : sinks + (pos - sinks) % (slabs_[seq] - sinks);
  }
  size_t row_offset(int seq, int layer, int pos) const {
    return (static_cast<size_t>(layer) * total_positions_ + offsets_[seq] + slot(seq, pos)) *
           codec_.row_bytes();
  }
  int n_layer_;
  int kv_dim_;
  KvRowCodec codec_;
  KvWindow window_;
  std::vector<int> capacities_;
  std::vector<int> slabs_;               // rows of each sequence's slab (<= its capacity)
  std::vector<size_t> offsets_;          // first row of each sequence's slab
  size_t total_positions_ = 0;           // rows of all slabs
  size_t n_bytes_ = 0;                   // of K (and of V)
  HugePageBuffer keys_;    // [n_layer][sum of slabs] rows of row_bytes
  HugePageBuffer values_;  // [n_layer][sum of slabs] rows of row_bytes
};

}  // namespace kvlm
