#include "model/gguf_model.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "model/gguf_export.h"
#include "model/llama.h"
#include "model/quantize_weights.h"
#include "model/random_gpt2.h"
#include "ops/quant.h"

namespace kvlm {

namespace {

// Largest context kvlm accepts from a file: attention scratch is sized by it.
constexpr uint64_t kMaxContext = 1 << 20;

struct GgufStorage {
  GgufFile file;
  OwnedTensors owned;
  std::vector<uint8_t> bytes;  // the file, when it was made in memory (restore_as_gguf)
};

// Binds tensors of a parsed file into weight views, checking names, shapes and types.
class GgufBinder {
 public:
  GgufBinder(GgufStorage* storage, const LoadOptions& options)
      : f_(storage->file), owned_(&storage->owned), options_(options) {}

  bool has(const std::string& name) const { return f_.tensor(name) != nullptr; }

  // A tensor of shape ne (ggml order, ne[0] contiguous; missing trailing dims are 1).
  Result<const GgufTensor*> require(const std::string& name, std::vector<int64_t> ne) const {
    const GgufTensor* t = f_.tensor(name);
    if (!t)
      return Status::error(f_.source() + ": missing tensor '" + name + "'" + " of shape " +
                           shape_string(ne));
    ne.resize(4, 1);
    if (!std::equal(ne.begin(), ne.end(), t->ne))
      return Status::error(f_.where_tensor(name) + ": shape " +
                           shape_string({t->ne, t->ne + std::max(t->n_dims, 1)}) + ", expected " +
                           shape_string({ne.begin(), ne.begin() + 2}) +
                           " (ggml order, ne[0] first)");
    return t;
  }

  // An [n_out, n_in] matrix, in place when its type and alignment allow.
  Status matrix(const std::string& name, int64_t n_out, int64_t n_in, WeightMatrix* out) {
    KVLM_ASSIGN_OR_RETURN(const GgufTensor* t, require(name, {n_in, n_out}));
    WeightMatrix m;
    m.data = t->data;
    m.dtype = t->dtype;
    m.layout = WeightLayout::kOutIn;
    m.n_in = static_cast<int>(n_in);
    m.n_out = static_cast<int>(n_out);
    const size_t align = m.dtype == DType::kF32 ? 4 : 2;
    const bool aligned = reinterpret_cast<uintptr_t>(m.data) % align == 0;
    const DType to = options_.convert_weights.value_or(m.dtype);
    if (to == m.dtype && aligned) {
      *out = m;
      return Status::ok();
    }
    KVLM_ASSIGN_OR_RETURN(
        *out,
        to == m.dtype
            ? convert_weight_matrix(m, to, owned_, f_.where_tensor(name), options_.n_threads)
            : convert_matrix_on_load(m, to, owned_, f_.where_tensor(name), options_.n_threads));
    return Status::ok();
  }

  // A vector of n values widened to an owned fp32 array.
  Status vector(const std::string& name, int64_t n, const float** out) {
    KVLM_ASSIGN_OR_RETURN(const GgufTensor* t, require(name, {n}));
    float* dst = static_cast<float*>(owned_->allocate(sizeof(float) * n));
    dequantize_row(dst, t->data, t->dtype, n);
    *out = dst;
    return Status::ok();
  }

