// ModelConfig: a model's hyperparameters in one vocabulary of dimensions, shared by every
// architecture (GPT-2 and the Llama family). Parsed from a Hugging Face config.json and
// validated before anything is sized from it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvlm/status.h"

namespace kvlm {

enum class Architecture { kGpt2, kLlama };

struct ModelConfig {
  Architecture arch = Architecture::kGpt2;
  int n_vocab = 0;    // V: vocabulary size
  int n_ctx = 0;      // longest sequence the position embeddings (or rope config) allow
  int n_embd = 0;     // C: residual stream width
  int n_layer = 0;    // L: transformer blocks
  int n_head = 0;     // query heads
  int n_kv_head = 0;  // key/value heads (== n_head for GPT-2; fewer with grouped-query attention)
  int head_dim = 0;   // per-head width (n_embd / n_head for GPT-2)
  int n_ff = 0;       // feed-forward hidden width (4 * n_embd for GPT-2)
  float norm_eps = 1e-5f;
  float rope_theta = 10000.0f;         // Llama only
  bool tied_embeddings = true;         // output head shares the token embedding
  int eos_token_id = -1;               // -1 when the config names none; the first of eos_token_ids
  std::vector<int32_t> eos_token_ids;  // every end-of-sequence id the config lists
  int bos_token_id = -1;

  int kv_dim() const { return n_kv_head * head_dim; }  // width of one cached K (or V) row
  int q_dim() const { return n_head * head_dim; }
  // Bytes of K and V for one token across all layers (the seed's formula without T and B).
  int64_t kv_bytes_per_token(size_t dtype_size) const {
    return 2LL * n_layer * n_kv_head * head_dim * static_cast<int64_t>(dtype_size);
  }
};

// Parses a GPT-2 config.json (n_embd, n_layer, n_head, n_positions, vocab_size, ...).
// `source` names the file in error messages.
Result<ModelConfig> parse_gpt2_config(const std::string& json_text, const std::string& source);

// Checks sizes shared by every architecture (positive, heads dividing widths).
Status validate_config(const ModelConfig& config, const std::string& source);

}  // namespace kvlm
