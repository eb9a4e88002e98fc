// Models from GGUF files: architectures "gpt2" and "llama" (Llama 2/3, Mistral, TinyLlama,
// llama2.c conversions), hyperparameters from the `<arch>.*` keys, tensors used in place from
// the mapping (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K; misaligned ones are copied). Every
// matrix is ggml's [n_out, n_in] (WeightLayout::kOutIn). Llama's q/k rows are stored in the
// original (Meta / run.c) pair order, which is what kvlm's RoPE rotates: no permutation.
#pragma once

#include <memory>
#include <string>

#include "model/gguf.h"
#include "model/gguf_export.h"
#include "model/gpt2.h"
#include "model/model.h"

namespace kvlm {

// Architectures and their tensor names, for messages and for the writer.
inline constexpr const char* kGgufArchitectures = "gpt2, llama";

Result<std::unique_ptr<Model>> load_gguf_model(const std::string& path, const LoadOptions& options);
// The same from a parsed file (tests, the fuzz target). The model keeps `file` alive; a file
// parsed from a caller's buffer needs that buffer to outlive the model.
Result<std::unique_ptr<Model>> create_gguf_model(GgufFile file, const LoadOptions& options);

// `model` stored as `kvlm convert --type` would store it (`types`: q4_k_mix's per-tensor
// choice), through the same writer, in memory: `--weights q4_k_mix` at load, so the loaded
// matrices hold a converted file's bytes. Matrices are quantized on `n_threads` threads (the
// bytes do not depend on it). Refused for what kvlm cannot write as GGUF (biases in Llama).
// `source` names the model in messages.
Result<std::unique_ptr<Model>> restore_as_gguf(const Model& model, const GgufTypes& types,
                                               int n_threads, const std::string& source);

// Whether `path` is a file that begins with GGUF's magic (how kvlm recognises GGUF, whatever the
// file's name).
bool has_gguf_magic(const std::string& path);

// The config.json text Hugging Face would write for `model` (model_type "gpt2" or "llama"), for
// `kvlm kv-size --model FILE.gguf`, which sizes caches from configs. torch_dtype is the
// matrices' type when it is F32, F16 or BF16 and absent for quantized files.
std::string gguf_model_config_json(const Model& model);

}  // namespace kvlm
