#include "model/gguf_export.h"

#include <cstdio>
#include <cstring>

#include "model/gguf_writer.h"
#include "model/gpt2.h"
#include "model/llama.h"
#include "model/quantize_weights.h"
#include "ops/quant.h"
#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/llama2c_tokenizer.h"

namespace kvlm {

namespace {

std::vector<uint8_t> f32_bytes(const float* v, size_t n) {
  std::vector<uint8_t> out(n * sizeof(float));
  std::memcpy(out.data(), v, out.size());
  return out;
}

class Exporter {
 public:
  Exporter(GgufWriter* w, const GgufTypes& types, const ModelConfig& c, int n_threads)
      : w_(w), types_(types), n_layer_(c.n_layer), tied_(c.tied_embeddings), threads_(n_threads) {}

  // Quantized types need whole blocks per row; other matrices take llama.cpp's fallback type
  // (stored_weight_type), as loading with --weights does, so both give the same bits.
  Status matrix(const std::string& name, const WeightMatrix& m) {
    const DType type =
        gguf_stored_type(types_, gguf_matrix_type(types_, name, n_layer_, tied_), m.n_in, m.dtype);
    KVLM_ASSIGN_OR_RETURN(auto bytes,
                          weight_matrix_bytes(m, type, "tensor '" + name + "'", threads_));
    w_->add_tensor(name, {m.n_in, m.n_out}, type, std::move(bytes));
    return Status::ok();
  }
  void vector(const std::string& name, const float* v, int64_t n) {
    w_->add_tensor(name, {n}, DType::kF32, f32_bytes(v, n));
  }