 private:
  const GgufFile& f_;
  OwnedTensors* owned_;
  const LoadOptions& options_;
};

// A hyperparameter `<arch>.<key>` as an int in [lo, hi]; `fallback` when absent (if given).
Result<int> hparam(const GgufFile& f, const std::string& key, int64_t lo, int64_t hi,
                   std::optional<int64_t> fallback = std::nullopt) {
  if (!f.find(key) && fallback) return static_cast<int>(*fallback);
  KVLM_ASSIGN_OR_RETURN(const uint64_t v, f.get_uint(key));
  if (static_cast<int64_t>(v) < lo || v > static_cast<uint64_t>(hi))
    return Status::error(f.where_key(key) + ": expected a value in [" + std::to_string(lo) + ", " +
                         std::to_string(hi) + "], found " + std::to_string(v));
  return static_cast<int>(v);
}

Result<float> hparam_float(const GgufFile& f, const std::string& key, float fallback) {
  if (!f.find(key)) return fallback;
  KVLM_ASSIGN_OR_RETURN(const double v, f.get_float(key));
  if (!(v > 0.0) || !(v < 1e30))
    return Status::error(f.where_key(key) + ": expected a positive finite number, found " +
                         std::to_string(v));
  return static_cast<float>(v);
}

// The dimensions every architecture shares; n_vocab from token_embd.weight's rows.
Status read_common(const GgufFile& f, const std::string& arch, ModelConfig* c) {
  const GgufTensor* embd = f.tensor("token_embd.weight");
  if (!embd) return Status::error(f.source() + ": missing tensor 'token_embd.weight'");
  if (embd->n_dims != 2 || embd->ne[1] > INT32_MAX || embd->ne[1] < 1)
    return Status::error(f.where_tensor("token_embd.weight") +
                         ": expected 2 dimensions [n_embd, n_vocab]");
  c->n_vocab = static_cast<int>(embd->ne[1]);
  const int64_t n_tensors = static_cast<int64_t>(f.tensors().size());
  auto n_ctx = hparam(f, arch + ".context_length", 1, kMaxContext);
  auto n_embd = hparam(f, arch + ".embedding_length", 1, INT32_MAX);
  // Each block has several tensors: a count above the file's tensors is refused before anything
  // is sized from it.
  auto n_layer = hparam(f, arch + ".block_count", 1, n_tensors);
  auto n_head = hparam(f, arch + ".attention.head_count", 1, INT32_MAX);
  auto n_ff = hparam(f, arch + ".feed_forward_length", 1, INT32_MAX);
  for (const auto* r : {&n_ctx, &n_embd, &n_layer, &n_head, &n_ff})
    if (!*r) return r->status();
  c->n_ctx = n_ctx.value();
  c->n_embd = n_embd.value();
  c->n_layer = n_layer.value();
  c->n_head = n_head.value();
  c->n_ff = n_ff.value();
  if (c->n_embd % c->n_head != 0 && !f.find(arch + ".attention.key_length"))
    return Status::error(f.where_key(arch + ".attention.head_count") + ": expected a divisor of " +
                         arch + ".embedding_length (" + std::to_string(c->n_embd) + "), found " +
                         std::to_string(c->n_head) + " (the head size must be whole)");
  c->head_dim = c->n_embd / c->n_head;
  KVLM_ASSIGN_OR_RETURN(c->n_kv_head,
                        hparam(f, arch + ".attention.head_count_kv", 1, c->n_head, c->n_head));
  // Special tokens, checked against the vocabulary.
  for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"}) {
    if (!f.find(key)) continue;
    KVLM_ASSIGN_OR_RETURN(const int id, hparam(f, key, 0, c->n_vocab - 1));
    if (std::string(key).find("bos") != std::string::npos) {
      c->bos_token_id = id;
    } else {
      c->eos_token_id = id;
      c->eos_token_ids = {id};
    }
  }
  return Status::ok();
}

std::string block(int l) {
  return "blk." + std::to_string(l) + ".";
}

Result<std::unique_ptr<Model>> create_gpt2(std::shared_ptr<GgufStorage> storage,
                                           const LoadOptions& options) {
  const GgufFile& f = storage->file;
  ModelConfig c;
  c.arch = Architecture::kGpt2;
  KVLM_RETURN_IF_ERROR(read_common(f, "gpt2", &c));
  KVLM_ASSIGN_OR_RETURN(c.norm_eps, hparam_float(f, "gpt2.attention.layer_norm_epsilon", 1e-5f));
  if (c.n_kv_head != c.n_head)
    return Status::error(f.where_key("gpt2.attention.head_count_kv") + ": expected " +
                         std::to_string(c.n_head) + " (GPT-2 has no grouped-query attention)");
  KVLM_RETURN_IF_ERROR(validate_config(c, f.source()));
  const int64_t C = c.n_embd, F = c.n_ff, V = c.n_vocab;
  GgufBinder b(storage.get(), options);
  Gpt2Weights w;
  KVLM_RETURN_IF_ERROR(b.matrix("token_embd.weight", V, C, &w.wte));
  {  // [n_ctx, C], widened to fp32
    KVLM_ASSIGN_OR_RETURN(const GgufTensor* t, b.require("position_embd.weight", {C, c.n_ctx}));
    float* pe = static_cast<float*>(storage->owned.allocate(sizeof(float) * C * c.n_ctx));
    dequantize_row(pe, t->data, t->dtype, C * c.n_ctx);
    w.wpe = pe;
  }
  w.layers.resize(c.n_layer);
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = block(l);
    Gpt2Layer& L = w.layers[l];
    KVLM_RETURN_IF_ERROR(b.vector(p + "attn_norm.weight", C, &L.ln_1_weight));
    KVLM_RETURN_IF_ERROR(b.vector(p + "attn_norm.bias", C, &L.ln_1_bias));
    KVLM_RETURN_IF_ERROR(b.matrix(p + "attn_qkv.weight", 3 * C, C, &L.c_attn));
    KVLM_RETURN_IF_ERROR(b.vector(p + "attn_qkv.bias", 3 * C, &L.c_attn_bias));
    KVLM_RETURN_IF_ERROR(b.matrix(p + "attn_output.weight", C, C, &L.attn_c_proj));
    KVLM_RETURN_IF_ERROR(b.vector(p + "attn_output.bias", C, &L.attn_c_proj_bias));
    KVLM_RETURN_IF_ERROR(b.vector(p + "ffn_norm.weight", C, &L.ln_2_weight));
    KVLM_RETURN_IF_ERROR(b.vector(p + "ffn_norm.bias", C, &L.ln_2_bias));
    KVLM_RETURN_IF_ERROR(b.matrix(p + "ffn_up.weight", F, C, &L.c_fc));
    KVLM_RETURN_IF_ERROR(b.vector(p + "ffn_up.bias", F, &L.c_fc_bias));
    KVLM_RETURN_IF_ERROR(b.matrix(p + "ffn_down.weight", C, F, &L.mlp_c_proj));
    KVLM_RETURN_IF_ERROR(b.vector(p + "ffn_down.bias", C, &L.mlp_c_proj_bias));
  }
  KVLM_RETURN_IF_ERROR(b.vector("output_norm.weight", C, &w.ln_f_weight));
  KVLM_RETURN_IF_ERROR(b.vector("output_norm.bias", C, &w.ln_f_bias));
  c.tied_embeddings = !b.has("output.weight");
  if (c.tied_embeddings) {
    w.lm_head = w.wte;
  } else {
    KVLM_RETURN_IF_ERROR(b.matrix("output.weight", V, C, &w.lm_head));
  }
  auto gpt2_storage = std::make_unique<WeightStorage>();
  const std::string source = f.source() + " (GGUF)";
  gpt2_storage->other = std::move(storage);
  KVLM_ASSIGN_OR_RETURN(auto model,
                        Gpt2Model::create(c, std::move(w), std::move(gpt2_storage), source));
  return std::unique_ptr<Model>(std::move(model));
}

