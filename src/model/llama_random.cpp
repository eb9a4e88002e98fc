#include "model/llama_random.h"

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "model/llama.h"
#include "model/normal_rng.h"
#include "model/safetensors_writer.h"

namespace kvlm {

namespace {

std::vector<float> random_vector(size_t n, NormalRng& rng, float mean, float stddev) {
  std::vector<float> v(n);
  for (float& x : v) x = mean + rng.normal(stddev);
  return v;
}

void append(std::vector<uint8_t>& out, const void* data, size_t n_bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  out.insert(out.end(), p, p + n_bytes);
}

void append_floats(std::vector<uint8_t>& out, const std::vector<float>& v) {
  append(out, v.data(), v.size() * sizeof(float));
}

// Bytes of `n` floats stored as `dtype`.
std::vector<uint8_t> stored(const float* v, size_t n, DType dtype) {
  std::vector<uint8_t> bytes(n * dtype_size(dtype));
  for (size_t i = 0; i < n; ++i) {
    if (dtype == DType::kF32) {
      std::memcpy(bytes.data() + 4 * i, &v[i], 4);
    } else {
      const uint16_t h = dtype == DType::kF16 ? f32_to_f16(v[i]) : f32_to_bf16(v[i]);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
  }
  return bytes;
}

}  // namespace

LlamaConfig tiny_llama_config() {
  LlamaConfig lc;
  ModelConfig& c = lc.model;
  c.arch = Architecture::kLlama;
  c.n_vocab = 48;
  c.n_ctx = 32;
  c.n_embd = 24;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_kv_head = 2;
  c.head_dim = 6;
  c.n_ff = 40;
  c.norm_eps = 1e-5f;
  c.rope_theta = 10000.0f;
  c.tied_embeddings = true;
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  return lc;
}

LlamaHostWeights random_llama_weights(const LlamaConfig& config, uint64_t seed) {
  const ModelConfig& c = config.model;
  const size_t C = c.n_embd, F = c.n_ff, L = c.n_layer, V = c.n_vocab;
  const size_t Q = c.q_dim(), KV = c.kv_dim();
  NormalRng rng(seed);
  // Spreads chosen (as in tests/reference/llama_reference.py) so that a tiny model's logits
  // differ clearly between tokens and the residual is not just the input embedding.
  const float s = 1.0f / std::sqrt(static_cast<float>(C));
  LlamaHostWeights w;
  w.config = config;
  w.embed = random_vector(V * C, rng, 0.0f, 0.5f);
  w.attn_norm = random_vector(L * C, rng, 1.0f, 0.1f);
  w.wq = random_vector(L * Q * C, rng, 0.0f, 2.0f * s);
  w.wk = random_vector(L * KV * C, rng, 0.0f, 2.0f * s);
  w.wv = random_vector(L * KV * C, rng, 0.0f, s);
  w.wo = random_vector(L * C * Q, rng, 0.0f, 3.0f * s);
  w.ffn_norm = random_vector(L * C, rng, 1.0f, 0.1f);
  w.w1 = random_vector(L * F * C, rng, 0.0f, s);
  w.w2 = random_vector(L * C * F, rng, 0.0f, 3.0f / std::sqrt(static_cast<float>(F)));
  w.w3 = random_vector(L * F * C, rng, 0.0f, s);
  w.final_norm = random_vector(C, rng, 1.0f, 0.1f);
  if (!c.tied_embeddings) w.lm_head = random_vector(V * C, rng, 0.0f, s);
  return w;
}

std::vector<uint8_t> llama2c_bytes(const LlamaHostWeights& w) {
  const ModelConfig& c = w.config.model;
  const int32_t header[7] = {c.n_embd, c.n_ff,      c.n_layer,
                             c.n_head, c.n_kv_head, c.tied_embeddings ? c.n_vocab : -c.n_vocab,
                             c.n_ctx};
  std::vector<uint8_t> out;
  append(out, header, sizeof(header));
  for (const auto* v : {&w.embed, &w.attn_norm, &w.wq, &w.wk, &w.wv, &w.wo, &w.ffn_norm, &w.w1,
                        &w.w2, &w.w3, &w.final_norm})
    append_floats(out, *v);
  // freq_cis_real then freq_cis_imag [seq_len, D/2], as export.py's legacy export writes them.
  const int half = c.head_dim / 2;
  std::vector<float> inv_freq = llama_rope_frequencies(w.config);
  std::vector<float> cos_table, sin_table;
  for (int pos = 0; pos < c.n_ctx; ++pos)
    for (int i = 0; i < half; ++i) {
      const float angle = static_cast<float>(pos) * inv_freq[i];
      cos_table.push_back(std::cos(angle));
      sin_table.push_back(std::sin(angle));
    }
  append_floats(out, cos_table);
  append_floats(out, sin_table);
  if (!c.tied_embeddings) append_floats(out, w.lm_head);
  return out;
}

Status write_llama2c(const std::string& path, const LlamaHostWeights& weights) {
  const std::vector<uint8_t> bytes = llama2c_bytes(weights);
  return write_file(path, bytes.data(), bytes.size());
}

Status write_llama_hf(const std::string& dir, const LlamaHostWeights& w,
                      const HfWriteOptions& options) {
  const ModelConfig& c = w.config.model;
  const size_t C = c.n_embd, F = c.n_ff, Q = c.q_dim(), KV = c.kv_dim();
  const int64_t iC = C, iF = F, iQ = Q, iKV = KV, iV = c.n_vocab;
  const std::string m = options.model_prefix ? "model." : "";
  std::vector<TensorToWrite> tensors;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, const float* data) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    tensors.push_back(
        {name, dtype_name(options.dtype), std::move(shape), stored(data, n, options.dtype)});
  };
  // Norm vectors are stored in the same dtype as the matrices, as Hugging Face saves them.
  add(m + "embed_tokens.weight", {iV, iC}, w.embed.data());
  std::vector<float> permuted;
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = m + "layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {iC}, w.attn_norm.data() + l * C);
    permuted.resize(Q * C);
    permute_rotary_rows(permuted.data(), w.wq.data() + l * Q * C, c.n_head, c.head_dim,
                        C * sizeof(float));
    add(p + "self_attn.q_proj.weight", {iQ, iC}, permuted.data());
    permuted.resize(KV * C);
    permute_rotary_rows(permuted.data(), w.wk.data() + l * KV * C, c.n_kv_head, c.head_dim,
                        C * sizeof(float));
    add(p + "self_attn.k_proj.weight", {iKV, iC}, permuted.data());
    add(p + "self_attn.v_proj.weight", {iKV, iC}, w.wv.data() + l * KV * C);
    add(p + "self_attn.o_proj.weight", {iC, iQ}, w.wo.data() + l * C * Q);
    add(p + "post_attention_layernorm.weight", {iC}, w.ffn_norm.data() + l * C);
    add(p + "mlp.gate_proj.weight", {iF, iC}, w.w1.data() + l * F * C);
    add(p + "mlp.up_proj.weight", {iF, iC}, w.w3.data() + l * F * C);
    add(p + "mlp.down_proj.weight", {iC, iF}, w.w2.data() + l * C * F);
  }
  add(m + "norm.weight", {iC}, w.final_norm.data());
  if (!c.tied_embeddings) add("lm_head.weight", {iV, iC}, w.lm_head.data());

  const std::string config = llama_config_json(w.config);
  KVLM_RETURN_IF_ERROR(write_file(dir + "/config.json", config.data(), config.size()));
  if (options.n_shards <= 1) {
    const std::vector<uint8_t> bytes = serialize_safetensors(tensors);
    return write_file(dir + "/model.safetensors", bytes.data(), bytes.size());
  }
  // Tensors dealt round-robin into shards, named as transformers names them.
  const int n = options.n_shards;
  nlohmann::ordered_json index = {{"metadata", {{"total_size", 0}}},
                                  {"weight_map", nlohmann::ordered_json::object()}};
  std::vector<std::vector<TensorToWrite>> shards(n);
  size_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05zu-of-%05d.safetensors", i % n + 1, n);
    index["weight_map"][tensors[i].name] = name;
    total += tensors[i].bytes.size();
    shards[i % n].push_back(std::move(tensors[i]));
  }
  index["metadata"]["total_size"] = total;
  for (int s = 0; s < n; ++s) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05d-of-%05d.safetensors", s + 1, n);
    const std::vector<uint8_t> bytes = serialize_safetensors(shards[s]);
    KVLM_RETURN_IF_ERROR(write_file(dir + "/" + name, bytes.data(), bytes.size()));
  }
  const std::string text = index.dump(2);
  return write_file(dir + "/model.safetensors.index.json", text.data(), text.size());
}

}  // namespace kvlm
