#include "model/config.h"

#include "model/config_fields.h"

namespace kvlm {

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
  // Widths that are products of two fields must stay ints (ConfigFields bounds each by 2^30).
  for (const auto& [n, what] :
       {std::pair{c.n_head, "head count"}, {c.n_kv_head, "key/value head count"}})
    if (int64_t{n} * c.head_dim > (int64_t{1} << 30))
      return Status::error(source + ": " + what + " " + std::to_string(n) + " x head dimension " +
                           std::to_string(c.head_dim) + " is above 2^30");
  if (c.n_head % c.n_kv_head != 0)
    return Status::error(source + ": the key/value head count (" + std::to_string(c.n_kv_head) +
                         ") must divide the head count (" + std::to_string(c.n_head) + ")");
  if (!(c.norm_eps > 0.0f))
    return Status::error(source + ": the norm epsilon must be positive, found " +
                         std::to_string(c.norm_eps));
  return Status::ok();
}

Result<ModelConfig> parse_gpt2_config(const std::string& json_text, const std::string& source) {
  Result<nlohmann::json> parsed = ConfigFields::parse_object(json_text, source);
  KVLM_RETURN_IF_ERROR(parsed);
  const nlohmann::json& j = parsed.value();
  if (j.contains("model_type") && j["model_type"] != "gpt2")
    return Status::error(source + ": model_type is " + j["model_type"].dump() +
                         ", expected \"gpt2\"");
  const ConfigFields f(j, source);
  ModelConfig c;
  c.arch = Architecture::kGpt2;
  KVLM_RETURN_IF_ERROR(f.positive("vocab_size", &c.n_vocab));
  KVLM_RETURN_IF_ERROR(f.positive("n_embd", &c.n_embd));
  KVLM_RETURN_IF_ERROR(f.positive("n_layer", &c.n_layer));
  KVLM_RETURN_IF_ERROR(f.positive("n_head", &c.n_head));
  KVLM_RETURN_IF_ERROR(f.positive_or("n_positions", 1024, &c.n_ctx));
  if (!f.has("n_inner") && 4 * int64_t{c.n_embd} > ConfigFields::kMaxInt)
    return Status::error(source + ": n_embd " + std::to_string(c.n_embd) +
                         " is too large: the feed-forward width 4 * n_embd would be above 2^30");
  KVLM_RETURN_IF_ERROR(f.positive_or("n_inner", 4 * int64_t{c.n_embd}, &c.n_ff));
  if (c.n_embd % c.n_head != 0)
    return Status::error(source + ": n_head (" + std::to_string(c.n_head) +
                         ") must divide n_embd (" + std::to_string(c.n_embd) + ")");
  c.n_kv_head = c.n_head;
  c.head_dim = c.n_embd / c.n_head;
  KVLM_RETURN_IF_ERROR(f.positive_number_or("layer_norm_epsilon", 1e-5f, &c.norm_eps));
  if (j.contains("activation_function") && j["activation_function"] != "gelu_new")
    return Status::error(source + ": activation_function is " + j["activation_function"].dump() +
                         ", but kvlm implements GPT-2's \"gelu_new\" (tanh form) only");
  KVLM_RETURN_IF_ERROR(f.token_id("eos_token_id", c.n_vocab, &c.eos_token_id, &c.eos_token_ids));
  KVLM_RETURN_IF_ERROR(f.token_id("bos_token_id", c.n_vocab, &c.bos_token_id));
  KVLM_RETURN_IF_ERROR(validate_config(c, source));
  return c;
}

}  // namespace kvlm