// Llama 3.1's rope scaling as llama.cpp's converter stores it: rope_freqs.weight, F32
// [head_dim / 2], one divisor per rotary frequency, each positive and finite.
Status read_rope_freqs(const GgufFile& f, LlamaConfig* config) {
  const char* name = "rope_freqs.weight";
  const GgufTensor* t = f.tensor(name);
  if (t == nullptr) return Status::ok();
  const int64_t half = config->model.head_dim / 2;
  if (t->n_dims != 1 || t->ne[0] != half)
    return Status::error(f.where_tensor(name) + ": expected shape [" + std::to_string(half) +
                         "] (one factor per rotary frequency of the " +
                         std::to_string(config->model.head_dim) + "-wide heads), found " +
                         std::to_string(t->n_dims) + " dimensions, ne[0] " +
                         std::to_string(t->ne[0]));
  if (t->dtype != DType::kF32)
    return Status::error(f.where_tensor(name) + ": expected type F32, found " +
                         dtype_name(t->dtype));
  if (config->rope_scaling.kind != RopeScaling::Kind::kNone)
    return Status::error(f.where_tensor(name) +
                         ": per-frequency factors and llama.rope.scaling.type together are not "
                         "supported (one scaling at a time)");
  std::vector<float> factors(half);
  std::memcpy(factors.data(), t->data, sizeof(float) * half);
  for (int64_t i = 0; i < half; ++i)
    if (!(factors[i] > 0.0f) || !std::isfinite(factors[i]))
      return Status::error(f.where_tensor(name) + ": factor " + std::to_string(i) + " is " +
                           std::to_string(factors[i]) + ", expected a positive finite number");
  config->rope_scaling.kind = RopeScaling::Kind::kFactors;
  config->rope_scaling.freq_factors = std::move(factors);
  return Status::ok();
}

