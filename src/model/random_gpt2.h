// Seeded random GPT-2 checkpoints: the demo's and benchmark's default model when no real one
// is at hand (no network here), and the tests' own small models. Weights follow GPT-2's init
// (normal, std 0.02); the text such a model writes is meaningless.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/gpt2.h"
#include "ops/dtype.h"

namespace kvlm {

struct RandomGpt2Options {
  uint64_t seed = 1234;
  DType dtype = DType::kF32;
  bool transformer_prefix = false;  // name tensors "transformer.h.0..." (GPT2LMHeadModel)
  bool separate_lm_head = false;    // store lm_head.weight instead of tying to wte
};

// GPT-2 124M's shape: 12 layers, 12 heads, 768 wide, 1024 positions, 50257 tokens.
ModelConfig gpt2_small_config();

std::string gpt2_config_json(const ModelConfig& config);
std::vector<uint8_t> random_gpt2_safetensors(const ModelConfig& config,
                                             const RandomGpt2Options& options);
// Writes DIR/config.json and DIR/model.safetensors (DIR must exist).
Status write_random_gpt2(const std::string& dir, const ModelConfig& config,
                         const RandomGpt2Options& options);
// Builds the model in memory, without touching the file system.
Result<std::unique_ptr<Gpt2Model>> make_random_gpt2(const ModelConfig& config,
                                                    const RandomGpt2Options& options);

}  // namespace kvlm
