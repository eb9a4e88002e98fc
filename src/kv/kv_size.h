// kv_size: how many bytes a model's KV cache takes, from its Hugging Face config.json.
//
// This is the seed's formula made into a tool:
//   bytes = values per token per layer * n_layer * min(T, window) * batch * sizeof(dtype)
// where "values per token per layer" is 2 * n_kv_head * head_dim for multi-head and
// grouped-query attention (K and V), and kv_lora_rank + qk_rope_head_dim for DeepSeek's
// multi-head latent attention (one latent, see KvGeometry). Each term is one of the levers the
// seed lists: fewer KV heads (MQA/GQA), a smaller stored vector (MLA), a smaller dtype (fp8,
// int8), fewer kept positions (sliding window), a smaller batch.
//
// Nothing here allocates a cache: it is arithmetic over a config, used by `kvlm kv-size` and by
// anything that sizes a cache arena before allocating it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kvlm/status.h"
#include "ops/kv_format.h"

namespace kvlm::kv {

// The element type the cache stores (ops/kv_format.h). fp8 and int8 take one byte per value;
// fp8's per-(layer, head) scales and int8's scales are not counted (see kv_dtype_bytes). q8_0
// is priced exactly as kvlm's cache stores it: an fp16 scale per 32 values of a row.
using KvDtype = ::kvlm::KvDtype;

// "f32", "f16", "bf16", "fp8", "int8" or "q8_0" (also the spellings float32, fp32, float16,
// fp16, half, bfloat16, fp8_e4m3, fp8_e5m2). Unknown names are an error listing the accepted
// ones.
Result<KvDtype> parse_kv_dtype(std::string_view name);
// Bytes per stored value, scales aside: 4, 2, 2, 1, 1, 1 (q8_0 adds 2 bytes per 32 values).
std::uint64_t kv_dtype_bytes(KvDtype dtype);
// Bytes per value including q8_0's scales: 4, 2, 2, 1, 1, 1.0625.
double kv_dtype_bytes_per_value(KvDtype dtype);

// What the cache formula needs from a model, plus its approximate parameter count so the cache
// can be set beside the weights. All sizes are in elements, not bytes.
struct KvGeometry {
  std::string model;  // preset name, else config.json's model_type, else "unknown"

  std::int64_t n_layer = 0;    // transformer blocks, each with its own K/V
  std::int64_t n_head = 0;     // query heads
  std::int64_t n_kv_head = 0;  // K/V heads: == n_head for MHA, fewer for GQA, 1 for MQA
  std::int64_t head_dim = 0;   // per-head width of K and of V (not used for MLA)

  // Multi-head latent attention (DeepSeek V2/V3). The cache holds, per token and layer, one
  // compressed latent c_kv [kv_lora_rank] and one RoPE key k_pe [qk_rope_head_dim] shared by
  // all heads. It is stored once, not twice: kv_b_proj expands the same latent into both every
  // head's K (no-RoPE part) and every head's V, so there is no separate V to keep, and its
  // up-projection can be absorbed into the query and output projections at decode time (what
  // DeepSeek's FlashMLA and vLLM do), so the expanded K and V are never cached.
  bool mla = false;
  std::int64_t kv_lora_rank = 0;      // width of the latent c_kv
  std::int64_t qk_rope_head_dim = 0;  // width of the shared RoPE key
  std::int64_t qk_nope_head_dim = 0;  // per-head K width recovered from c_kv (for mha_values)
  std::int64_t v_head_dim = 0;        // per-head V width recovered from c_kv (for mha_values)

  // Positions kept per sequence: min(T, sliding_window) when > 0, else T. Applied to every
  // layer; models that interleave windowed and global layers are not modelled.
  std::int64_t sliding_window = 0;
  std::int64_t n_ctx = 0;  // max_position_embeddings / n_positions; 0 when the config has none

  // Approximate parameter count of the model's weights, 0 when the config lacks the fields
  // to count them (weights_note then says which). Biases, norms, embeddings, dense and MoE
  // MLPs are counted; DeepSeek's multi-token-prediction layers (not used for ordinary
  // decoding) and quantization scales are not.
  std::uint64_t n_params = 0;
  std::string weights_note;

