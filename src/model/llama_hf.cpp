#include "model/llama_hf.h"

#include "util/mapped_file.h"

namespace kvlm {

namespace {

// LlamaForCausalLM stores "model.layers..."; a bare LlamaModel stores "layers...".
const std::vector<std::string> kPrefixes = {"model.", ""};

class Binder {
 public:
  Binder(const LlamaConfig& config, const Checkpoint& checkpoint, const LoadOptions& options,
         OwnedTensors* owned)
      : config_(config), checkpoint_(checkpoint), options_(options), owned_(owned) {}

  // An nn.Linear weight [rows = out, cols = in].
  Status matrix(const std::string& name, int rows, int cols, WeightMatrix* out,
                const std::vector<std::string>& prefixes = kPrefixes) {
    auto m = checkpoint_.matrix(name, prefixes, rows, cols, WeightLayout::kOutIn,
                                options_.convert_weights, owned_);
    if (!m) return m.status();
    *out = m.value();
    return Status::ok();
  }

  // q_proj or k_proj: rows back from Hugging Face's half order into run.c's pair order.
  Status rotary_matrix(const std::string& name, int n_heads, int cols, WeightMatrix* out) {
    const int D = config_.model.head_dim;
    KVLM_RETURN_IF_ERROR(matrix(name, n_heads * D, cols, out));
    const size_t row_bytes = dtype_bytes(out->dtype, cols);  // whole blocks: rows move intact
    void* dst = owned_->allocate(row_bytes * n_heads * D);
    unpermute_rotary_rows(dst, out->data, n_heads, D, row_bytes);
    out->data = dst;
    return Status::ok();
  }

  Status vector(const std::string& name, int64_t n, const float** out) {
    auto v = checkpoint_.vector_f32(name, kPrefixes, {n}, owned_);
    if (!v) return v.status();
    *out = v.value();
    return Status::ok();
  }

  Status rotary_bias(const std::string& name, int n_heads, const float** out) {
    const int D = config_.model.head_dim;
    KVLM_RETURN_IF_ERROR(vector(name, static_cast<int64_t>(n_heads) * D, out));
    float* dst = static_cast<float*>(owned_->allocate(sizeof(float) * n_heads * D));
    unpermute_rotary_rows(dst, *out, n_heads, D, sizeof(float));
    *out = dst;
    return Status::ok();
  }

 private:
  const LlamaConfig& config_;
  const Checkpoint& checkpoint_;
  const LoadOptions& options_;
  OwnedTensors* owned_;
};

}  // namespace

Result<std::unique_ptr<LlamaModel>> create_llama_hf(LlamaConfig config, Checkpoint checkpoint,
                                                    const LoadOptions& options) {
  auto storage = std::make_unique<LlamaStorage>();
  storage->checkpoint = std::move(checkpoint);
  const Checkpoint& ckpt = *storage->checkpoint;
  const ModelConfig& c = config.model;
  const int C = c.n_embd, F = c.n_ff, Q = c.q_dim(), KV = c.kv_dim(), V = c.n_vocab;
  Binder b(config, ckpt, options, &storage->owned);
  LlamaWeights w;
  KVLM_RETURN_IF_ERROR(b.matrix("embed_tokens.weight", V, C, &w.embed));
  // n_layer is the config's claim, the tensors are what the files hold: the last layer must
  // exist before anything is sized by n_layer.
  const std::string last_layer =
      "layers." + std::to_string(c.n_layer - 1) + ".input_layernorm.weight";
  if (!ckpt.find(last_layer, kPrefixes))
    return Status::error(ckpt.description() + ": missing tensor '" + last_layer +
                         "' (config.json says num_hidden_layers " + std::to_string(c.n_layer) +
                         ")");
  w.layers.resize(c.n_layer);
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    LlamaLayer& L = w.layers[l];
    KVLM_RETURN_IF_ERROR(b.vector(p + "input_layernorm.weight", C, &L.attn_norm));
    KVLM_RETURN_IF_ERROR(b.rotary_matrix(p + "self_attn.q_proj.weight", c.n_head, C, &L.wq));
    KVLM_RETURN_IF_ERROR(b.rotary_matrix(p + "self_attn.k_proj.weight", c.n_kv_head, C, &L.wk));
    KVLM_RETURN_IF_ERROR(b.matrix(p + "self_attn.v_proj.weight", KV, C, &L.wv));
    KVLM_RETURN_IF_ERROR(b.matrix(p + "self_attn.o_proj.weight", C, Q, &L.wo));
    if (config.attention_bias) {
      KVLM_RETURN_IF_ERROR(b.rotary_bias(p + "self_attn.q_proj.bias", c.n_head, &L.bq));
      KVLM_RETURN_IF_ERROR(b.rotary_bias(p + "self_attn.k_proj.bias", c.n_kv_head, &L.bk));
      KVLM_RETURN_IF_ERROR(b.vector(p + "self_attn.v_proj.bias", KV, &L.bv));
      KVLM_RETURN_IF_ERROR(b.vector(p + "self_attn.o_proj.bias", C, &L.bo));
    }
    KVLM_RETURN_IF_ERROR(b.vector(p + "post_attention_layernorm.weight", C, &L.ffn_norm));
    KVLM_RETURN_IF_ERROR(b.matrix(p + "mlp.gate_proj.weight", F, C, &L.w1));
    KVLM_RETURN_IF_ERROR(b.matrix(p + "mlp.up_proj.weight", F, C, &L.w3));
    KVLM_RETURN_IF_ERROR(b.matrix(p + "mlp.down_proj.weight", C, F, &L.w2));
    if (config.mlp_bias) {
      KVLM_RETURN_IF_ERROR(b.vector(p + "mlp.gate_proj.bias", F, &L.b1));
      KVLM_RETURN_IF_ERROR(b.vector(p + "mlp.up_proj.bias", F, &L.b3));
      KVLM_RETURN_IF_ERROR(b.vector(p + "mlp.down_proj.bias", C, &L.b2));
    }
  }
  KVLM_RETURN_IF_ERROR(b.vector("norm.weight", C, &w.final_norm));
  if (c.tied_embeddings) {
    w.lm_head = w.embed;
  } else {
    if (!ckpt.find("lm_head.weight"))
      return Status::error(ckpt.description() + ": missing tensor 'lm_head.weight' of shape " +
                           shape_string({V, C}) +
                           " (config.json has tie_word_embeddings false, so the output head is "
                           "not the embedding)");
    KVLM_RETURN_IF_ERROR(b.matrix("lm_head.weight", V, C, &w.lm_head, {""}));
  }
  const std::string source = ckpt.description() + " (Hugging Face folder)";
  return LlamaModel::create(std::move(config), std::move(w), std::move(storage), source);
}

Result<std::unique_ptr<LlamaModel>> load_llama_hf(const std::string& dir,
                                                  const LoadOptions& options) {
  const std::string config_path = dir + "/config.json";
  auto text = read_text_file(config_path);
  if (!text) return text.status();
  auto config = parse_llama_config(text.value(), config_path);
  if (!config) return config.status();
  auto checkpoint = Checkpoint::open_folder(dir);
  if (!checkpoint) return checkpoint.status();
  return create_llama_hf(std::move(config.value()), std::move(checkpoint.value()), options);
}

}  // namespace kvlm
