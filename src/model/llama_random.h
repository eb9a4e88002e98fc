// Seeded random Llama checkpoints, written as real files in both formats kvlm reads: llama2.c's
// model.bin and a Hugging Face folder (config.json + model.safetensors, or shards with an
// index). The tests' own small models, and a stand-in for benchmarks; the text they write is
// meaningless.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/llama_config.h"
#include "ops/dtype.h"

namespace kvlm {

// fp32 weights in llama2.c's layout: [out, in] matrices, layers stacked, q/k rows in run.c's
// pair order (the Hugging Face writer permutes them as Hugging Face's conversion does).
struct LlamaHostWeights {
  LlamaConfig config;
  std::vector<float> embed;       // [V, C]
  std::vector<float> attn_norm;   // [L, C]
  std::vector<float> wq;          // [L, H*D, C]
  std::vector<float> wk;          // [L, G*D, C]
  std::vector<float> wv;          // [L, G*D, C]
  std::vector<float> wo;          // [L, C, H*D]
  std::vector<float> ffn_norm;    // [L, C]
  std::vector<float> w1;          // [L, F, C] gate
  std::vector<float> w2;          // [L, C, F] down
  std::vector<float> w3;          // [L, F, C] up
  std::vector<float> final_norm;  // [C]
  std::vector<float> lm_head;     // [V, C]; empty when config.model.tied_embeddings
};

// A small GQA config for tests: 2 layers, 4 query heads sharing 2 KV heads of width 6,
// 24 wide, 40 hidden, 48 tokens, 32 positions, tied embedding.
LlamaConfig tiny_llama_config();

// Normal weights (std 0.02 scaled up for tiny widths so logits are not flat), norms near 1.
LlamaHostWeights random_llama_weights(const LlamaConfig& config, uint64_t seed);

// llama2.c's legacy model.bin bytes: header (negative vocab when not tied), weights, the
// freq_cis tables run.c skips, then the classifier when not tied.
std::vector<uint8_t> llama2c_bytes(const LlamaHostWeights& weights);
Status write_llama2c(const std::string& path, const LlamaHostWeights& weights);

struct HfWriteOptions {
  DType dtype = DType::kF32;
  int n_shards = 1;          // > 1: model-0000K-of-0000N.safetensors + index.json
  bool model_prefix = true;  // "model.layers..." (LlamaForCausalLM) or bare "layers..."
};
// Writes DIR/config.json and the safetensors (DIR must exist), q_proj/k_proj rows permuted
// as Hugging Face's convert_llama_weights_to_hf.py does.
Status write_llama_hf(const std::string& dir, const LlamaHostWeights& weights,
                      const HfWriteOptions& options);

}  // namespace kvlm
