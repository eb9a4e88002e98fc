// kv_size_config: a model's KvGeometry from its config.json (GPT-2, Llama-style, DeepSeek MLA
// layouts) or from a built-in preset. The formula over it is in kv_size.cpp.
#include <algorithm>
#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "kv/kv_size.h"
#include "model/config_fields.h"
#include "util/ascii.h"

namespace kvlm::kv {
namespace {

using json = nlohmann::json;

std::uint64_t u(std::int64_t v) {
  return static_cast<std::uint64_t>(v);
}

// ---- config.json field reading: model/config_fields.h ---------------------------------------

// A reader of one config object whose missing-field errors say what `layout` configs need.
ConfigFields fields(const json& obj, std::string_view source, const std::string& layout = "",
                    const std::string& needs = "") {
  return ConfigFields(obj, std::string(source),
                      layout.empty() ? "" : layout + " configs need " + needs);
}

// The checkpoint's dtype from torch_dtype (or "dtype", its newer name), overridden by an fp8
// quantization_config: DeepSeek V3 says torch_dtype bfloat16 but ships fp8 linear weights.
std::string checkpoint_dtype_of(const ConfigFields& root) {
  std::string name = ascii_lower(root.string_or("torch_dtype", root.string_or("dtype", "")));
  if (name == "float32") return "f32";
  if (name == "float16") return "f16";
  if (name == "bfloat16") return "bf16";
  return "";
}

// ---- GPT-2 ----------------------------------------------------------------------------------

Result<KvGeometry> parse_gpt2(const ConfigFields& f) {
  KvGeometry g;
  KVLM_ASSIGN_OR_RETURN(auto n_layer, f.positive("n_layer"));
  KVLM_ASSIGN_OR_RETURN(auto n_head, f.positive("n_head"));
  KVLM_ASSIGN_OR_RETURN(auto n_embd, f.positive("n_embd"));
  if (n_embd % n_head != 0) {
    return f.error("n_embd (" + std::to_string(n_embd) + ") is not a multiple of n_head (" +
                   std::to_string(n_head) + ")");
  }
  g.n_layer = n_layer;
  g.n_head = n_head;
  g.n_kv_head = n_head;  // GPT-2 is plain multi-head attention
  g.head_dim = n_embd / n_head;
  KVLM_ASSIGN_OR_RETURN(auto n_positions, f.positive_or("n_positions", 0));
  KVLM_ASSIGN_OR_RETURN(auto n_ctx, f.positive_or("n_ctx", n_positions));
  g.n_ctx = n_positions > 0 ? n_positions : n_ctx;

  KVLM_ASSIGN_OR_RETURN(auto n_inner,
                        f.positive_or("n_inner", 4 * n_embd));  // null means 4 * n_embd
  KVLM_ASSIGN_OR_RETURN(auto vocab, f.positive_or("vocab_size", 0));
  if (vocab == 0 || g.n_ctx == 0) {
    g.weights_note = "config has no vocab_size or n_positions, so the weights are not counted";
    return g;
  }
  // Per block: ln_1, c_attn (C -> 3C, with bias), attn c_proj (C -> C), ln_2,
  // mlp c_fc (C -> n_inner), mlp c_proj (n_inner -> C). The LM head is tied to wte.
  const std::uint64_t C = u(n_embd), F = u(n_inner);
  const std::uint64_t block =
      2 * C + (C * 3 * C + 3 * C) + (C * C + C) + 2 * C + (C * F + F) + (F * C + C);
  g.n_params = u(vocab) * C + u(g.n_ctx) * C + u(n_layer) * block + 2 * C;  // + ln_f
  return g;
}

// ---- Llama / Mistral / Qwen / Mixtral -------------------------------------------------------

// Parameters of one Llama-style layer's MLP (gated: gate, up, down) of width `inner`.
std::uint64_t gated_mlp(std::uint64_t H, std::uint64_t inner) {
  return 3 * H * inner;
}

Result<KvGeometry> parse_llama(const ConfigFields& f, const std::string& model_type) {
  KvGeometry g;
  KVLM_ASSIGN_OR_RETURN(auto n_layer, f.positive("num_hidden_layers"));
  KVLM_ASSIGN_OR_RETURN(auto n_head, f.positive("num_attention_heads"));
  KVLM_ASSIGN_OR_RETURN(auto n_kv_head,
                        f.positive_or("num_key_value_heads", n_head));  // absent: plain MHA
  KVLM_ASSIGN_OR_RETURN(auto hidden, f.positive_or("hidden_size", 0));
  if (n_head % n_kv_head != 0) {
    return f.error("num_attention_heads (" + std::to_string(n_head) +
                   ") is not a multiple of num_key_value_heads (" + std::to_string(n_kv_head) +
                   ")");
  }
  std::int64_t head_dim = 0;
  if (f.has("head_dim")) {
    KVLM_ASSIGN_OR_RETURN(auto hd, f.positive("head_dim"));
    head_dim = hd;
  } else {
    KVLM_ASSIGN_OR_RETURN(auto h,
                          f.positive("hidden_size"));  // errors with the layout's needs when absent
    if (h % n_head != 0) {
      return f.error("hidden_size (" + std::to_string(h) +
                     ") is not a multiple of num_attention_heads (" + std::to_string(n_head) +
                     ") and there is no head_dim");
    }
    head_dim = h / n_head;
  }
  g.n_layer = n_layer;
  g.n_head = n_head;
  g.n_kv_head = n_kv_head;
  g.head_dim = head_dim;
  KVLM_ASSIGN_OR_RETURN(auto use_window,
                        f.boolean_or("use_sliding_window", true));  // Qwen2 sets it false
  KVLM_ASSIGN_OR_RETURN(auto window, f.non_negative_or("sliding_window", 0));
  g.sliding_window = use_window ? window : 0;
  KVLM_ASSIGN_OR_RETURN(auto n_ctx, f.positive_or("max_position_embeddings", 0));
  g.n_ctx = n_ctx;

  KVLM_ASSIGN_OR_RETURN(auto vocab, f.positive_or("vocab_size", 0));
  KVLM_ASSIGN_OR_RETURN(auto inter, f.positive_or("intermediate_size", 0));
  if (vocab == 0 || inter == 0 || hidden == 0) {
    g.weights_note =
        "config has no vocab_size, intermediate_size or hidden_size, so the weights are not "
        "counted";
    return g;
  }
  KVLM_ASSIGN_OR_RETURN(auto tied,
                        f.boolean_or("tie_word_embeddings", false));  // LlamaConfig's default
  KVLM_ASSIGN_OR_RETURN(auto attn_bias, f.boolean_or("attention_bias", false));
  KVLM_ASSIGN_OR_RETURN(auto mlp_bias, f.boolean_or("mlp_bias", false));
  // Mixtral: every layer has num_local_experts experts of intermediate_size.
  KVLM_ASSIGN_OR_RETURN(auto local_experts, f.positive_or("num_local_experts", 0));
  // Qwen2/Qwen3 MoE: num_experts of moe_intermediate_size on every decoder_sparse_step-th
  // layer not listed in mlp_only_layers, plus an optional shared expert with a sigmoid gate.
  KVLM_ASSIGN_OR_RETURN(auto experts, f.positive_or("num_experts", 0));
  KVLM_ASSIGN_OR_RETURN(auto moe_inter, f.positive_or("moe_intermediate_size", inter));
  KVLM_ASSIGN_OR_RETURN(auto shared_inter, f.non_negative_or("shared_expert_intermediate_size", 0));
  KVLM_ASSIGN_OR_RETURN(auto sparse_step, f.positive_or("decoder_sparse_step", 1));
  KVLM_ASSIGN_OR_RETURN(auto dense_layers, f.index_set("mlp_only_layers"));

  const std::uint64_t H = u(hidden), Q = u(n_head * head_dim), KV = u(n_kv_head * head_dim);
  std::uint64_t attn = H * Q + 2 * H * KV + Q * H;                 // q, k, v, o projections
  if (attn_bias) attn += Q + 2 * KV + H;                           // Llama: bias on q, k, v and o
  if (model_type.rfind("qwen2", 0) == 0) attn += Q + 2 * KV;       // Qwen2: q, k, v always biased
  if (model_type.rfind("qwen3", 0) == 0) attn += 2 * u(head_dim);  // q_norm, k_norm
  const std::uint64_t dense_mlp = gated_mlp(H, u(inter)) + (mlp_bias ? 2 * u(inter) + H : 0);

  std::uint64_t params = u(vocab) * H * (tied ? 1 : 2) + H;  // embeddings, lm_head, final norm
  for (std::int64_t layer = 0; layer < n_layer; ++layer) {
    std::uint64_t mlp = dense_mlp;
    if (local_experts > 0) {
      mlp = H * u(local_experts) + u(local_experts) * gated_mlp(H, u(inter));
    } else if (experts > 0 && !dense_layers.count(layer) && (layer + 1) % sparse_step == 0) {
      mlp = H * u(experts) + u(experts) * gated_mlp(H, u(moe_inter));
      if (shared_inter > 0) mlp += gated_mlp(H, u(shared_inter)) + H;
    }
    params += attn + mlp + 2 * H;  // + input and post-attention norms
  }
  g.n_params = params;
  return g;
}

// ---- DeepSeek V2/V3 (multi-head latent attention) -------------------------------------------

Result<KvGeometry> parse_mla(const ConfigFields& f) {
  KvGeometry g;
  g.mla = true;
  KVLM_ASSIGN_OR_RETURN(auto n_layer, f.positive("num_hidden_layers"));
  KVLM_ASSIGN_OR_RETURN(auto n_head, f.positive("num_attention_heads"));
  KVLM_ASSIGN_OR_RETURN(auto kv_lora_rank, f.positive("kv_lora_rank"));
  KVLM_ASSIGN_OR_RETURN(auto rope_dim, f.positive("qk_rope_head_dim"));
  KVLM_ASSIGN_OR_RETURN(auto nope_dim, f.positive("qk_nope_head_dim"));
  KVLM_ASSIGN_OR_RETURN(auto v_dim, f.positive("v_head_dim"));
  g.n_layer = n_layer;
  g.n_head = n_head;
  g.kv_lora_rank = kv_lora_rank;
  g.qk_rope_head_dim = rope_dim;
  g.qk_nope_head_dim = nope_dim;
  g.v_head_dim = v_dim;
  KVLM_ASSIGN_OR_RETURN(auto n_ctx, f.positive_or("max_position_embeddings", 0));
  g.n_ctx = n_ctx;

  KVLM_ASSIGN_OR_RETURN(auto hidden, f.positive_or("hidden_size", 0));
  KVLM_ASSIGN_OR_RETURN(auto vocab, f.positive_or("vocab_size", 0));
  KVLM_ASSIGN_OR_RETURN(auto inter, f.positive_or("intermediate_size", 0));
  if (vocab == 0 || inter == 0 || hidden == 0) {
    g.weights_note =
        "config has no vocab_size, intermediate_size or hidden_size, so the weights are not "
        "counted";
    return g;
  }
  KVLM_ASSIGN_OR_RETURN(auto q_lora_rank,
                        f.positive_or("q_lora_rank", 0));  // null: q is not compressed
  KVLM_ASSIGN_OR_RETURN(auto routed, f.positive_or("n_routed_experts", 0));  // null: a dense model
  KVLM_ASSIGN_OR_RETURN(auto moe_inter, f.positive_or("moe_intermediate_size", inter));
  KVLM_ASSIGN_OR_RETURN(auto shared, f.non_negative_or("n_shared_experts", 0));
  KVLM_ASSIGN_OR_RETURN(auto first_dense, f.non_negative_or("first_k_dense_replace", 0));
  KVLM_ASSIGN_OR_RETURN(auto moe_freq, f.positive_or("moe_layer_freq", 1));
  KVLM_ASSIGN_OR_RETURN(auto tied, f.boolean_or("tie_word_embeddings", false));
  // noaux_tc routing (V3) keeps a learned per-expert bias (e_score_correction_bias).
  const bool routing_bias = f.string_or("topk_method", "") == "noaux_tc";

  const std::uint64_t H = u(hidden), NH = u(n_head), R = u(kv_lora_rank);
  const std::uint64_t QK = u(nope_dim + rope_dim);
  std::uint64_t attn = 0;
  if (q_lora_rank > 0) {  // q_a_proj, q_a_layernorm, q_b_proj
    attn += H * u(q_lora_rank) + u(q_lora_rank) + u(q_lora_rank) * NH * QK;
  } else {  // q_proj
    attn += H * NH * QK;
  }
  attn += H * (R + u(rope_dim)) + R;     // kv_a_proj_with_mqa, kv_a_layernorm
  attn += R * NH * u(nope_dim + v_dim);  // kv_b_proj: latent -> every head's K_nope and V
  attn += NH * u(v_dim) * H;             // o_proj

  std::uint64_t params = u(vocab) * H * (tied ? 1 : 2) + H;  // embeddings, lm_head, final norm
  for (std::int64_t layer = 0; layer < n_layer; ++layer) {
    std::uint64_t mlp = gated_mlp(H, u(inter));
    if (routed > 0 && layer >= first_dense && layer % moe_freq == 0) {
      mlp = H * u(routed) + (routing_bias ? u(routed) : 0) +
            (u(routed) + u(shared)) * gated_mlp(H, u(moe_inter));
    }
    params += attn + mlp + 2 * H;  // + input and post-attention norms
  }
  g.n_params = params;
  g.weights_note =
      "multi-token-prediction layers (num_nextn_predict_layers) are not counted: ordinary "
      "decoding does not run them";
  return g;
}

bool has_any(const json& obj, std::initializer_list<const char*> keys) {
  return std::any_of(keys.begin(), keys.end(), [&](const char* k) { return obj.contains(k); });
}

// ---- presets --------------------------------------------------------------------------------

struct Preset {
  const char* name;
  const char* config;  // the published config.json's fields that kv_size reads
};

// Values copied from each model's published config.json on the Hugging Face hub
// (openai-community/gpt2*, meta-llama/Llama-3.1-8B, meta-llama/Llama-3.3-70B-Instruct,
// mistralai/Mistral-7B-v0.1, deepseek-ai/DeepSeek-V3). They go through the same parser as a
// user's file, so a preset is exactly what --config with that file would give.
constexpr Preset kPresets[] = {
    {"gpt2", R"({"model_type": "gpt2", "n_layer": 12, "n_head": 12, "n_embd": 768,
      "n_positions": 1024, "n_ctx": 1024, "vocab_size": 50257})"},
    {"gpt2-medium", R"({"model_type": "gpt2", "n_layer": 24, "n_head": 16, "n_embd": 1024,
      "n_positions": 1024, "n_ctx": 1024, "vocab_size": 50257})"},
    {"gpt2-large", R"({"model_type": "gpt2", "n_layer": 36, "n_head": 20, "n_embd": 1280,
      "n_positions": 1024, "n_ctx": 1024, "vocab_size": 50257})"},
    {"gpt2-xl", R"({"model_type": "gpt2", "n_layer": 48, "n_head": 25, "n_embd": 1600,
      "n_positions": 1024, "n_ctx": 1024, "vocab_size": 50257})"},
    {"llama-3.1-8b", R"({"model_type": "llama", "num_hidden_layers": 32,
      "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096,
      "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 131072,
      "tie_word_embeddings": false, "attention_bias": false, "mlp_bias": false,
      "torch_dtype": "bfloat16"})"},
    {"llama-3.3-70b", R"({"model_type": "llama", "num_hidden_layers": 80,
      "num_attention_heads": 64, "num_key_value_heads": 8, "hidden_size": 8192,
      "intermediate_size": 28672, "vocab_size": 128256, "max_position_embeddings": 131072,
      "tie_word_embeddings": false, "attention_bias": false, "mlp_bias": false,
      "torch_dtype": "bfloat16"})"},
    {"mistral-7b", R"({"model_type": "mistral", "num_hidden_layers": 32,
      "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096,
      "intermediate_size": 14336, "vocab_size": 32000, "max_position_embeddings": 32768,
      "sliding_window": 4096, "tie_word_embeddings": false, "torch_dtype": "bfloat16"})"},
    {"deepseek-v3", R"({"model_type": "deepseek_v3", "num_hidden_layers": 61,
      "num_attention_heads": 128, "num_key_value_heads": 128, "hidden_size": 7168,
      "intermediate_size": 18432, "moe_intermediate_size": 2048, "vocab_size": 129280,
      "max_position_embeddings": 163840, "kv_lora_rank": 512, "q_lora_rank": 1536,
      "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
      "n_routed_experts": 256, "n_shared_experts": 1, "first_k_dense_replace": 3,
      "moe_layer_freq": 1, "num_experts_per_tok": 8, "topk_method": "noaux_tc",
      "num_nextn_predict_layers": 1, "tie_word_embeddings": false, "attention_bias": false,
      "torch_dtype": "bfloat16", "quantization_config": {"quant_method": "fp8",
      "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}})"},
};

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

