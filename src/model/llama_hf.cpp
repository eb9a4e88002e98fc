#include "model/llama_hf.h"

#include "util/mapped_file.h"

namespace kvlm {

namespace {

// LlamaForCausalLM stores "model.layers..."; a bare LlamaModel stores "layers...".
const std::vector<std::string> kPrefixes = {"model.", ""};

// q_proj or k_proj: rows back from Hugging Face's half order into run.c's pair order.
Status rotary_matrix(const CheckpointBinder& b, const std::string& name, int n_heads, int head_dim,
                     int cols, WeightMatrix* out) {
  KVLM_RETURN_IF_ERROR(b.matrix(name, n_heads * head_dim, cols, WeightLayout::kOutIn, out));
  const size_t row_bytes = dtype_bytes(out->dtype, cols);  // whole blocks: rows move intact
  void* dst = b.owned()->allocate(row_bytes * n_heads * head_dim);
  unpermute_rotary_rows(dst, out->data, n_heads, head_dim, row_bytes);
  out->data = dst;
  return Status::ok();
}

Status rotary_bias(const CheckpointBinder& b, const std::string& name, int n_heads, int head_dim,
                   const float** out) {
  KVLM_RETURN_IF_ERROR(b.vector(name, {static_cast<int64_t>(n_heads) * head_dim}, out));
  float* dst = static_cast<float*>(b.owned()->allocate(sizeof(float) * n_heads * head_dim));
  unpermute_rotary_rows(dst, *out, n_heads, head_dim, sizeof(float));
  *out = dst;
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<LlamaModel>> create_llama_hf(LlamaConfig config, Checkpoint checkpoint,
                                                    const LoadOptions& options) {
  auto storage = std::make_unique<WeightStorage>();
  storage->checkpoint = std::move(checkpoint);
  const Checkpoint& ckpt = *storage->checkpoint;
  const ModelConfig& c = config.model;
  const int C = c.n_embd, F = c.n_ff, Q = c.q_dim(), KV = c.kv_dim(), V = c.n_vocab;
  const int D = c.head_dim;
  const CheckpointBinder b(ckpt, kPrefixes, options, &storage->owned);
  constexpr WeightLayout kOutIn = WeightLayout::kOutIn;  // every matrix is an nn.Linear [out, in]
  LlamaWeights w;
  KVLM_RETURN_IF_ERROR(b.matrix("embed_tokens.weight", V, C, kOutIn, &w.embed));
  KVLM_RETURN_IF_ERROR(
      b.check_last_layer("layers." + std::to_string(c.n_layer - 1) + ".input_layernorm.weight",
                         "num_hidden_layers", c.n_layer));
  w.layers.resize(c.n_layer);
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    LlamaLayer& L = w.layers[l];
    KVLM_RETURN_IF_ERROR(b.vector(p + "input_layernorm.weight", {C}, &L.attn_norm));
    KVLM_RETURN_IF_ERROR(rotary_matrix(b, p + "self_attn.q_proj.weight", c.n_head, D, C, &L.wq));
    KVLM_RETURN_IF_ERROR(rotary_matrix(b, p + "self_attn.k_proj.weight", c.n_kv_head, D, C, &L.wk));
    KVLM_RETURN_IF_ERROR(b.matrix(p + "self_attn.v_proj.weight", KV, C, kOutIn, &L.wv));
    KVLM_RETURN_IF_ERROR(b.matrix(p + "self_attn.o_proj.weight", C, Q, kOutIn, &L.wo));
    if (config.attention_bias) {
      KVLM_RETURN_IF_ERROR(rotary_bias(b, p + "self_attn.q_proj.bias", c.n_head, D, &L.bq));
      KVLM_RETURN_IF_ERROR(rotary_bias(b, p + "self_attn.k_proj.bias", c.n_kv_head, D, &L.bk));
      KVLM_RETURN_IF_ERROR(b.vector(p + "self_attn.v_proj.bias", {KV}, &L.bv));
      KVLM_RETURN_IF_ERROR(b.vector(p + "self_attn.o_proj.bias", {C}, &L.bo));
    }
    KVLM_RETURN_IF_ERROR(b.vector(p + "post_attention_layernorm.weight", {C}, &L.ffn_norm));
    KVLM_RETURN_IF_ERROR(b.matrix(p + "mlp.gate_proj.weight", F, C, kOutIn, &L.w1));
    KVLM_RETURN_IF_ERROR(b.matrix(p + "mlp.up_proj.weight", F, C, kOutIn, &L.w3));
    KVLM_RETURN_IF_ERROR(b.matrix(p + "mlp.down_proj.weight", C, F, kOutIn, &L.w2));
    if (config.mlp_bias) {
      KVLM_RETURN_IF_ERROR(b.vector(p + "mlp.gate_proj.bias", {F}, &L.b1));
      KVLM_RETURN_IF_ERROR(b.vector(p + "mlp.up_proj.bias", {F}, &L.b3));
      KVLM_RETURN_IF_ERROR(b.vector(p + "mlp.down_proj.bias", {C}, &L.b2));
    }
  }
  KVLM_RETURN_IF_ERROR(b.vector("norm.weight", {C}, &w.final_norm));
  if (c.tied_embeddings) {
    w.lm_head = w.embed;
  } else {
    if (!ckpt.find("lm_head.weight"))
      return Status::error(ckpt.description() + ": missing tensor 'lm_head.weight' of shape " +
                           shape_string({V, C}) +
                           " (config.json has tie_word_embeddings false, so the output head is "
                           "not the embedding)");
    KVLM_RETURN_IF_ERROR(b.matrix("lm_head.weight", V, C, kOutIn, {""}, &w.lm_head));
  }
  const std::string source = ckpt.description() + " (Hugging Face folder)";
  return LlamaModel::create(std::move(config), std::move(w), std::move(storage), source);
}

Result<std::unique_ptr<LlamaModel>> load_llama_hf(const std::string& dir,
                                                  const LoadOptions& options) {
  const std::string config_path = dir + "/config.json";
  KVLM_ASSIGN_OR_RETURN(const std::string text, read_text_file(config_path));
  KVLM_ASSIGN_OR_RETURN(LlamaConfig config, parse_llama_config(text, config_path));
  KVLM_ASSIGN_OR_RETURN(Checkpoint checkpoint, Checkpoint::open_folder(dir));
  return create_llama_hf(std::move(config), std::move(checkpoint), options);
}

}  // namespace kvlm
