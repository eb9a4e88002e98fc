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

#include <cstddef>
#include <vector>

#include "kvlm/status.h"
#include "ops/attention.h"
#include "ops/kv_format.h"

namespace kvlm {

// How a cache stores its rows. Part of every cache's constructor options.
struct KvStorageOptions {
  KvDtype dtype = KvDtype::f32;
  // fp8 only: one scale per (layer, KV head), for K and for V, [n_layer * n_kv_head] each;
  // empty means 1.0 everywhere. Fixed for the cache's life (docs/kv_cache_quantization.md).
  int n_kv_head = 1;
  std::vector<float> fp8_k_scales;
  std::vector<float> fp8_v_scales;
};

// Checks the options against a cache shape: a storable dtype, kv_dim a multiple of n_kv_head,
// scales of the right count, finite and positive.
Status validate_kv_storage(const KvStorageOptions& options, int n_layer, int kv_dim);

// The part of a cache that turns fp32 rows into stored ones and describes them to attention.
class KvRowCodec {
 public:
  KvRowCodec(const KvStorageOptions& options, int n_layer, int kv_dim);
  size_t row_bytes() const { return row_bytes_; }
  KvDtype dtype() const { return dtype_; }
  void encode_key(std::byte* dst, int layer, const float* k) const;
  void encode_value(std::byte* dst, int layer, const float* v) const;
  KvRowFormat format(int layer) const;

 private:
  KvDtype dtype_;
  int kv_dim_;
  int n_kv_head_;
  size_t row_bytes_;
  std::vector<float> k_scales_, v_scales_;  // [n_layer * n_kv_head], fp8 only
};

class KvCache {
 public:
  virtual ~KvCache() = default;

  // Ok when positions [0, n_positions) of sequence `seq` are writable; an error naming the
  // sequence and both numbers otherwise.
  virtual Status check_reserved(int seq, int n_positions) const = 0;
  // Stores fp32 rows k, v [kv_dim] as position `pos` of sequence `seq` in layer `layer`
  // (reserved before), converted to the cache's dtype.
  virtual void write_row(int seq, int layer, int pos, const float* k, const float* v) = 0;
  // Appends to `out` the runs holding positions [0, n_positions) of `seq` in `layer`.
  virtual void runs(int seq, int layer, int n_positions, std::vector<KvRun>* out) const = 0;
  // How the rows of `layer` are stored (dtype, stride, fp8 scales), for attention.
  virtual KvRowFormat row_format(int layer) const = 0;
  // Bytes of K and V storage this cache holds now (kvlm kv-size --dtype's figure exactly: fp8's
  // per-(layer, head) scales are a fixed few bytes per layer and not counted).
  virtual size_t allocated_bytes() const = 0;
};

}  // namespace kvlm
