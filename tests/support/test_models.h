// The small models tests run, described by value so that a parameterised suite can list them and
// name its cases: architecture, file format, attention layout (KV heads), tied or untied head,
// shards and weight dtype. Each is seeded random weights written as real files and loaded back
// through load_model, the path users take.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "kvlm/status.h"
#include "model/loader.h"
#include "model/model.h"
#include "ops/dtype.h"
#include "support/test_support.h"

namespace kvlm::test {

enum class ModelFormat {
  kGpt2Folder,  // GPT-2: config.json + model.safetensors
  kLlama2cBin,  // Llama: llama2.c model.bin
  kLlamaHf,     // Llama: Hugging Face folder (q/k rows permuted, undone on load)
};

struct ModelSpec {
  ModelFormat format = ModelFormat::kGpt2Folder;
  DType dtype = DType::kF32;  // storage of the big matrices (llama2.c .bin: F32 only)
  int n_kv_head = 0;          // Llama: 0 keeps the tiny config's 2 of 4 heads (GQA)
  bool tied = true;           // output head shares the token embedding
  int n_shards = 1;           // Hugging Face Llama: > 1 writes an index and shards
  uint64_t seed = 42;
  // --weights at load: the matrices quantized to this type. The model is then 256 wide (n_embd
  // and n_ff), so that every matrix holds whole blocks of every type, the K-quants' 256 too.
  std::optional<DType> quantize;

  Architecture arch() const {
    return format == ModelFormat::kGpt2Folder ? Architecture::kGpt2 : Architecture::kLlama;
  }
  // "gpt2_f32", "llama_gqa_bin_f32", "llama_mqa_untied_hf_bf16", "llama_gqa_hf3_f32" (3 shards),
  // "gpt2_f32_as_q4_k" (quantized at load).
  std::string name() const;
};
inline void PrintTo(const ModelSpec& spec, std::ostream* os) {
  *os << spec.name();
}

// The shortcuts suites list.
ModelSpec gpt2_spec(DType dtype = DType::kF32);
ModelSpec llama_spec(ModelFormat format, int n_kv_head, bool tied = true, DType dtype = DType::kF32,
                     int n_shards = 1);
// `spec` with its matrices quantized to `type` at load.
ModelSpec quantized(ModelSpec spec, DType type);

// Writes the spec's files into `dir` (GPT-2 with test::tiny_gpt2_config(), Llama with
// tiny_llama_config(), both widened for `quantize`) and loads them (with spec.quantize as
// options.convert_weights unless `options` sets one).
Result<std::unique_ptr<Model>> write_and_load(const ModelSpec& spec, const TempDir& dir,
                                              const LoadOptions& options = {});

}  // namespace kvlm::test