 private:
  GgufWriter* w_;
  GgufTypes types_;
  int n_layer_;
  bool tied_;
  int threads_;
};

// llama.cpp's llama_ftype for the file's --type (include/llama.h: LLAMA_FTYPE_ALL_F32 = 0,
// MOSTLY_F16 = 1, Q4_0 = 2, Q8_0 = 7, Q5_0 = 8, Q4_K_S = 14, Q4_K_M = 15, Q6_K = 18, BF16 = 32):
// what llama.cpp and other readers show as the model's type ("gpt2 0.1B Q8_0"); without it
// they guess, and llama.cpp guesses "all F32".
uint32_t llama_file_type(const GgufTypes& types) {
  if (types.q4_k_mix) return 15;
  switch (types.type) {
    case DType::kF16: return 1;
    case DType::kQ4_0: return 2;
    case DType::kQ8_0: return 7;
    case DType::kQ5_0: return 8;
    case DType::kQ4_K: return 14;
    case DType::kQ6_K: return 18;
    case DType::kBF16: return 32;
    default: return 0;
  }
}

void common_keys(GgufWriter* w, const std::string& arch, const ModelConfig& c,
                 const GgufTypes& types) {
  w->add_string("general.architecture", arch);
  w->add_string("general.name", "kvlm convert");
  w->add_u32("general.file_type", llama_file_type(types));
  if (dtype_is_quantized(types.type)) w->add_u32("general.quantization_version", 2);
  w->add_u32(arch + ".context_length", c.n_ctx);
  w->add_u32(arch + ".embedding_length", c.n_embd);
  w->add_u32(arch + ".block_count", c.n_layer);
  w->add_u32(arch + ".feed_forward_length", c.n_ff);
  w->add_u32(arch + ".attention.head_count", c.n_head);
  w->add_u32(arch + ".attention.head_count_kv", c.n_kv_head);
}

Status export_gpt2(GgufWriter* w, const Gpt2Model& model, const GgufTypes& types, int n_threads) {
  const ModelConfig& c = model.config();
  const Gpt2Weights& g = model.weights();
  common_keys(w, "gpt2", c, types);
  w->add_f32("gpt2.attention.layer_norm_epsilon", c.norm_eps);
  Exporter e(w, types, c, n_threads);
  const int64_t C = c.n_embd, F = c.n_ff;
  KVLM_RETURN_IF_ERROR(e.matrix("token_embd.weight", g.wte));
  w->add_tensor("position_embd.weight", {C, c.n_ctx}, DType::kF32,
                f32_bytes(g.wpe, static_cast<size_t>(C) * c.n_ctx));
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const Gpt2Layer& L = g.layers[l];
    e.vector(p + "attn_norm.weight", L.ln_1_weight, C);
    e.vector(p + "attn_norm.bias", L.ln_1_bias, C);
    KVLM_RETURN_IF_ERROR(e.matrix(p + "attn_qkv.weight", L.c_attn));
    e.vector(p + "attn_qkv.bias", L.c_attn_bias, 3 * C);
    KVLM_RETURN_IF_ERROR(e.matrix(p + "attn_output.weight", L.attn_c_proj));
    e.vector(p + "attn_output.bias", L.attn_c_proj_bias, C);
    e.vector(p + "ffn_norm.weight", L.ln_2_weight, C);
    e.vector(p + "ffn_norm.bias", L.ln_2_bias, C);
    KVLM_RETURN_IF_ERROR(e.matrix(p + "ffn_up.weight", L.c_fc));
    e.vector(p + "ffn_up.bias", L.c_fc_bias, F);
    KVLM_RETURN_IF_ERROR(e.matrix(p + "ffn_down.weight", L.mlp_c_proj));
    e.vector(p + "ffn_down.bias", L.mlp_c_proj_bias, C);
  }
  e.vector("output_norm.weight", g.ln_f_weight, C);
  e.vector("output_norm.bias", g.ln_f_bias, C);
  if (!c.tied_embeddings) KVLM_RETURN_IF_ERROR(e.matrix("output.weight", g.lm_head));
  return Status::ok();
}

Status export_llama(GgufWriter* w, const LlamaModel& model, const GgufTypes& types, int n_threads) {
  const LlamaConfig& lc = model.llama_config();
  const ModelConfig& c = lc.model;
  if (lc.attention_bias || lc.mlp_bias || lc.sliding_window > 0)
    return Status::error(model.source() +
                         ": biases and a sliding window have no GGUF writer in kvlm yet");
  common_keys(w, "llama", c, types);
  w->add_u32("llama.rope.dimension_count", c.head_dim);
  if (c.head_dim * c.n_head != c.n_embd) {
    w->add_u32("llama.attention.key_length", c.head_dim);
    w->add_u32("llama.attention.value_length", c.head_dim);
  }
  w->add_f32("llama.rope.freq_base", c.rope_theta);
  w->add_f32("llama.attention.layer_norm_rms_epsilon", c.norm_eps);
  if (lc.rope_scaling.kind == RopeScaling::Kind::kLinear) {
    w->add_string("llama.rope.scaling.type", "linear");
    w->add_f32("llama.rope.scaling.factor", lc.rope_scaling.factor);
  }
  const LlamaWeights& g = model.weights();
  Exporter e(w, types, c, n_threads);
  const int64_t C = c.n_embd;
  KVLM_RETURN_IF_ERROR(e.matrix("token_embd.weight", g.embed));
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const LlamaLayer& L = g.layers[l];
    e.vector(p + "attn_norm.weight", L.attn_norm, C);
    KVLM_RETURN_IF_ERROR(e.matrix(p + "attn_q.weight", L.wq));
    KVLM_RETURN_IF_ERROR(e.matrix(p + "attn_k.weight", L.wk));
    KVLM_RETURN_IF_ERROR(e.matrix(p + "attn_v.weight", L.wv));
    KVLM_RETURN_IF_ERROR(e.matrix(p + "attn_output.weight", L.wo));
    e.vector(p + "ffn_norm.weight", L.ffn_norm, C);
    KVLM_RETURN_IF_ERROR(e.matrix(p + "ffn_gate.weight", L.w1));
    KVLM_RETURN_IF_ERROR(e.matrix(p + "ffn_up.weight", L.w3));
    KVLM_RETURN_IF_ERROR(e.matrix(p + "ffn_down.weight", L.w2));
  }
  e.vector("output_norm.weight", g.final_norm, C);
  if (!c.tied_embeddings) KVLM_RETURN_IF_ERROR(e.matrix("output.weight", g.lm_head));
  // Llama 3.1 scaling as llama.cpp's converter writes it: a divisor per frequency.
  if (lc.rope_scaling.kind == RopeScaling::Kind::kLlama3) {
    const std::vector<float> factors = llama3_rope_freq_factors(lc);
    e.vector("rope_freqs.weight", factors.data(), static_cast<int64_t>(factors.size()));
  } else if (lc.rope_scaling.kind == RopeScaling::Kind::kFactors) {
    e.vector("rope_freqs.weight", lc.rope_scaling.freq_factors.data(),
             static_cast<int64_t>(lc.rope_scaling.freq_factors.size()));
  }
  return Status::ok();
}