  // The checkpoint's own dtype: torch_dtype, or fp8 when quantization_config says so.
  // Empty when the config does not say; Hugging Face then loads float32, as for GPT-2.
  std::string checkpoint_dtype;

  // Values stored per token per layer: 2 * n_kv_head * head_dim, or for MLA
  // kv_lora_rank + qk_rope_head_dim.
  std::uint64_t values_per_token_per_layer() const;
  // What the same model would store per token per layer with full multi-head K and V (one
  // K and one V per query head): 2 * n_head * head_dim, or for MLA
  // n_head * (qk_nope_head_dim + qk_rope_head_dim + v_head_dim). The GQA/MLA lever.
  std::uint64_t mha_values_per_token_per_layer() const;
  // "mha", "gqa", "mqa" or "mla".
  const char* attention_kind() const;
};

// Parses a config.json's text. `source` names it in error messages (a path, or "preset NAME").
// Recognised layouts: GPT-2 (n_layer, n_head, n_embd, n_positions, vocab_size, n_inner);
// Llama/Mistral/Qwen-like (num_hidden_layers, num_attention_heads, num_key_value_heads,
// head_dim or hidden_size / num_attention_heads, intermediate_size, vocab_size,
// tie_word_embeddings, sliding_window, Mixtral and Qwen MoE fields); DeepSeek V2/V3 MLA
// (kv_lora_rank, qk_rope_head_dim, q_lora_rank, n_routed_experts, moe_intermediate_size,
// first_k_dense_replace, ...). A "text_config" object is used when the top level has none of
// these. Missing or non-positive fields are an error naming the field and what was found.
Result<KvGeometry> kv_geometry_from_config_text(std::string_view json_text,
                                                std::string_view source);
// Reads and parses a config.json file.
Result<KvGeometry> kv_geometry_from_config_file(const std::string& path);
// A model whose published config.json values are built in (see kv_preset_names).
Result<KvGeometry> kv_geometry_from_preset(std::string_view name);
// gpt2, gpt2-medium, gpt2-large, gpt2-xl, llama-3.1-8b, llama-3.3-70b, mistral-7b, deepseek-v3.
std::vector<std::string> kv_preset_names();

// The dtype a model's cache has when the user does not choose one: the checkpoint's
// f32/f16/bf16, else f32 (an fp8 checkpoint still computes attention in bf16, so bf16 then).
KvDtype default_kv_dtype(const KvGeometry& geometry);

// The cache's size for `batch` sequences of `seq_len` tokens each. Every byte count is exact
// (integers, overflow-checked).
struct KvSize {
  KvDtype dtype = KvDtype::f32;
  std::int64_t seq_len = 0;
  std::int64_t batch = 0;
  std::int64_t kept_positions = 0;  // min(seq_len, sliding_window) or seq_len

  std::uint64_t values_per_token_per_layer = 0;
  std::uint64_t bytes_per_token_per_layer = 0;  // the rows of one token in one layer, as stored
  std::uint64_t bytes_per_token = 0;            // one more cached token of one sequence, all layers
  std::uint64_t bytes_per_layer = 0;            // one layer's cache: kept_positions * batch tokens
  std::uint64_t bytes = 0;                      // the total: bytes_per_layer * n_layer
  std::uint64_t mha_bytes = 0;  // the total with full multi-head K/V (== bytes for MHA)

  std::uint64_t weights_bytes = 0;             // n_params at sizeof(dtype), the seed's comparison
  std::uint64_t checkpoint_weights_bytes = 0;  // n_params at the checkpoint's dtype, 0 if unknown
};

// Errors: seq_len or batch not positive (naming --seq-len / --batch), a geometry with a
// non-positive size, or a total that does not fit in 64 bits.
Result<KvSize> compute_kv_size(const KvGeometry& geometry, std::int64_t seq_len, std::int64_t batch,
                               KvDtype dtype);

}  // namespace kvlm::kv
