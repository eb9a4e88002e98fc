// LlamaConfig: the hyperparameters of a Llama-family model (Llama 2/3, Mistral, TinyLlama,
// karpathy's TinyStories models), from a Hugging Face config.json (model_type "llama" or
// "mistral") or from a llama2.c model.bin header. The dimensions shared by every architecture
// live in ModelConfig; what only this family has (biases, RoPE scaling, a sliding window)
// sits beside it.
#pragma once

#include <string>
#include <vector>

#include "kvlm/status.h"
#include "model/config.h"

namespace kvlm {

// config.json's rope_scaling: how the rotary frequencies are stretched for long contexts.
// kFactors is the GGUF form of llama3 scaling: llama.cpp's converter stores one divisor per
// frequency (the rope_freqs.weight tensor) instead of the four numbers.
struct RopeScaling {
  enum class Kind { kNone, kLinear, kLlama3, kFactors };
  Kind kind = Kind::kNone;
  float factor = 1.0f;
  float low_freq_factor = 1.0f;      // llama3 only
  float high_freq_factor = 4.0f;     // llama3 only
  int original_max_position = 8192;  // llama3 only
  std::vector<float> freq_factors;   // kFactors only: [head_dim / 2], inv_freq[i] / factor[i]
};

struct LlamaConfig {
  ModelConfig model;            // arch kLlama; n_kv_head < n_head with grouped-query attention
  bool attention_bias = false;  // q/k/v/o projections carry biases
  bool mlp_bias = false;        // gate/up/down projections carry biases
  int sliding_window = 0;       // Mistral: attend to the last `sliding_window` positions; 0: all
  RopeScaling rope_scaling;
};

// Parses a Hugging Face LlamaConfig / MistralConfig config.json (num_hidden_layers,
// num_attention_heads, num_key_value_heads, hidden_size, intermediate_size, head_dim,
// rms_norm_eps, rope_theta, rope_scaling, max_position_embeddings, vocab_size,
// tie_word_embeddings, attention_bias, mlp_bias, hidden_act, sliding_window, bos/eos_token_id),
// with Hugging Face's defaults for absent fields. `source` names the file in errors.
Result<LlamaConfig> parse_llama_config(const std::string& json_text, const std::string& source);

// Checks validate_config's rules plus what RoPE needs (an even head_dim, positive theta).
Status validate_llama_config(const LlamaConfig& config, const std::string& source);

// The config.json text Hugging Face would write for `config` (model_type "llama"); used to
// write test folders and to let `kvlm kv-size` read a llama2.c model.
std::string llama_config_json(const LlamaConfig& config);

// Rotary inverse frequencies [head_dim / 2], rope_theta and rope_scaling applied.
std::vector<float> llama_rope_frequencies(const LlamaConfig& config);

// llama3 scaling as per-frequency divisors [head_dim / 2], as llama.cpp's convert_hf_to_gguf.py
// writes them into rope_freqs.weight (in fp32, its formula and order): 1 for wavelengths below
// original_max_position / high_freq_factor, `factor` above original_max_position /
// low_freq_factor, 1 / ((1 - smooth) / factor + smooth) between. `config` has kind kLlama3.
std::vector<float> llama3_rope_freq_factors(const LlamaConfig& config);

}  // namespace kvlm
