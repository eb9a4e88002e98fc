#include "model/config.h"

#include <nlohmann/json.hpp>

namespace kvlm {

namespace {

// Reads an integer field; `fallback` < 0 means the field is required.
Status read_int(const nlohmann::json& j, const std::string& source, const char* field, int fallback,
                int* out) {
  if (!j.contains(field) || j[field].is_null()) {
    if (fallback < 0)
      return Status::error(source + ": missing required field '" + std::string(field) + "'");
    *out = fallback;
    return Status::ok();
  }
  const auto& v = j[field];
  if (!v.is_number_integer())
    return Status::error(source + ": field '" + std::string(field) +
                         "' must be an integer, found " + v.dump());
  const int64_t value = v.get<int64_t>();
  if (value <= 0 || value > (int64_t{1} << 30))
    return Status::error(source + ": field '" + std::string(field) +
                         "' must be a positive integer below 2^30, found " + v.dump());
  *out = static_cast<int>(value);
  return Status::ok();
}

}  // namespace

Status validate_config(const ModelConfig& c, const std::string& source) {
  auto positive = [&](int value, const char* name) -> Status {
    if (value <= 0)
      return Status::error(source + ": " + name + " must be positive, found " +
                           std::to_string(value));
    return Status::ok();
  };
  KVLM_RETURN_IF_ERROR(positive(c.n_vocab, "vocab size"));
  KVLM_RETURN_IF_ERROR(positive(c.n_ctx, "context length"));
  KVLM_RETURN_IF_ERROR(positive(c.n_embd, "embedding width"));
  KVLM_RETURN_IF_ERROR(positive(c.n_layer, "layer count"));
  KVLM_RETURN_IF_ERROR(positive(c.n_head, "head count"));
  KVLM_RETURN_IF_ERROR(positive(c.n_kv_head, "key/value head count"));
  KVLM_RETURN_IF_ERROR(positive(c.head_dim, "head dimension"));
  KVLM_RETURN_IF_ERROR(positive(c.n_ff, "feed-forward width"));
  if (c.n_head % c.n_kv_head != 0)
    return Status::error(source + ": the key/value head count (" + std::to_string(c.n_kv_head) +
                         ") must divide the head count (" + std::to_string(c.n_head) + ")");
  if (!(c.norm_eps > 0.0f))
    return Status::error(source + ": the norm epsilon must be positive, found " +
                         std::to_string(c.norm_eps));
  return Status::ok();
}

Result<ModelConfig> parse_gpt2_config(const std::string& json_text, const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    return Status::error(source + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) return Status::error(source + ": expected a JSON object");
  if (j.contains("model_type") && j["model_type"] != "gpt2")
    return Status::error(source + ": model_type is " + j["model_type"].dump() +
                         ", expected \"gpt2\"");
  ModelConfig c;
  c.arch = Architecture::kGpt2;
  KVLM_RETURN_IF_ERROR(read_int(j, source, "vocab_size", -1, &c.n_vocab));
  KVLM_RETURN_IF_ERROR(read_int(j, source, "n_embd", -1, &c.n_embd));
  KVLM_RETURN_IF_ERROR(read_int(j, source, "n_layer", -1, &c.n_layer));
  KVLM_RETURN_IF_ERROR(read_int(j, source, "n_head", -1, &c.n_head));
  KVLM_RETURN_IF_ERROR(read_int(j, source, "n_positions", 1024, &c.n_ctx));
  KVLM_RETURN_IF_ERROR(read_int(j, source, "n_inner", 4 * c.n_embd, &c.n_ff));
  if (c.n_embd % c.n_head != 0)
    return Status::error(source + ": n_head (" + std::to_string(c.n_head) +
                         ") must divide n_embd (" + std::to_string(c.n_embd) + ")");
  c.n_kv_head = c.n_head;
  c.head_dim = c.n_embd / c.n_head;
  if (j.contains("layer_norm_epsilon")) {
    if (!j["layer_norm_epsilon"].is_number())
      return Status::error(source + ": field 'layer_norm_epsilon' must be a number, found " +
                           j["layer_norm_epsilon"].dump());
    c.norm_eps = j["layer_norm_epsilon"].get<float>();
  }
  if (j.contains("activation_function") && j["activation_function"] != "gelu_new")
    return Status::error(source + ": activation_function is " + j["activation_function"].dump() +
                         ", but kvlm implements GPT-2's \"gelu_new\" (tanh form) only");
  for (const char* field : {"eos_token_id", "bos_token_id"}) {
    if (j.contains(field) && j[field].is_number_integer()) {
      const int id = j[field].get<int>();
      if (id < 0 || id >= c.n_vocab)
        return Status::error(source + ": " + field + " " + std::to_string(id) +
                             " is outside the vocabulary [0, " + std::to_string(c.n_vocab) + ")");
      (std::string(field) == "eos_token_id" ? c.eos_token_id : c.bos_token_id) = id;
    }
  }
  KVLM_RETURN_IF_ERROR(validate_config(c, source));
  return c;
}

}  // namespace kvlm
