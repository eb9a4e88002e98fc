// fp8 KV cache scales, one per (layer, KV head) for K and for V, chosen from the model alone so
// that they are fixed before any request: a fixed calibration input (the model's BOS, then
// pseudo-random ids from a constant seed: kCalibrationTokens in all, or the model's context if
// shorter) runs once through the model with an fp32 cache, and each scale maps the largest |value| seen in its (layer,
// head) to 112 = 448 / 4, leaving two binades of e4m3's range above it before values saturate.
// The scales then never change, so a row's stored bytes depend on that row alone and paging,
// prefix sharing, batching and arrival order stay bitwise (docs/kv_cache_quantization.md).
#pragma once

#include <cstdint>
#include <vector>

#include "kv/kv_cache.h"
#include "kvlm/status.h"
#include "model/model.h"
#include "ops/parallel.h"

namespace kvlm {

constexpr int kCalibrationTokens = 256;

// The calibration input of n tokens: pseudo-random ids from a constant seed, the first replaced
// by the model's BOS when it has one. Position 0 of a real sequence holds BOS (llama2.c and
// Hugging Face Llama tokenizers put it there, llama-perplexity too), and its keys are the
// attention sink's, the row every later query reads and the largest in several channels: scales
// that never saw it leave that row's other channels few levels (docs/kv_cache_quantization.md).
std::vector<int32_t> calibration_tokens(const ModelConfig& c, int n);

// KvStorageOptions{fp8, n_kv_head, k scales, v scales} for `model`.
Result<KvStorageOptions> calibrate_fp8_scales(Model& model, const Parallel& par);

// KvStorageOptions{q8_0_kc, k_channel_scales} for `model`: the same input, keys recorded before
// RoPE, each (layer, channel) scale the largest |key| seen there (1 where only zeros were), so a
// channel's values reach about +-1 before q8_0 blocks them: KVQuant's pre-RoPE per-channel keys
// in ggml's block format (docs/kv_cache_quantization.md).
Result<KvStorageOptions> calibrate_key_channel_scales(Model& model, const Parallel& par);

// The storage a `dtype` cache of `model` uses: calibrated for fp8 and q8_0_kc, plain otherwise.
Result<KvStorageOptions> calibrated_kv_storage(KvDtype dtype, Model& model, const Parallel& par);

}  // namespace kvlm