Result<KvGeometry> kv_geometry_from_config_text(std::string_view json_text,
                                                std::string_view source) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::exception& e) {
    return Status::error(std::string(source) + ": not valid JSON: " + e.what());
  }
  if (!root.is_object()) {
    return Status::error(std::string(source) + ": expected a JSON object, found " +
                         std::string(root.type_name()));
  }
  const auto layer_keys = {"n_layer", "n_embd", "num_hidden_layers", "kv_lora_rank"};
  const json* cfg = &root;
  // Multimodal configs (Llama 4, Gemma 3, Mistral 3, ...) keep the language model's fields in
  // text_config.
  if (!has_any(root, layer_keys) && root.contains("text_config") &&
      root["text_config"].is_object()) {
    cfg = &root["text_config"];
  }
  const ConfigFields top = fields(root, source);
  std::string model_type = top.string_or("model_type", "");
  if (model_type.empty() && cfg != &root)
    model_type = fields(*cfg, source).string_or("model_type", "");

  Result<KvGeometry> parsed = Status::error("");
  if (cfg->contains("kv_lora_rank") && !(*cfg)["kv_lora_rank"].is_null()) {
    parsed = parse_mla(fields(*cfg, source, "DeepSeek MLA",
                              "num_hidden_layers, num_attention_heads, kv_lora_rank, "
                              "qk_rope_head_dim, qk_nope_head_dim, v_head_dim"));
  } else if (cfg->contains("n_layer") || cfg->contains("n_embd")) {
    parsed = parse_gpt2(fields(*cfg, source, "GPT-2", "n_layer, n_head, n_embd"));
  } else if (cfg->contains("num_hidden_layers")) {
    parsed = parse_llama(fields(*cfg, source, "Llama-style",
                                "num_hidden_layers, num_attention_heads, and head_dim or "
                                "hidden_size (num_key_value_heads defaults to "
                                "num_attention_heads)"),
                         model_type);
  } else {
    std::string found;
    for (auto it = cfg->begin(); it != cfg->end(); ++it)
      found += (found.empty() ? "" : ", ") + it.key();
    return Status::error(
        std::string(source) +
        ": cannot tell the attention layout: expected GPT-2 fields (n_layer, n_head, n_embd), "
        "Llama-style fields (num_hidden_layers, num_attention_heads, num_key_value_heads, "
        "head_dim or hidden_size) or DeepSeek MLA fields (kv_lora_rank, qk_rope_head_dim); "
        "found keys: " +
        (found.empty() ? "none" : found));
  }
  if (!parsed.is_ok()) return parsed;
  KvGeometry g = std::move(parsed).value();
  g.model = model_type.empty() ? "unknown" : model_type;
  g.checkpoint_dtype = checkpoint_dtype_of(top);
  if (root.contains("quantization_config") && root["quantization_config"].is_object()) {
    const std::string method =
        fields(root["quantization_config"], source).string_or("quant_method", "");
    g.checkpoint_dtype = method == "fp8" ? "fp8" : "";  // other schemes: size unknown
    if (method != "fp8") {
      g.weights_note += std::string(g.weights_note.empty() ? "" : "; ") + "quantized checkpoint (" +
                        method + "): its stored size is not computed";
    }
  }
  return g;
}

Result<KvGeometry> kv_geometry_from_config_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error(path + ": cannot open the config file");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::error(path + ": read error");
  return kv_geometry_from_config_text(text.str(), path);
}

std::vector<std::string> kv_preset_names() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.emplace_back(p.name);
  return names;
}

Result<KvGeometry> kv_geometry_from_preset(std::string_view name) {
  const std::string key = ascii_lower(name);
  for (const Preset& p : kPresets) {
    if (key != p.name) continue;
    Result<KvGeometry> g = kv_geometry_from_config_text(p.config, "preset " + key);
    if (g.is_ok()) g->model = p.name;
    return g;
  }
  return Status::error("--preset: unknown preset '" + std::string(name) +
                       "'; accepted: " + join(kv_preset_names()));
}

}  // namespace kvlm::kv
