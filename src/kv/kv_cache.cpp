#include "kv/kv_cache.h"

#include <cmath>
#include <string>

namespace kvlm {

Status validate_kv_storage(const KvStorageOptions& options, int n_layer, int kv_dim) {
  if (!kv_dtype_storable(options.dtype))
    return Status::error(std::string("KV cache: dtype ") + kv_dtype_name(options.dtype) +
                         " cannot be stored; accepted: f32, f16, bf16, q8_0, fp8, q8_0_kc");
  if (options.window.window != 0 || options.window.sinks != 0) {
    const KvWindow& w = options.window;
    if (w.window < 0 || w.sinks < 0)
      return Status::error("--kv-window and --sink-tokens must not be negative, found " +
                           std::to_string(w.window) + " and " + std::to_string(w.sinks));
    if (w.window <= w.sinks)
      return Status::error("--kv-window " + std::to_string(w.window) +
                           " must be larger than --sink-tokens " + std::to_string(w.sinks) +
                           " (the window holds the sinks and at least one recent position)");
  }
  if (!options.k_channel_scales.empty()) {
    if (options.dtype != KvDtype::q8_0_kc)
      return Status::error("KV cache: per-channel key scales are q8_0_kc's, not " +
                           std::string(kv_dtype_name(options.dtype)) + "'s");
    const size_t want = static_cast<size_t>(n_layer) * kv_dim;
    if (options.k_channel_scales.size() != want)
      return Status::error(
          "KV cache: q8_0_kc key scales need n_layer x kv_dim = " + std::to_string(want) +
          " values, found " + std::to_string(options.k_channel_scales.size()));
    for (float s : options.k_channel_scales)
      if (!std::isfinite(s) || s <= 0.0f || s > 0x1p100f || s < 0x1p-100f)
        return Status::error("KV cache: q8_0_kc key scale " + std::to_string(s) +
                             " is not a positive finite number in [2^-100, 2^100]");
  }
  if (options.dtype != KvDtype::fp8) return Status::ok();
  if (options.n_kv_head < 1 || kv_dim % options.n_kv_head != 0)
    return Status::error("KV cache: fp8 needs n_kv_head dividing kv_dim " + std::to_string(kv_dim) +
                         ", found " + std::to_string(options.n_kv_head));
  const size_t want = static_cast<size_t>(n_layer) * options.n_kv_head;
  for (const auto* scales : {&options.fp8_k_scales, &options.fp8_v_scales}) {
    if (scales->empty()) continue;
    if (scales->size() != want)
      return Status::error(
          "KV cache: fp8 scales need n_layer x n_kv_head = " + std::to_string(want) +
          " values, found " + std::to_string(scales->size()));
    for (float s : *scales)
      if (!std::isfinite(s) || s <= 0.0f || s > 0x1p100f || s < 0x1p-100f)
        return Status::error("KV cache: fp8 scale " + std::to_string(s) +
                             " is not a positive finite number in [2^-100, 2^100]");
  }
  return Status::ok();
}

void KvCache::range_runs(int seq, int layer, int begin, int end, std::vector<KvRun>* out) const {
  const size_t first = out->size();
  runs(seq, layer, end, out);
  const size_t row_bytes = row_format(layer).row_bytes;
  size_t i = first;
  for (int skip = begin; skip > 0 && i < out->size();) {
    KvRun& run = (*out)[i];
    const int take = std::min(skip, run.n_positions);
    run.k += static_cast<size_t>(take) * row_bytes;
    run.v += static_cast<size_t>(take) * row_bytes;
    run.n_positions -= take;
    skip -= take;
    if (run.n_positions == 0) ++i;
  }
  out->erase(out->begin() + static_cast<std::ptrdiff_t>(first),
             out->begin() + static_cast<std::ptrdiff_t>(i));
}

KvRowCodec::KvRowCodec(const KvStorageOptions& options, int n_layer, int kv_dim)
    : dtype_(options.dtype),
      kv_dim_(kv_dim),
      n_kv_head_(std::max(options.n_kv_head, 1)),
      row_bytes_(kv_row_bytes(options.dtype, kv_dim)) {
  if (dtype_ == KvDtype::q8_0_kc)
    k_channel_scales_ = options.k_channel_scales.empty()
                            ? std::vector<float>(static_cast<size_t>(n_layer) * kv_dim, 1.0f)
                            : options.k_channel_scales;
  if (dtype_ != KvDtype::fp8) return;
  const size_t n = static_cast<size_t>(n_layer) * n_kv_head_;
  k_scales_ = options.fp8_k_scales.empty() ? std::vector<float>(n, 1.0f) : options.fp8_k_scales;
  v_scales_ = options.fp8_v_scales.empty() ? std::vector<float>(n, 1.0f) : options.fp8_v_scales;
}

void KvRowCodec::encode_key(std::byte* dst, int layer, const float* k) const {
  if (dtype_ == KvDtype::q8_0_kc) {
    thread_local std::vector<float> scaled;
    scaled.resize(kv_dim_);
    const float* s = k_channel_scales_.data() + static_cast<size_t>(layer) * kv_dim_;
    for (int c = 0; c < kv_dim_; ++c) scaled[c] = k[c] / s[c];
    kv_encode_row(dst, scaled.data(), kv_dim_, dtype_, nullptr, 1);
    return;
  }
  const float* scales = k_scales_.empty() ? nullptr : k_scales_.data() + layer * n_kv_head_;
  kv_encode_row(dst, k, kv_dim_, dtype_, scales, kv_dim_ / n_kv_head_);
}

void KvRowCodec::encode_value(std::byte* dst, int layer, const float* v) const {
  const float* scales = v_scales_.empty() ? nullptr : v_scales_.data() + layer * n_kv_head_;
  kv_encode_row(dst, v, kv_dim_, dtype_, scales, kv_dim_ / n_kv_head_);
}

KvRowFormat KvRowCodec::format(int layer) const {
  KvRowFormat f{dtype_, row_bytes_, nullptr, nullptr};
  if (dtype_ == KvDtype::q8_0_kc)
    f.k_channel_scale = k_channel_scales_.data() + static_cast<size_t>(layer) * kv_dim_;
  if (dtype_ == KvDtype::fp8) {
    f.k_scale = k_scales_.data() + static_cast<size_t>(layer) * n_kv_head_;
    f.v_scale = v_scales_.data() + static_cast<size_t>(layer) * n_kv_head_;
  }
  return f;
}

}  // namespace kvlm
