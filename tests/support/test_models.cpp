#include "support/test_models.h"

#include "model/llama_random.h"
#include "model/random_gpt2.h"

namespace kvlm::test {

std::string ModelSpec::name() const {
  std::string out;
  if (format == ModelFormat::kGpt2Folder) {
    out = "gpt2";
  } else {
    const int n_head = tiny_llama_config().model.n_head;
    const int kv = n_kv_head > 0 ? n_kv_head : tiny_llama_config().model.n_kv_head;
    out = std::string("llama_") + (kv == n_head ? "mha" : kv == 1 ? "mqa" : "gqa");
    if (!tied) out += "_untied";
    out += format == ModelFormat::kLlama2cBin ? "_bin" : "_hf";
    if (n_shards > 1) out += std::to_string(n_shards);
  }
  std::string dtype_lower = dtype_name(dtype);
  for (char& ch : dtype_lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  out += "_" + dtype_lower;
  if (quantize) {
    std::string q = dtype_name(*quantize);
    for (char& ch : q) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    out += "_as_" + q;
  }
  return out;
}

ModelSpec gpt2_spec(DType dtype) {
  ModelSpec s;
  s.dtype = dtype;
  return s;
}

ModelSpec llama_spec(ModelFormat format, int n_kv_head, bool tied, DType dtype, int n_shards) {
  ModelSpec s;
  s.format = format;
  s.n_kv_head = n_kv_head;
  s.tied = tied;
  s.dtype = dtype;
  s.n_shards = n_shards;
  return s;
}

ModelSpec quantized(ModelSpec spec, DType type) {
  spec.quantize = type;
  return spec;
}

// Quantized specs: 256 wide (the K-quants' block), heads kept, head_dim grown to match.
constexpr int kQuantizedWidth = 256;

Result<std::unique_ptr<Model>> write_and_load(const ModelSpec& spec, const TempDir& dir,
                                              const LoadOptions& options) {
  std::string path = dir.path();
  if (spec.format == ModelFormat::kGpt2Folder) {
    RandomGpt2Options o;
    o.seed = spec.seed;
    o.dtype = spec.dtype;
    o.separate_lm_head = !spec.tied;
    ModelConfig c = tiny_gpt2_config();
    if (spec.quantize) {
      c.n_embd = c.n_ff = kQuantizedWidth;
      c.head_dim = c.n_embd / c.n_head;
    }
    KVLM_RETURN_IF_ERROR(write_random_gpt2(dir.path(), c, o));
  } else {
    LlamaConfig lc = tiny_llama_config();
    if (spec.quantize) {
      lc.model.n_embd = lc.model.n_ff = kQuantizedWidth;
      lc.model.head_dim = lc.model.n_embd / lc.model.n_head;
    }
    if (spec.n_kv_head > 0) lc.model.n_kv_head = spec.n_kv_head;
    lc.model.tied_embeddings = spec.tied;
    const LlamaHostWeights w = random_llama_weights(lc, spec.seed);
    if (spec.format == ModelFormat::kLlama2cBin) {
      if (spec.dtype != DType::kF32) return Status::error("llama2.c model.bin holds F32 only");
      path = dir.file("model.bin");
      KVLM_RETURN_IF_ERROR(write_llama2c(path, w));
    } else {
      HfWriteOptions o;
      o.dtype = spec.dtype;
      o.n_shards = spec.n_shards;
      KVLM_RETURN_IF_ERROR(write_llama_hf(dir.path(), w, o));
    }
  }
  LoadOptions load = options;
  if (!load.convert_weights) load.convert_weights = spec.quantize;
  return load_model(path, load);
}

}  // namespace kvlm::test
