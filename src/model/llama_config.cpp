#include "model/llama_config.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "ops/rope.h"

namespace kvlm {

namespace {

// Field access with Hugging Face's defaults and errors that name the file and the field.
class Fields {
 public:
  Fields(const nlohmann::json& j, const std::string& source) : j_(j), source_(source) {}

  bool has(const char* field) const { return j_.contains(field) && !j_[field].is_null(); }

  // A positive integer; `fallback` <= 0 means the field is required.
  Status positive_int(const char* field, int fallback, int* out) const {
    if (!has(field)) {
      if (fallback <= 0) return Status::error(source_ + ": missing required field '" + field + "'");
      *out = fallback;
      return Status::ok();
    }
    const auto& v = j_[field];
    if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > (int64_t{1} << 30))
      return Status::error(source_ + ": field '" + field +
                           "' must be a positive integer below 2^30, found " + v.dump());
    *out = static_cast<int>(v.get<int64_t>());
    return Status::ok();
  }

  Status positive_number(const char* field, float fallback, float* out) const {
    if (!has(field)) {
      *out = fallback;
      return Status::ok();
    }
    const auto& v = j_[field];
    if (!v.is_number() || !(v.get<double>() > 0.0) || !std::isfinite(v.get<double>()))
      return Status::error(source_ + ": field '" + field + "' must be a positive number, found " +
                           v.dump());
    *out = v.get<float>();
    return Status::ok();
  }

  Status boolean(const char* field, bool fallback, bool* out) const {
    if (!has(field)) {
      *out = fallback;
      return Status::ok();
    }
    if (!j_[field].is_boolean())
      return Status::error(source_ + ": field '" + field + "' must be true or false, found " +
                           j_[field].dump());
    *out = j_[field].get<bool>();
    return Status::ok();
  }

  // A token id, or a list of them (Llama 3.1 lists several eos ids): *first gets the first,
  // *all (when given) every one.
  Status token_id(const char* field, int n_vocab, int* first,
                  std::vector<int32_t>* all = nullptr) const {
    if (!has(field)) return Status::ok();
    const nlohmann::json& v = j_[field];
    const nlohmann::json list = v.is_array() ? v : nlohmann::json::array({v});
    if (list.empty())
      return Status::error(source_ + ": field '" + field + "' must be a token id, found []");
    for (const nlohmann::json& item : list) {
      if (!item.is_number_integer())
        return Status::error(source_ + ": field '" + field + "' must be a token id, found " +
                             v.dump());
      const int64_t id = item.get<int64_t>();
      if (id < 0 || id >= n_vocab)
        return Status::error(source_ + ": " + field + " " + std::to_string(id) +
                             " is outside the vocabulary [0, " + std::to_string(n_vocab) + ")");
      if (all) all->push_back(static_cast<int32_t>(id));
    }
    *first = list[0].get<int>();
    return Status::ok();
  }

 private:
  const nlohmann::json& j_;
  const std::string& source_;
};

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
  Fields f(s, where);
  if (type == "default") return Status::ok();
  if (type == "linear") {
    out->kind = RopeScaling::Kind::kLinear;
    KVLM_RETURN_IF_ERROR(f.positive_number("factor", 0.0f, &out->factor));
    if (!(out->factor > 0.0f)) return Status::error(where + ": missing field 'factor'");
    return Status::ok();
  }
  if (type == "llama3") {
    out->kind = RopeScaling::Kind::kLlama3;
    for (const char* key :
         {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"})
      if (!f.has(key)) return Status::error(where + ": missing field '" + key + "' (llama3)");
    KVLM_RETURN_IF_ERROR(f.positive_number("factor", 1.0f, &out->factor));
    KVLM_RETURN_IF_ERROR(f.positive_number("low_freq_factor", 1.0f, &out->low_freq_factor));
    KVLM_RETURN_IF_ERROR(f.positive_number("high_freq_factor", 4.0f, &out->high_freq_factor));
    KVLM_RETURN_IF_ERROR(
        f.positive_int("original_max_position_embeddings", 8192, &out->original_max_position));
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
  return Status::ok();
}

Result<LlamaConfig> parse_llama_config(const std::string& json_text, const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    return Status::error(source + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) return Status::error(source + ": expected a JSON object");
  std::string model_type = "llama";
  if (j.contains("model_type")) {
    if (!j["model_type"].is_string() ||
        (j["model_type"] != "llama" && j["model_type"] != "mistral"))
      return Status::error(source + ": model_type is " + j["model_type"].dump() +
                           ", expected \"llama\" or \"mistral\"");
    model_type = j["model_type"].get<std::string>();
  }
  const bool mistral = model_type == "mistral";
  Fields f(j, source);
  LlamaConfig lc;
  ModelConfig& c = lc.model;
  c.arch = Architecture::kLlama;
  KVLM_RETURN_IF_ERROR(f.positive_int("vocab_size", 0, &c.n_vocab));
  KVLM_RETURN_IF_ERROR(f.positive_int("hidden_size", 0, &c.n_embd));
  KVLM_RETURN_IF_ERROR(f.positive_int("intermediate_size", 0, &c.n_ff));
  KVLM_RETURN_IF_ERROR(f.positive_int("num_hidden_layers", 0, &c.n_layer));
  KVLM_RETURN_IF_ERROR(f.positive_int("num_attention_heads", 0, &c.n_head));
  KVLM_RETURN_IF_ERROR(f.positive_int("num_key_value_heads", c.n_head, &c.n_kv_head));
  if (!f.has("head_dim") && c.n_embd % c.n_head != 0)
    return Status::error(source + ": num_attention_heads (" + std::to_string(c.n_head) +
                         ") must divide hidden_size (" + std::to_string(c.n_embd) +
                         ") when head_dim is not given");
  KVLM_RETURN_IF_ERROR(f.positive_int("head_dim", c.n_embd / c.n_head, &c.head_dim));
  if (c.n_head % c.n_kv_head != 0)
    return Status::error(source + ": num_key_value_heads (" + std::to_string(c.n_kv_head) +
                         ") must divide num_attention_heads (" + std::to_string(c.n_head) + ")");
  KVLM_RETURN_IF_ERROR(
      f.positive_int("max_position_embeddings", mistral ? 4096 * 32 : 2048, &c.n_ctx));
  KVLM_RETURN_IF_ERROR(f.positive_number("rms_norm_eps", 1e-6f, &c.norm_eps));
  KVLM_RETURN_IF_ERROR(f.positive_number("rope_theta", 10000.0f, &c.rope_theta));
  KVLM_RETURN_IF_ERROR(f.boolean("tie_word_embeddings", false, &c.tied_embeddings));
  KVLM_RETURN_IF_ERROR(f.boolean("attention_bias", false, &lc.attention_bias));
  KVLM_RETURN_IF_ERROR(f.boolean("mlp_bias", false, &lc.mlp_bias));
  if (f.has("hidden_act") && j["hidden_act"] != "silu")
    return Status::error(source + ": hidden_act is " + j["hidden_act"].dump() +
                         ", but kvlm implements the Llama family's \"silu\" (SwiGLU) only");
  if (mistral) {  // MistralConfig's default window is 4096; null turns it off
    if (!j.contains("sliding_window")) {
      lc.sliding_window = 4096;
    } else if (f.has("sliding_window")) {
      KVLM_RETURN_IF_ERROR(f.positive_int("sliding_window", 0, &lc.sliding_window));
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
  }
  return inv_freq;
}

}  // namespace kvlm
