// Writing a loaded model (and its tokenizer) as a GGUF file that kvlm and llama.cpp both read:
// `kvlm convert`. Matrices are stored as `type` in ggml's [n_out, n_in] order (GPT-2's Conv1D
// weights transposed, as llama.cpp's convert_hf_to_gguf.py does), norms, biases and GPT-2's
// position embedding as F32, Llama's q/k rows in the pair order kvlm (and ggml) rotate.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/model.h"
#include "ops/dtype.h"
#include "tokenizer/tokenizer.h"

namespace kvlm {

// How the weight matrices are stored (`kvlm convert --type`): all in one type, or the K-quant
// mix `q4_k_mix`: llama.cpp's Q4_K_M choice (llama_tensor_get_type) for dense models: Q6_K for
// the output head (the token embedding when the head is tied to it) and for attn_v and
// ffn_down in the layers llama.cpp's use_more_bits picks (the first and last eighth, every
// third between), Q4_K for every other matrix. Where Q4_K_M picks Q5_K (GPT-2's fused
// attn_qkv, Llama 70B's attn_v, MoE models) kvlm, which has no Q5_K, keeps Q4_K.
struct GgufTypes {
  DType type = DType::kF32;
  bool q4_k_mix = false;
};

// "f32", "f16", "bf16", "q8_0", "q4_0", "q5_0", "q4_k", "q6_k" or "q4_k_mix".
std::optional<GgufTypes> parse_gguf_types(std::string_view name);

// The type the tensor `name` ("blk.3.ffn_down.weight", "output.weight") is stored in, in a
// model of n_layer blocks (`tied_head`: no output.weight, the embedding is the head).
DType gguf_matrix_type(const GgufTypes& types, const std::string& name, int n_layer,
                       bool tied_head);

// What a matrix of input width n_in, chosen to be `preferred`, is stored as:
// stored_weight_type (model/quantize_weights.h), the rule `--weights` follows too: `preferred`
// when its rows are whole blocks, else llama.cpp's fallback (Q4_K -> Q5_0, Q6_K -> Q8_0, then
// F16), else `source`.
DType gguf_stored_type(const GgufTypes& types, DType preferred, int64_t n_in, DType source);

// `tokenizer` may be null (then the file has no tokenizer.ggml.* keys). Supported tokenizers:
// byte-level BPE (GPT-2, Llama 3) and llama2.c / SentencePiece vocabularies with scores.
// Matrices are converted with `n_threads` threads (the bytes do not depend on it).
Status write_gguf(const Model& model, const Tokenizer* tokenizer, const GgufTypes& types,
                  const std::string& path, int n_threads = 1);
// The file write_gguf writes (without a tokenizer), in memory: `--weights q4_k_mix` at load.
Result<std::vector<uint8_t>> gguf_bytes(const Model& model, const GgufTypes& types, int n_threads);
inline Status write_gguf(const Model& model, const Tokenizer* tokenizer, DType type,
                         const std::string& path) {
  return write_gguf(model, tokenizer, GgufTypes{type, false}, path);
}

}  // namespace kvlm