Result<std::unique_ptr<Model>> create_llama(std::shared_ptr<GgufStorage> storage,
                                            const LoadOptions& options) {
  const GgufFile& f = storage->file;
  LlamaConfig config;
  ModelConfig& c = config.model;
  c.arch = Architecture::kLlama;
  KVLM_RETURN_IF_ERROR(read_common(f, "llama", &c));
  KVLM_ASSIGN_OR_RETURN(c.norm_eps,
                        hparam_float(f, "llama.attention.layer_norm_rms_epsilon", 1e-5f));
  KVLM_ASSIGN_OR_RETURN(c.rope_theta, hparam_float(f, "llama.rope.freq_base", 10000.0f));
  // Both default to the head size read by read_common, before key_length replaces it.
  const int default_head_dim = c.head_dim;
  KVLM_ASSIGN_OR_RETURN(c.head_dim,
                        hparam(f, "llama.attention.key_length", 1, INT32_MAX, default_head_dim));
  KVLM_ASSIGN_OR_RETURN(const int rope_dims,
                        hparam(f, "llama.rope.dimension_count", 1, INT32_MAX, default_head_dim));
  if (rope_dims != c.head_dim)
    return Status::error(f.where_key("llama.rope.dimension_count") + ": expected " +
                         std::to_string(c.head_dim) +
                         " (the head size; partial rotary embeddings are not supported), found " +
                         std::to_string(rope_dims));
  if (f.find("llama.rope.scaling.type")) {
    KVLM_ASSIGN_OR_RETURN(const std::string_view type, f.get_string("llama.rope.scaling.type"));
    if (type == "linear") {
      KVLM_ASSIGN_OR_RETURN(config.rope_scaling.factor,
                            hparam_float(f, "llama.rope.scaling.factor", 1.0f));
      config.rope_scaling.kind = RopeScaling::Kind::kLinear;
    } else if (type != "none") {
      return Status::error(f.where_key("llama.rope.scaling.type") + ": \"" + std::string(type) +
                           "\" is not supported (supported: none, linear)");
    }
  }
  KVLM_RETURN_IF_ERROR(validate_llama_config(config, f.source()));
  KVLM_RETURN_IF_ERROR(read_rope_freqs(f, &config));
  const int64_t C = c.n_embd, F = c.n_ff, V = c.n_vocab, Q = c.q_dim(), KV = c.kv_dim();
  GgufBinder b(storage.get(), options);
  LlamaWeights w;
  KVLM_RETURN_IF_ERROR(b.matrix("token_embd.weight", V, C, &w.embed));
  w.layers.resize(c.n_layer);
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = block(l);
    LlamaLayer& L = w.layers[l];
    KVLM_RETURN_IF_ERROR(b.vector(p + "attn_norm.weight", C, &L.attn_norm));
    KVLM_RETURN_IF_ERROR(b.matrix(p + "attn_q.weight", Q, C, &L.wq));
    KVLM_RETURN_IF_ERROR(b.matrix(p + "attn_k.weight", KV, C, &L.wk));
    KVLM_RETURN_IF_ERROR(b.matrix(p + "attn_v.weight", KV, C, &L.wv));
    KVLM_RETURN_IF_ERROR(b.matrix(p + "attn_output.weight", C, Q, &L.wo));
    KVLM_RETURN_IF_ERROR(b.vector(p + "ffn_norm.weight", C, &L.ffn_norm));
    KVLM_RETURN_IF_ERROR(b.matrix(p + "ffn_gate.weight", F, C, &L.w1));
    KVLM_RETURN_IF_ERROR(b.matrix(p + "ffn_up.weight", F, C, &L.w3));
    KVLM_RETURN_IF_ERROR(b.matrix(p + "ffn_down.weight", C, F, &L.w2));
  }
  KVLM_RETURN_IF_ERROR(b.vector("output_norm.weight", C, &w.final_norm));
  c.tied_embeddings = !b.has("output.weight");
  if (c.tied_embeddings) {
    w.lm_head = w.embed;
  } else {
    KVLM_RETURN_IF_ERROR(b.matrix("output.weight", V, C, &w.lm_head));
  }
  auto llama_storage = std::make_unique<WeightStorage>();
  const std::string source = f.source() + " (GGUF)";
  llama_storage->other = std::move(storage);
  KVLM_ASSIGN_OR_RETURN(auto model, LlamaModel::create(std::move(config), std::move(w),
                                                       std::move(llama_storage), source));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace

