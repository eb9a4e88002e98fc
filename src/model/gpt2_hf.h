// GPT-2 from a Hugging Face folder: config.json and model.safetensors, or the shards named by
// model.safetensors.index.json.
//
// Tensor names (GPT2Model; GPT2LMHeadModel puts "transformer." in front of each):
//   wte.weight [V, C], wpe.weight [n_ctx, C]
//   h.N.ln_1.{weight,bias} [C]
//   h.N.attn.c_attn.{weight [C, 3C], bias [3C]}, h.N.attn.c_proj.{weight [C, C], bias [C]}
//   h.N.ln_2.{weight,bias} [C]
//   h.N.mlp.c_fc.{weight [C, 4C], bias [4C]}, h.N.mlp.c_proj.{weight [4C, C], bias [C]}
//   ln_f.{weight,bias} [C]
//   lm_head.weight [V, C] (top level; absent when the head is tied to wte)
// GPT-2's Conv1D stores its matrices [in, out] (WeightLayout::kInOut); wte and lm_head are
// [out, in].
#pragma once

#include <memory>
#include <string>

#include "model/gpt2.h"

namespace kvlm {

// Loads DIR/config.json and the folder's safetensors, checking every tensor's presence and shape.
Result<std::unique_ptr<Gpt2Model>> load_gpt2(const std::string& dir, const LoadOptions& options);

// Binds an already open checkpoint (e.g. built in memory) with a parsed config; whether the
// head is tied is decided by the checkpoint (lm_head.weight present or not).
Result<std::unique_ptr<Gpt2Model>> create_gpt2_hf(ModelConfig config, Checkpoint checkpoint,
                                                  const LoadOptions& options);

}  // namespace kvlm
