#include "eval/kv_calibration.h"

#include <algorithm>
#include <cmath>

#include "kv/contiguous_kv_cache.h"

namespace kvlm {

namespace {

// An fp32 contiguous cache that also records max |value| per (layer, KV head) of K and of V,
// and per (layer, channel) of K. `unrotated`: the model hands it keys before RoPE.
class RecordingCache final : public KvCache {
 public:
  RecordingCache(const ModelConfig& c, int capacity, bool unrotated = false)
      : inner_(c.n_layer, c.kv_dim(), {capacity}),
        n_kv_head_(c.n_kv_head),
        head_dim_(c.head_dim),
        unrotated_(unrotated),
        k_max_(static_cast<size_t>(c.n_layer) * c.n_kv_head, 0.0f),
        v_max_(k_max_.size(), 0.0f),
        k_channel_max_(static_cast<size_t>(c.n_layer) * c.kv_dim(), 0.0f) {}

  Status check_reserved(int seq, int n) const override { return inner_.check_reserved(seq, n); }
  void write_row(int seq, int layer, int pos, const float* k, const float* v) override {
    for (int g = 0; g < n_kv_head_; ++g)
      for (int d = 0; d < head_dim_; ++d) {
        const size_t i = static_cast<size_t>(layer) * n_kv_head_ + g;
        k_max_[i] = std::max(k_max_[i], std::fabs(k[g * head_dim_ + d]));
        v_max_[i] = std::max(v_max_[i], std::fabs(v[g * head_dim_ + d]));
        float& channel =
            k_channel_max_[(static_cast<size_t>(layer) * n_kv_head_ + g) * head_dim_ + d];
        channel = std::max(channel, std::fabs(k[g * head_dim_ + d]));
      }
    inner_.write_row(seq, layer, pos, k, v);
  }
  void runs(int seq, int layer, int n, std::vector<KvRun>* out) const override {
    inner_.runs(seq, layer, n, out);
  }
  KvRowFormat row_format(int layer) const override { return inner_.row_format(layer); }
  size_t allocated_bytes() const override { return inner_.allocated_bytes(); }
  bool keys_unrotated() const override { return unrotated_; }

  const std::vector<float>& k_max() const { return k_max_; }
  const std::vector<float>& v_max() const { return v_max_; }
  const std::vector<float>& k_channel_max() const { return k_channel_max_; }

 private:
  ContiguousKvCache inner_;
  int n_kv_head_, head_dim_;
  bool unrotated_;
  std::vector<float> k_max_, v_max_;  // [n_layer * n_kv_head]
  std::vector<float> k_channel_max_;  // [n_layer * kv_dim]
};

// The fixed calibration input through `model` into `cache`.
Status run_calibration(Model& model, KvCache& cache, int n, const Parallel& par) {
  const ModelConfig& c = model.config();
  const std::vector<int32_t> tokens = calibration_tokens(c, n);
  std::vector<float> logits(c.n_vocab);
  const SequenceChunk chunk{0, 0, tokens};
  return model.forward(logits.data(), {&chunk, 1}, cache, par);
}

std::vector<float> scales_from(const std::vector<float>& max_abs) {
  std::vector<float> s;
  // A head that only ever held zeros keeps scale 1 (any scale stores zeros exactly).
  for (float m : max_abs)
    s.push_back(m > 0.0f && std::isfinite(m) ? std::max(m / 112.0f, 0x1p-90f) : 1.0f);
  return s;
}

}  // namespace

std::vector<int32_t> calibration_tokens(const ModelConfig& c, int n) {
  std::vector<int32_t> tokens(n);
  uint64_t state = 0x6b766c6d63616c69ull;  // "kvlmcali": the input never changes
  for (int32_t& t : tokens) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    t = static_cast<int32_t>((state >> 33) % static_cast<uint64_t>(c.n_vocab));
  }
  if (n > 0 && c.bos_token_id >= 0 && c.bos_token_id < c.n_vocab) tokens[0] = c.bos_token_id;
  return tokens;
}

Result<KvStorageOptions> calibrate_fp8_scales(Model& model, const Parallel& par) {
  const ModelConfig& c = model.config();
  const int n = std::min(kCalibrationTokens, c.n_ctx);
  RecordingCache cache(c, n);
  KVLM_RETURN_IF_ERROR(run_calibration(model, cache, n, par));
  KvStorageOptions options;
  options.dtype = KvDtype::fp8;
  options.n_kv_head = c.n_kv_head;
  options.fp8_k_scales = scales_from(cache.k_max());
  options.fp8_v_scales = scales_from(cache.v_max());
  return options;
}

Result<KvStorageOptions> calibrate_key_channel_scales(Model& model, const Parallel& par) {
  const ModelConfig& c = model.config();
  const int n = std::min(kCalibrationTokens, c.n_ctx);
  RecordingCache cache(c, n, true);
  KVLM_RETURN_IF_ERROR(run_calibration(model, cache, n, par));
  KvStorageOptions options;
  options.dtype = KvDtype::q8_0_kc;
  for (float m : cache.k_channel_max())
    options.k_channel_scales.push_back(m > 0.0f && std::isfinite(m) ? std::max(m, 0x1p-90f) : 1.0f);
  return options;
}

Result<KvStorageOptions> calibrated_kv_storage(KvDtype dtype, Model& model, const Parallel& par) {
  if (dtype == KvDtype::fp8) return calibrate_fp8_scales(model, par);
  if (dtype == KvDtype::q8_0_kc) return calibrate_key_channel_scales(model, par);
  KvStorageOptions options;
  options.dtype = dtype;
  return options;
}

}  // namespace kvlm