Result<std::unique_ptr<Model>> create_gguf_model(GgufFile file, const LoadOptions& options) {
  auto storage = std::make_shared<GgufStorage>(GgufStorage{std::move(file), {}, {}});
  const GgufFile& f = storage->file;
  KVLM_ASSIGN_OR_RETURN(const std::string_view arch, f.get_string("general.architecture"));
  if (arch == "gpt2") return create_gpt2(std::move(storage), options);
  if (arch == "llama") return create_llama(std::move(storage), options);
  return Status::error(f.where_key("general.architecture") + ": \"" + std::string(arch) +
                       "\" is not supported (supported: " + kGgufArchitectures + ")");
}

Result<std::unique_ptr<Model>> restore_as_gguf(const Model& model, const GgufTypes& types,
                                               int n_threads, const std::string& source) {
  KVLM_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, gguf_bytes(model, types, n_threads));
  // The parsed file's views point into `bytes`' heap block, which moving the vector keeps.
  KVLM_ASSIGN_OR_RETURN(GgufFile file, GgufFile::parse(bytes, source));
  auto storage = std::make_shared<GgufStorage>(GgufStorage{std::move(file), {}, std::move(bytes)});
  const std::string_view arch = storage->file.get_string("general.architecture").value();
  return arch == "gpt2" ? create_gpt2(std::move(storage), LoadOptions{})
                        : create_llama(std::move(storage), LoadOptions{});
}

bool has_gguf_magic(const std::string& path) {
  char magic[4] = {};
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  const bool ok = std::fread(magic, 1, 4, f) == 4 && std::memcmp(magic, "GGUF", 4) == 0;
  std::fclose(f);
  return ok;
}

std::string gguf_model_config_json(const Model& model) {
  const auto* llama = dynamic_cast<const LlamaModel*>(&model);
  auto j = nlohmann::json::parse(llama ? llama_config_json(llama->llama_config())
                                       : gpt2_config_json(model.config()));
  j.erase("torch_dtype");
  const std::string dtype = model.weight_dtype();
  if (dtype == "F32") j["torch_dtype"] = "float32";
  if (dtype == "F16") j["torch_dtype"] = "float16";
  if (dtype == "BF16") j["torch_dtype"] = "bfloat16";
  return j.dump(2) + "\n";
}

Result<std::unique_ptr<Model>> load_gguf_model(const std::string& path,
                                               const LoadOptions& options) {
  KVLM_ASSIGN_OR_RETURN(GgufFile file, GgufFile::open(path));
  return create_gguf_model(std::move(file), options);
}

}  // namespace kvlm
