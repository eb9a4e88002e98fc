// GPT-2 (openai-community/gpt2 up to gpt2-xl and their fine-tunes) from a Hugging Face
// checkpoint: token + learned position embeddings, pre-LN blocks of causal multi-head
// attention and a gelu_new MLP, a final layer norm, logits through the tied embedding (or
// lm_head.weight when the checkpoint has its own). Reads like picoGPT's gpt2.py; names follow
// the checkpoint (wte, wpe, ln_1, c_attn, c_proj, c_fc, ln_f).
//
// Dimension letters: T rows (new tokens of all sequences this step), C = n_embd, V = n_vocab.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/checkpoint_binder.h"
#include "model/decoder_model.h"
#include "model/model.h"

namespace kvlm {

struct Gpt2Layer {
  const float* ln_1_weight;       // [C]
  const float* ln_1_bias;         // [C]
  WeightMatrix c_attn;            // [C, 3C] (q, k, v side by side)
  const float* c_attn_bias;       // [3C]
  WeightMatrix attn_c_proj;       // [C, C]
  const float* attn_c_proj_bias;  // [C]
  const float* ln_2_weight;       // [C]
  const float* ln_2_bias;         // [C]
  WeightMatrix c_fc;              // [C, 4C]
  const float* c_fc_bias;         // [4C]
  WeightMatrix mlp_c_proj;        // [4C, C]
  const float* mlp_c_proj_bias;   // [C]
};

struct Gpt2Weights {
  WeightMatrix wte;  // [V, C]: token embedding, and the output head when tied
  const float* wpe;  // [n_ctx, C]: position embedding
  std::vector<Gpt2Layer> layers;
  const float* ln_f_weight;  // [C]
  const float* ln_f_bias;    // [C]
  WeightMatrix lm_head;      // [V, C]: == wte unless the checkpoint stores its own
};

// Activations for one forward step, grown (never shrunk) to the largest step seen.
struct Gpt2RunState {
  std::vector<float> x;        // [T, C] residual stream
  std::vector<float> xn;       // [T, C] normalised input of a sub-block
  std::vector<float> qkv;      // [T, 3C]
  std::vector<float> att;      // [T, C] attention output, heads side by side
  std::vector<float> ff;       // [T, 4C] MLP hidden
  std::vector<float> proj;     // [T, C] output of a projection before the residual add
  std::vector<float> scratch;  // [n_threads, n_ctx] attention scores
};

class Gpt2Model final : public DecoderModel {
 public:
  // Takes bound weights (shapes already checked by the loader: gpt2_hf.h, gguf_model.h) and
  // what keeps them alive. `source` describes the checkpoint for messages.
  static Result<std::unique_ptr<Gpt2Model>> create(ModelConfig config, Gpt2Weights weights,
                                                   std::unique_ptr<WeightStorage> storage,
                                                   std::string source);

  const Gpt2Weights& weights() const { return weights_; }
  const std::string& source() const { return source_; }

  const ModelConfig& config() const override { return config_; }
  size_t weight_bytes() const override;
  std::string weight_dtype() const override { return dtype_name(weights_.wte.dtype); }
  std::string weight_types() const override;

 protected:
  void prepare(size_t n_rows, const Parallel& par) override;
  float* embed(std::span<const SequenceChunk> chunks) override;
  void layer_forward(int layer, float* x, int n_rows, std::span<const SequenceChunk> chunks,
                     KvCache& cache, const Parallel& par) override;
  void final_norm(float* out, const float* x) const override;
  const WeightMatrix& output_head() const override { return weights_.lm_head; }

 private:
  Gpt2Model(ModelConfig config, Gpt2Weights weights, std::unique_ptr<WeightStorage> storage,
            std::string source);
  void attention_block(int layer, std::span<const SequenceChunk> chunks, KvCache& cache,
                       const Parallel& par);

  ModelConfig config_;
  Gpt2Weights weights_;
  std::unique_ptr<WeightStorage> storage_;
  std::string source_;
  Gpt2RunState state_;
};

}  // namespace kvlm
