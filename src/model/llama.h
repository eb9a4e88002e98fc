// Llama-family transformer (Llama 2/3, Mistral, TinyLlama, karpathy's llama2.c models): token
// embedding, pre-norm blocks of RMSNorm -> grouped-query attention with rotary embeddings ->
// RMSNorm -> SwiGLU feed-forward, a final RMSNorm and the output head (tied to the embedding or
// its own). Reads like llama2.c's forward(); weights come from a llama2.c model.bin
// (llama2c.h) or a Hugging Face folder (llama_hf.h), both bound into the same LlamaWeights.
//
// Grouped-query attention: the cache holds n_kv_head (G) heads per position; query head h reads
// key/value head h / (H / G). With G < H the cache is H / G times smaller than multi-head K/V.
//
// Dimension letters: T rows (new tokens of all sequences this step), C = n_embd, H = n_head,
// G = n_kv_head, D = head_dim, F = n_ff, V = n_vocab.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/checkpoint_binder.h"
#include "model/decoder_model.h"
#include "model/llama_config.h"
#include "model/model.h"
#include "ops/rope.h"

namespace kvlm {

// Every matrix is [out, in] (nn.Linear, WeightLayout::kOutIn). Bias pointers are null unless
// the config asks for biases.
struct LlamaLayer {
  const float* attn_norm = nullptr;  // [C] rms_att_weight / input_layernorm
  WeightMatrix wq;                   // [H*D, C] rows of each head in run.c's pair order
  WeightMatrix wk;                   // [G*D, C] same order as wq
  WeightMatrix wv;                   // [G*D, C]
  WeightMatrix wo;                   // [C, H*D]
  const float* bq = nullptr;         // [H*D]
  const float* bk = nullptr;         // [G*D]
  const float* bv = nullptr;         // [G*D]
  const float* bo = nullptr;         // [C]
  const float* ffn_norm = nullptr;   // [C] rms_ffn_weight / post_attention_layernorm
  WeightMatrix w1;                   // [F, C] gate_proj
  WeightMatrix w3;                   // [F, C] up_proj
  WeightMatrix w2;                   // [C, F] down_proj
  const float* b1 = nullptr;         // [F]
  const float* b3 = nullptr;         // [F]
  const float* b2 = nullptr;         // [C]
};

struct LlamaWeights {
  WeightMatrix embed;  // [V, C] token embedding (also the output head when tied)
  std::vector<LlamaLayer> layers;
  const float* final_norm = nullptr;  // [C]
  WeightMatrix lm_head;               // [V, C] == embed when tied
};

// Activations for one forward step, grown (never shrunk) to the largest step seen.
struct LlamaRunState {
  std::vector<float> x;        // [T, C] residual stream
  std::vector<float> xn;       // [T, C] normalised input of a sub-block
  std::vector<float> q;        // [T, H*D]
  std::vector<float> k;        // [T, G*D] (copied into the cache after rotation)
  std::vector<float> v;        // [T, G*D]
  std::vector<float> att;      // [T, H*D] attention output, heads side by side
  std::vector<float> proj;     // [T, C] output of wo or w2 before the residual add
  std::vector<float> gate;     // [T, F] w1 output, then silu(gate) * up
  std::vector<float> up;       // [T, F] w3 output
  std::vector<float> scratch;  // [n_threads, n_ctx] attention scores
};

class LlamaModel final : public DecoderModel {
 public:
  // Takes bound weights (shapes already checked by the loader) and what keeps them alive.
  // `source` describes the checkpoint for messages.
  static Result<std::unique_ptr<LlamaModel>> create(LlamaConfig config, LlamaWeights weights,
                                                    std::unique_ptr<WeightStorage> storage,
                                                    std::string source);

  const ModelConfig& config() const override { return config_.model; }
  const LlamaConfig& llama_config() const { return config_; }
  const LlamaWeights& weights() const { return weights_; }
  const std::string& source() const { return source_; }
  size_t weight_bytes() const override;
  std::string weight_dtype() const override { return dtype_name(weights_.embed.dtype); }
  std::string weight_types() const override;
  // A window must fit the context (its positions are 0 .. W-1) and, for a model with its own
  // sliding window (Mistral), within that.
  Status check_kv_window(const KvWindow& window) const override;

 protected:
  void prepare(size_t n_rows, const Parallel& par) override;
  float* embed(std::span<const SequenceChunk> chunks) override;
  void layer_forward(int layer, float* x, int n_rows, std::span<const SequenceChunk> chunks,
                     KvCache& cache, const Parallel& par) override;
  void final_norm(float* out, const float* x) const override;
  const WeightMatrix& output_head() const override { return weights_.lm_head; }

 private:
  LlamaModel(LlamaConfig config, LlamaWeights weights, std::unique_ptr<WeightStorage> storage,
             std::string source);
  void attention_block(int layer, std::span<const SequenceChunk> chunks, KvCache& cache,
                       const Parallel& par);

  LlamaConfig config_;
  LlamaWeights weights_;
  std::unique_ptr<WeightStorage> storage_;
  std::string source_;
  std::vector<float> inv_freq_;  // [D/2] rotary frequencies
  RopeTable window_rope_;        // cos/sin of positions [0, W) once a cache window is used
  LlamaRunState state_;
};

// The row permutation Hugging Face's conversion applies to q_proj / k_proj (so that its RoPE
// rotates halves), undone: within each of `n_heads` heads of `head_dim` rows, row c * D/2 + i of
// the Hugging Face matrix becomes row 2i + c (c in {0, 1}). `row_bytes` is one row's size; also
// used for biases (row_bytes = element size). dst and src must not overlap.
void unpermute_rotary_rows(void* dst, const void* src, int n_heads, int head_dim, size_t row_bytes);
// The forward direction (run.c order -> Hugging Face order), for writing Hugging Face folders.
void permute_rotary_rows(void* dst, const void* src, int n_heads, int head_dim, size_t row_bytes);

}  // namespace kvlm
