// Llama-family models from a Hugging Face folder: config.json (model_type "llama" or
// "mistral") and model.safetensors, or the shards named by model.safetensors.index.json.
//
// Tensor names (LlamaForCausalLM; a bare LlamaModel lacks the "model." prefix):
//   model.embed_tokens.weight [V, C]
//   model.layers.N.input_layernorm.weight [C]
//   model.layers.N.self_attn.{q,k,v,o}_proj.weight [H*D, C], [G*D, C], [G*D, C], [C, H*D]
//     (+ .bias when attention_bias)
//   model.layers.N.post_attention_layernorm.weight [C]
//   model.layers.N.mlp.{gate,up,down}_proj.weight [F, C], [F, C], [C, F] (+ .bias when mlp_bias)
//   model.norm.weight [C]
//   lm_head.weight [V, C] (absent when tie_word_embeddings)
//
// Hugging Face's conversion permutes the rows of q_proj and k_proj so that its RoPE rotates
// halves (rotate_half); we undo that on load (a copy of q and k) and use run.c's pair rotation.
#pragma once

#include <memory>
#include <string>

#include "model/llama.h"

namespace kvlm {

// Loads DIR/config.json and the folder's safetensors, checking every tensor's presence and shape.
Result<std::unique_ptr<LlamaModel>> load_llama_hf(const std::string& dir,
                                                  const LoadOptions& options);

// Binds an already open checkpoint (e.g. built in memory) with a parsed config.
Result<std::unique_ptr<LlamaModel>> create_llama_hf(LlamaConfig config, Checkpoint checkpoint,
                                                    const LoadOptions& options);

}  // namespace kvlm
