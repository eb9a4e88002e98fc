// KvCache: where a model keeps each sequence's keys and values, per layer, so that decode
// never recomputes them. Positions of a sequence are written once and then only read.
//
// The model sees the cache through this small interface: check that the positions a step
// writes were reserved (the caller plans and reserves: the model computes, it never allocates),
// write a new position's fp32 K and V rows (the cache stores them as its dtype: f32, f16, bf16,
// q8_0 or fp8, see ops/kv_format.h), and get the runs of stored rows that hold positions
// [0, n) for attention, with the format attention reads them in. The contiguous cache gives
// one run per sequence; a paged cache gives one per block. Cell metadata (lengths, tables)
// lives in the implementation, apart from the tensors.
//
// A stored row depends only on the fp32 row written (q8_0 scales are per row; fp8 scales are
// fixed when the cache is made), so every exactness property of the fp32 cache holds per dtype.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kvlm/status.h"
#include "ops/attention.h"
#include "ops/kv_format.h"

namespace kvlm {

// Attention sinks + a sliding window (StreamingLLM, docs/sliding_window.md): a row at position
// `pos` attends over the first `sinks` positions and the last `window - sinks` up to itself,
// at positions renumbered within that view (0 .. view - 1): sinks keep theirs, the recent
// positions follow them, the query is the view's last. Keys are stored before rotation and
// rotated to their in-view position when a row reads them, so a sequence can run past the
// model's context with at most `window` positions attended. window == 0: off.
struct KvWindow {
  int window = 0;  // W: positions a row attends over (sinks included); 0: no window
  int sinks = 0;   // S: leading positions always kept, 0 <= S < W

  bool enabled() const { return window > 0; }
  // First recent position of the view of a row at `pos` (== sinks' end while nothing is evicted).
  int64_t recent_begin(int64_t pos) const {
    return pos + 1 <= window ? std::min<int64_t>(sinks, pos + 1) : pos + 1 - (window - sinks);
  }
  // Positions the row at `pos` attends over, its own included: min(pos + 1, W).
  int view_size(int64_t pos) const {
    return static_cast<int>(pos + 1 <= window ? pos + 1 : window);
  }
  // The row's query position within its view: view_size - 1.
  int query_pos(int64_t pos) const { return view_size(pos) - 1; }
  // True when `pos` is never attended again by any row at `first_row` or later.
  bool evicted(int64_t pos, int64_t first_row) const {
    return enabled() && pos >= sinks && pos < recent_begin(first_row);
  }
};

// How a cache stores its rows. Part of every cache's constructor options.
struct KvStorageOptions {
  KvDtype dtype = KvDtype::f32;
  // fp8 only: one scale per (layer, KV head), for K and for V, [n_layer * n_kv_head] each;
  // empty means 1.0 everywhere. Fixed for the cache's life (docs/kv_cache_quantization.md).
  int n_kv_head = 1;
  std::vector<float> fp8_k_scales;
  std::vector<float> fp8_v_scales;
  // Sinks + sliding window (off by default). With it on, keys are stored before rotation.
  KvWindow window;
  // q8_0_kc only: [n_layer * kv_dim], key channel c of a layer divided by its scale before q8_0
  // quantization (and multiplied back when read); keys are stored before rotation. Fixed for
  // the cache's life (eval/kv_calibration.h); empty means 1.0 everywhere.
  std::vector<float> k_channel_scales;
};

// Checks the options against a cache shape: a storable dtype, kv_dim a multiple of n_kv_head,
// scales of the right count, finite and positive, a window larger than its sinks.
Status validate_kv_storage(const KvStorageOptions& options, int n_layer, int kv_dim);

// The part of a cache that turns fp32 rows into stored ones and describes them to attention.
class KvRowCodec {
 public:
  KvRowCodec(const KvStorageOptions& options, int n_layer, int kv_dim);
  size_t row_bytes() const { return row_bytes_; }
  KvDtype dtype() const { return dtype_; }
  // Thread-safe: several threads may write rows at once.
  void encode_key(std::byte* dst, int layer, const float* k) const;
  void encode_value(std::byte* dst, int layer, const float* v) const;
  KvRowFormat format(int layer) const;

 private:
  KvDtype dtype_;
  int kv_dim_;
  int n_kv_head_;
  size_t row_bytes_;
  std::vector<float> k_scales_, v_scales_;  // [n_layer * n_kv_head], fp8 only
  std::vector<float> k_channel_scales_;     // [n_layer * kv_dim], q8_0_kc only
};

class KvCache {
 public:
  virtual ~KvCache() = default;

  // Ok when positions [0, n_positions) of sequence `seq` are writable; an error naming the
  // sequence and both numbers otherwise.
  virtual Status check_reserved(int seq, int n_positions) const = 0;
  // Ok when one forward pass may write positions [begin, end) of `seq` (its chunks together):
  // they are reserved, and a cache that reuses storage (the contiguous cache's window ring)
  // still holds every position those rows read once all of them are written.
  virtual Status check_step(int seq, int begin, int end) const {
    (void)begin;
    return check_reserved(seq, end);
  }
  // Stores fp32 rows k, v [kv_dim] as position `pos` of sequence `seq` in layer `layer`
  // (reserved before), converted to the cache's dtype.
  virtual void write_row(int seq, int layer, int pos, const float* k, const float* v) = 0;
  // Appends to `out` the runs holding positions [0, n_positions) of `seq` in `layer`.
  virtual void runs(int seq, int layer, int n_positions, std::vector<KvRun>* out) const = 0;
  // Appends the runs holding positions [begin, end) (a window's recent part). This default
  // trims runs(seq, layer, end); a cache that evicts positions overrides it.
  virtual void range_runs(int seq, int layer, int begin, int end, std::vector<KvRun>* out) const;
  // The sinks + sliding window this cache keeps (off unless its storage options set one).
  virtual KvWindow window() const { return {}; }
  // True when keys are stored before RoPE and rotated as rows read them: with a window, and for
  // q8_0_kc (whose per-channel scales belong to the unrotated channels).
  virtual bool keys_unrotated() const {
    return window().enabled() || row_format(0).dtype == KvDtype::q8_0_kc;
  }
  // How the rows of `layer` are stored (dtype, stride, fp8 scales), for attention.
  virtual KvRowFormat row_format(int layer) const = 0;
  // Bytes of K and V storage this cache holds now (kvlm kv-size --dtype's figure exactly: fp8's
  // per-(layer, head) scales are a fixed few bytes per layer and not counted).
  virtual size_t allocated_bytes() const = 0;
};

}  // namespace kvlm
