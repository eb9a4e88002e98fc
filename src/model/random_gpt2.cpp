#include "model/random_gpt2.h"

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "model/gpt2_hf.h"
#include "model/normal_rng.h"
#include "model/safetensors_writer.h"

namespace kvlm {

namespace {

TensorToWrite make_tensor(const std::string& name, std::vector<int64_t> shape, DType dtype,
                          NormalRng& rng, float mean, float stddev) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  TensorToWrite t{name, dtype_name(dtype), std::move(shape), {}};
  t.bytes.resize(n * dtype_size(dtype));
  for (size_t i = 0; i < n; ++i) {
    const float value = mean + rng.normal(stddev);
    if (dtype == DType::kF32) {
      std::memcpy(t.bytes.data() + 4 * i, &value, 4);
    } else {
      const uint16_t h = dtype == DType::kF16 ? f32_to_f16(value) : f32_to_bf16(value);
      std::memcpy(t.bytes.data() + 2 * i, &h, 2);
    }
  }
  return t;
}

}  // namespace

ModelConfig gpt2_small_config() {
  ModelConfig c;
  c.arch = Architecture::kGpt2;
  c.n_vocab = 50257;
  c.n_ctx = 1024;
  c.n_embd = 768;
  c.n_layer = 12;
  c.n_head = 12;
  c.n_kv_head = 12;
  c.head_dim = 64;
  c.n_ff = 3072;
  c.eos_token_id = 50256;
  c.bos_token_id = 50256;
  return c;
}

std::string gpt2_config_json(const ModelConfig& c) {
  nlohmann::ordered_json j = {{"model_type", "gpt2"},
                              {"architectures", {"GPT2LMHeadModel"}},
                              {"activation_function", "gelu_new"},
                              {"vocab_size", c.n_vocab},
                              {"n_positions", c.n_ctx},
                              {"n_ctx", c.n_ctx},
                              {"n_embd", c.n_embd},
                              {"n_layer", c.n_layer},
                              {"n_head", c.n_head},
                              {"n_inner", nullptr},
                              {"layer_norm_epsilon", c.norm_eps}};
  if (c.n_ff != 4 * c.n_embd) j["n_inner"] = c.n_ff;
  if (c.eos_token_id >= 0) j["eos_token_id"] = c.eos_token_id;
  if (c.bos_token_id >= 0) j["bos_token_id"] = c.bos_token_id;
  return j.dump(2) + "\n";
}

std::vector<uint8_t> random_gpt2_safetensors(const ModelConfig& c,
                                             const RandomGpt2Options& options) {
  NormalRng rng(options.seed);
  const DType dt = options.dtype;
  const int64_t C = c.n_embd, V = c.n_vocab, F = c.n_ff;
  const std::string p = options.transformer_prefix ? "transformer." : "";
  std::vector<TensorToWrite> t;
  t.push_back(make_tensor(p + "wte.weight", {V, C}, dt, rng, 0.0f, 0.02f));
  t.push_back(make_tensor(p + "wpe.weight", {c.n_ctx, C}, dt, rng, 0.0f, 0.01f));
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string h = p + "h." + std::to_string(l) + ".";
    t.push_back(make_tensor(h + "ln_1.weight", {C}, dt, rng, 1.0f, 0.1f));
    t.push_back(make_tensor(h + "ln_1.bias", {C}, dt, rng, 0.0f, 0.02f));
    t.push_back(make_tensor(h + "attn.c_attn.weight", {C, 3 * C}, dt, rng, 0.0f, 0.02f));
    t.push_back(make_tensor(h + "attn.c_attn.bias", {3 * C}, dt, rng, 0.0f, 0.02f));
    t.push_back(make_tensor(h + "attn.c_proj.weight", {C, C}, dt, rng, 0.0f, 0.02f));
    t.push_back(make_tensor(h + "attn.c_proj.bias", {C}, dt, rng, 0.0f, 0.02f));
    t.push_back(make_tensor(h + "ln_2.weight", {C}, dt, rng, 1.0f, 0.1f));
    t.push_back(make_tensor(h + "ln_2.bias", {C}, dt, rng, 0.0f, 0.02f));
    t.push_back(make_tensor(h + "mlp.c_fc.weight", {C, F}, dt, rng, 0.0f, 0.02f));
    t.push_back(make_tensor(h + "mlp.c_fc.bias", {F}, dt, rng, 0.0f, 0.02f));
    t.push_back(make_tensor(h + "mlp.c_proj.weight", {F, C}, dt, rng, 0.0f, 0.02f));
    t.push_back(make_tensor(h + "mlp.c_proj.bias", {C}, dt, rng, 0.0f, 0.02f));
    // Hugging Face GPT-2 checkpoints carry these mask buffers; loaders must ignore them.
    TensorToWrite mask{h + "attn.bias", "F32", {1, 1, 2, 2}, std::vector<uint8_t>(16, 0)};
    t.push_back(mask);
  }
  t.push_back(make_tensor(p + "ln_f.weight", {C}, dt, rng, 1.0f, 0.1f));
  t.push_back(make_tensor(p + "ln_f.bias", {C}, dt, rng, 0.0f, 0.02f));
  if (options.separate_lm_head)
    t.push_back(make_tensor("lm_head.weight", {V, C}, dt, rng, 0.0f, 0.02f));
  return serialize_safetensors(t);
}

Status write_random_gpt2(const std::string& dir, const ModelConfig& config,
                         const RandomGpt2Options& options) {
  const std::string json = gpt2_config_json(config);
  KVLM_RETURN_IF_ERROR(write_file(dir + "/config.json", json.data(), json.size()));
  const std::vector<uint8_t> bytes = random_gpt2_safetensors(config, options);
  return write_file(dir + "/model.safetensors", bytes.data(), bytes.size());
}

Result<std::unique_ptr<Gpt2Model>> make_random_gpt2(const ModelConfig& config,
                                                    const RandomGpt2Options& options) {
  // Quantized types: made in F32 and quantized at load, as `--weights q8_0` does.
  RandomGpt2Options stored = options;
  LoadOptions load;
  if (dtype_is_quantized(options.dtype)) {
    stored.dtype = DType::kF32;
    load.convert_weights = options.dtype;
  }
  KVLM_ASSIGN_OR_RETURN(SafetensorsFile file,
                        SafetensorsFile::from_bytes(random_gpt2_safetensors(config, stored),
                                                    "<random GPT-2 in memory>"));
  return create_gpt2_hf(config, Checkpoint::from_file(std::move(file)), load);
}

}  // namespace kvlm
