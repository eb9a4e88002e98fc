#include "model/llama_config.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "model/config_fields.h"
#include "ops/rope.h"

namespace kvlm {

namespace {

Status parse_rope_scaling(const nlohmann::json& j, const std::string& source, RopeScaling* out) {
  if (!j.contains("rope_scaling") || j["rope_scaling"].is_null()) return Status::ok();
  const nlohmann::json& s = j["rope_scaling"];
  if (!s.is_object())
    return Status::error(source + ": field 'rope_scaling' must be an object or null, found " +
                         s.dump());
  // Older configs say "type", newer ones "rope_type".
  std::string type = "default";
  for (const char* key : {"rope_type", "type"})
    if (s.contains(key) && s[key].is_string()) {
      type = s[key].get<std::string>();
      break;
    }
  const std::string where = source + ": rope_scaling";
  const ConfigFields f(s, where);
  if (type == "default") return Status::ok();
  if (type == "linear") {
    out->kind = RopeScaling::Kind::kLinear;
    if (!f.has("factor")) return Status::error(where + ": missing field 'factor' (linear)");
    KVLM_RETURN_IF_ERROR(f.positive_number_or("factor", 1.0f, &out->factor));
    return Status::ok();
  }
  if (type == "llama3") {
    out->kind = RopeScaling::Kind::kLlama3;
    for (const char* key :
         {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"})
      if (!f.has(key)) return Status::error(where + ": missing field '" + key + "' (llama3)");
    KVLM_RETURN_IF_ERROR(f.positive_number_or("factor", 1.0f, &out->factor));
    KVLM_RETURN_IF_ERROR(f.positive_number_or("low_freq_factor", 1.0f, &out->low_freq_factor));
    KVLM_RETURN_IF_ERROR(f.positive_number_or("high_freq_factor", 4.0f, &out->high_freq_factor));
    KVLM_RETURN_IF_ERROR(
        f.positive_or("original_max_position_embeddings", 8192, &out->original_max_position));
    if (!(out->high_freq_factor > out->low_freq_factor))
      return Status::error(where + ": high_freq_factor must exceed low_freq_factor");
    return Status::ok();
  }
  return Status::error(where + ": type \"" + type +
                       "\" is not supported (supported: default, linear, llama3)");
}

}  // namespace

Status validate_llama_config(const LlamaConfig& c, const std::string& source) {
  KVLM_RETURN_IF_ERROR(validate_config(c.model, source));
  if (c.model.head_dim % 2 != 0)
    return Status::error(source +
                         ": the head dimension must be even for rotary embeddings, found " +
                         std::to_string(c.model.head_dim));
  if (!(c.model.rope_theta > 0.0f) || !std::isfinite(c.model.rope_theta))
    return Status::error(source + ": rope_theta must be a positive number, found " +
                         std::to_string(c.model.rope_theta));
  if (c.sliding_window < 0)
    return Status::error(source + ": sliding_window must not be negative, found " +
                         std::to_string(c.sliding_window));
  if (c.rope_scaling.kind == RopeScaling::Kind::kFactors &&
      c.rope_scaling.freq_factors.size() != static_cast<size_t>(c.model.head_dim / 2))
    return Status::error(source + ": " + std::to_string(c.rope_scaling.freq_factors.size()) +
                         " rope frequency factors for " + std::to_string(c.model.head_dim / 2) +
                         " frequencies");
  return Status::ok();
}

Result<LlamaConfig> parse_llama_config(const std::string& json_text, const std::string& source) {
  Result<nlohmann::json> parsed = ConfigFields::parse_object(json_text, source);
  KVLM_RETURN_IF_ERROR(parsed);
  const nlohmann::json& j = parsed.value();
  std::string model_type = "llama";
  if (j.contains("model_type")) {
    if (!j["model_type"].is_string() ||
        (j["model_type"] != "llama" && j["model_type"] != "mistral"))
      return Status::error(source + ": model_type is " + j["model_type"].dump() +
                           ", expected \"llama\" or \"mistral\"");
    model_type = j["model_type"].get<std::string>();
  }
  const bool mistral = model_type == "mistral";
  const ConfigFields f(j, source);
  LlamaConfig lc;
  ModelConfig& c = lc.model;
  c.arch = Architecture::kLlama;
  KVLM_RETURN_IF_ERROR(f.positive("vocab_size", &c.n_vocab));
  KVLM_RETURN_IF_ERROR(f.positive("hidden_size", &c.n_embd));
  KVLM_RETURN_IF_ERROR(f.positive("intermediate_size", &c.n_ff));
  KVLM_RETURN_IF_ERROR(f.positive("num_hidden_layers", &c.n_layer));
  KVLM_RETURN_IF_ERROR(f.positive("num_attention_heads", &c.n_head));
  KVLM_RETURN_IF_ERROR(f.positive_or("num_key_value_heads", c.n_head, &c.n_kv_head));
  if (!f.has("head_dim") && c.n_embd % c.n_head != 0)
    return Status::error(source + ": num_attention_heads (" + std::to_string(c.n_head) +
                         ") must divide hidden_size (" + std::to_string(c.n_embd) +
                         ") when head_dim is not given");
  KVLM_RETURN_IF_ERROR(f.positive_or("head_dim", c.n_embd / c.n_head, &c.head_dim));
  if (c.n_head % c.n_kv_head != 0)
    return Status::error(source + ": num_key_value_heads (" + std::to_string(c.n_kv_head) +
                         ") must divide num_attention_heads (" + std::to_string(c.n_head) + ")");
  KVLM_RETURN_IF_ERROR(
      f.positive_or("max_position_embeddings", mistral ? 4096 * 32 : 2048, &c.n_ctx));
  KVLM_RETURN_IF_ERROR(f.positive_number_or("rms_norm_eps", 1e-6f, &c.norm_eps));
  KVLM_RETURN_IF_ERROR(f.positive_number_or("rope_theta", 10000.0f, &c.rope_theta));
  KVLM_RETURN_IF_ERROR(f.boolean_or("tie_word_embeddings", false, &c.tied_embeddings));
  KVLM_RETURN_IF_ERROR(f.boolean_or("attention_bias", false, &lc.attention_bias));
  KVLM_RETURN_IF_ERROR(f.boolean_or("mlp_bias", false, &lc.mlp_bias));
  if (f.has("hidden_act") && j["hidden_act"] != "silu")
    return Status::error(source + ": hidden_act is " + j["hidden_act"].dump() +
                         ", but kvlm implements the Llama family's \"silu\" (SwiGLU) only");
  if (mistral) {  // MistralConfig's default window is 4096; null turns it off
    if (!j.contains("sliding_window")) {
      lc.sliding_window = 4096;
    } else if (f.has("sliding_window")) {
      KVLM_RETURN_IF_ERROR(f.positive("sliding_window", &lc.sliding_window));
    }
  }
  KVLM_RETURN_IF_ERROR(parse_rope_scaling(j, source, &lc.rope_scaling));
  KVLM_RETURN_IF_ERROR(f.token_id("bos_token_id", c.n_vocab, &c.bos_token_id));
  KVLM_RETURN_IF_ERROR(f.token_id("eos_token_id", c.n_vocab, &c.eos_token_id, &c.eos_token_ids));
  KVLM_RETURN_IF_ERROR(validate_llama_config(lc, source));
  return lc;
}

std::string llama_config_json(const LlamaConfig& lc) {
  const ModelConfig& c = lc.model;
  nlohmann::ordered_json j = {{"model_type", "llama"},
                              {"architectures", {"LlamaForCausalLM"}},
                              {"hidden_act", "silu"},
                              {"vocab_size", c.n_vocab},
                              {"hidden_size", c.n_embd},
                              {"intermediate_size", c.n_ff},
                              {"num_hidden_layers", c.n_layer},
                              {"num_attention_heads", c.n_head},
                              {"num_key_value_heads", c.n_kv_head},
                              {"head_dim", c.head_dim},
                              {"max_position_embeddings", c.n_ctx},
                              {"rms_norm_eps", c.norm_eps},
                              {"rope_theta", c.rope_theta},
                              {"tie_word_embeddings", c.tied_embeddings},
                              {"attention_bias", lc.attention_bias},
                              {"mlp_bias", lc.mlp_bias},
                              {"torch_dtype", "float32"}};
  if (c.bos_token_id >= 0) j["bos_token_id"] = c.bos_token_id;
  if (c.eos_token_id >= 0) j["eos_token_id"] = c.eos_token_id;
  // kFactors (a GGUF's rope_freqs.weight) has no config.json form; the rest round-trips.
  const RopeScaling& s = lc.rope_scaling;
  if (s.kind == RopeScaling::Kind::kLinear)
    j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", s.factor}};
  if (s.kind == RopeScaling::Kind::kLlama3)
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", s.factor},
                         {"low_freq_factor", s.low_freq_factor},
                         {"high_freq_factor", s.high_freq_factor},
                         {"original_max_position_embeddings", s.original_max_position}};
  return j.dump(2) + "\n";
}

std::vector<float> llama_rope_frequencies(const LlamaConfig& lc) {
  const int D = lc.model.head_dim;
  std::vector<float> inv_freq(D / 2);
  rope_frequencies(inv_freq.data(), D, lc.model.rope_theta);
  const RopeScaling& s = lc.rope_scaling;
  if (s.kind == RopeScaling::Kind::kLinear) {
    for (float& f : inv_freq) f /= s.factor;
  } else if (s.kind == RopeScaling::Kind::kLlama3) {
    // Hugging Face's _compute_llama3_parameters: long wavelengths are slowed by `factor`,
    // short ones kept, the band between blended smoothly.
    const float low_freq_wavelen = s.original_max_position / s.low_freq_factor;
    const float high_freq_wavelen = s.original_max_position / s.high_freq_factor;
    for (float& f : inv_freq) {
      const float wavelen = 2.0f * static_cast<float>(M_PI) / f;
      if (wavelen > low_freq_wavelen) {
        f = f / s.factor;
      } else if (!(wavelen < high_freq_wavelen)) {
        const float smooth = (s.original_max_position / wavelen - s.low_freq_factor) /
                             (s.high_freq_factor - s.low_freq_factor);
        f = (1.0f - smooth) * f / s.factor + smooth * f;
      }
    }
  } else if (s.kind == RopeScaling::Kind::kFactors) {
    // llama.cpp divides each angle by its factor (ggml_rope_ext's freq_factors).
    for (int i = 0; i < D / 2; ++i) inv_freq[i] /= s.freq_factors[i];
  }
  return inv_freq;
}

std::vector<float> llama3_rope_freq_factors(const LlamaConfig& lc) {
  const int D = lc.model.head_dim;
  std::vector<float> freq(D / 2), factors(D / 2);
  rope_frequencies(freq.data(), D, lc.model.rope_theta);
  const RopeScaling& s = lc.rope_scaling;
  const float low_freq_wavelen = s.original_max_position / s.low_freq_factor;
  const float high_freq_wavelen = s.original_max_position / s.high_freq_factor;
  for (int i = 0; i < D / 2; ++i) {
    const float wavelen = 2.0f * static_cast<float>(M_PI) / freq[i];
    if (wavelen < high_freq_wavelen) {
      factors[i] = 1.0f;
    } else if (wavelen > low_freq_wavelen) {
      factors[i] = s.factor;
    } else {
      const float smooth = (s.original_max_position / wavelen - s.low_freq_factor) /
                           (s.high_freq_factor - s.low_freq_factor);
      factors[i] = 1.0f / ((1.0f - smooth) / s.factor + smooth);
    }
  }
  return factors;
}

}  // namespace kvlm