Status export_tokenizer(GgufWriter* w, const Tokenizer& t) {
  if (const auto* bpe = dynamic_cast<const ByteLevelBpe*>(&t)) {
    const BpeModel& m = bpe->model();
    std::vector<std::string> tokens, merges;
    std::vector<int32_t> types(m.tokens.size(), 1);
    for (const std::string& bytes : m.tokens) tokens.push_back(bytes_to_byte_level(bytes));
    for (const MergeRule& r : m.merges) merges.push_back(tokens[r.left] + " " + tokens[r.right]);
    for (int32_t id : m.special_ids) types[id] = 3;
    w->add_string("tokenizer.ggml.model", "gpt2");
    w->add_string("tokenizer.ggml.pre", m.pretokenizer_pattern.empty() ? "gpt-2" : "llama-bpe");
    w->add_string_array("tokenizer.ggml.tokens", tokens);
    w->add_i32_array("tokenizer.ggml.token_type", types);
    w->add_string_array("tokenizer.ggml.merges", merges);
    if (m.bos_id) w->add_u32("tokenizer.ggml.bos_token_id", *m.bos_id);
    if (m.eos_id) w->add_u32("tokenizer.ggml.eos_token_id", *m.eos_id);
    w->add_bool("tokenizer.ggml.add_bos_token", bpe->add_bos());
    return Status::ok();
  }
  if (const auto* sp = dynamic_cast<const Llama2cTokenizer*>(&t)) {
    std::vector<std::string> tokens;
    std::vector<float> scores;
    std::vector<int32_t> types;
    for (int32_t id = 0; id < sp->vocab_size(); ++id) {
      std::string piece;
      for (char ch : sp->piece(id))
        piece += ch == ' ' ? std::string("\xE2\x96\x81") : std::string(1, ch);
      tokens.push_back(std::move(piece));
      scores.push_back(sp->score(id));
      // SentencePiece's token types: 2 unknown, 3 control, 6 byte, 1 normal.
      types.push_back(id == 0                                        ? 2
                      : id <= 2                                      ? 3
                      : id < Llama2cTokenizer::kFirstByteToken + 256 ? 6
                                                                     : 1);
    }
    w->add_string("tokenizer.ggml.model", "llama");
    w->add_string_array("tokenizer.ggml.tokens", tokens);
    w->add_f32_array("tokenizer.ggml.scores", scores);
    w->add_i32_array("tokenizer.ggml.token_type", types);
    w->add_u32("tokenizer.ggml.bos_token_id", Llama2cTokenizer::kBos);
    w->add_u32("tokenizer.ggml.eos_token_id", Llama2cTokenizer::kEos);
    w->add_u32("tokenizer.ggml.unknown_token_id", 0);
    w->add_bool("tokenizer.ggml.add_bos_token", true);
    return Status::ok();
  }
  return Status::error(t.source() +
                       ": kvlm writes byte-level BPE and llama2.c vocabularies into GGUF; this "
                       "tokenizer is neither (convert without it: --no-tokenizer)");
}

}  // namespace

std::optional<GgufTypes> parse_gguf_types(std::string_view name) {
  if (name == "q4_k_mix") return GgufTypes{DType::kQ4_K, true};
  const auto type = parse_dtype(name);
  if (!type) return std::nullopt;
  return GgufTypes{*type, false};
}

DType gguf_matrix_type(const GgufTypes& types, const std::string& name, int n_layer,
                       bool tied_head) {
  if (!types.q4_k_mix) return types.type;
  if (name == "output.weight" || (tied_head && name == "token_embd.weight")) return DType::kQ6_K;
  int layer = -1;
  char role[32] = {};
  if (std::sscanf(name.c_str(), "blk.%d.%31s", &layer, role) == 2 &&
      (std::strcmp(role, "attn_v.weight") == 0 || std::strcmp(role, "ffn_down.weight") == 0)) {
    // llama.cpp's use_more_bits(i_layer, n_layers).
    const bool more_bits =
        layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
    if (more_bits) return DType::kQ6_K;
  }
  return DType::kQ4_K;
}

DType gguf_stored_type(const GgufTypes&, DType preferred, int64_t n_in, DType source) {
  return stored_weight_type(preferred, n_in, source);
}

namespace {

Status export_model(GgufWriter* w, const Model& model, const Tokenizer* tokenizer,
                    const GgufTypes& types, int n_threads) {
  if (const auto* gpt2 = dynamic_cast<const Gpt2Model*>(&model)) {
    KVLM_RETURN_IF_ERROR(export_gpt2(w, *gpt2, types, n_threads));
  } else if (const auto* llama = dynamic_cast<const LlamaModel*>(&model)) {
    KVLM_RETURN_IF_ERROR(export_llama(w, *llama, types, n_threads));
  } else {
    return Status::error("this model's architecture has no GGUF writer");
  }
  if (tokenizer) KVLM_RETURN_IF_ERROR(export_tokenizer(w, *tokenizer));
  return Status::ok();
}

}  // namespace

Status write_gguf(const Model& model, const Tokenizer* tokenizer, const GgufTypes& types,
                  const std::string& path, int n_threads) {
  GgufWriter w;
  KVLM_RETURN_IF_ERROR(export_model(&w, model, tokenizer, types, n_threads));
  return w.write(path);
}

Result<std::vector<uint8_t>> gguf_bytes(const Model& model, const GgufTypes& types, int n_threads) {
  GgufWriter w;
  KVLM_RETURN_IF_ERROR(export_model(&w, model, nullptr, types, n_threads));
  return w.bytes();
}

}  // namespace kvlm
