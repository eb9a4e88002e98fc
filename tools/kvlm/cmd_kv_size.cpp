// kvlm kv-size: what a model's KV cache costs in bytes, beside its weights.
//   kvlm kv-size (--config config.json | --model DIR | --preset NAME) --seq-len T
//                [--batch B] [--dtype f32|f16|bf16|fp8|int8|q8_0|q8_0_kc] [--json]
// The arithmetic lives in src/kv/kv_size; this file only picks the model and prints.
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.h"
#include "kv/kv_size.h"
#include "model/gguf_model.h"
#include "model/llama2c.h"

namespace kvlm::cli {
namespace {

struct KvSizeOptions {
  std::string config_path;
  std::string model_dir;
  std::string preset;
  std::int64_t seq_len = 0;
  std::int64_t batch = 1;
  std::string dtype;  // empty: the checkpoint's dtype (f32 when the config has none)
  bool json = false;
};

// 75497472 -> "75,497,472"
std::string with_commas(std::uint64_t v) {
  std::string digits = std::to_string(v), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// Three significant digits in powers of `base`, as the seed writes them: "75.5 MB", "604 MB".
std::string human(std::uint64_t bytes, double base, const char* const units[5]) {
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (v >= base && unit < 4) {
    v /= base;
    ++unit;
  }
  char buf[32];
  if (unit == 0) {
    std::snprintf(buf, sizeof buf, "%" PRIu64 " %s", bytes, units[0]);
  } else {
    std::snprintf(buf, sizeof buf,
                  v < 10    ? "%.2f %s"
                  : v < 100 ? "%.1f %s"
                            : "%.0f %s",
                  v, units[unit]);
  }
  return buf;
}

std::string decimal(std::uint64_t bytes) {
  static const char* const kUnits[5] = {"bytes", "kB", "MB", "GB", "TB"};
  return human(bytes, 1000.0, kUnits);
}

std::string binary(std::uint64_t bytes) {
  static const char* const kUnits[5] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  return human(bytes, 1024.0, kUnits);
}

// "75,497,472 bytes (75.5 MB, 72.0 MiB)"
std::string exact_and_human(std::uint64_t bytes) {
  return with_commas(bytes) + " bytes (" + decimal(bytes) + ", " + binary(bytes) + ")";
}

Result<kv::KvGeometry> load_geometry(const KvSizeOptions& o, std::string* source) {
  const int chosen = !o.config_path.empty() + !o.model_dir.empty() + !o.preset.empty();
  if (chosen != 1) {
    std::string names;
    for (const std::string& n : kv::kv_preset_names()) names += (names.empty() ? "" : ", ") + n;
    return Status::error(
        "choose the model with exactly one of --config config.json, "
        "--model DIR or --preset NAME (presets: " +
        names + ")");
  }
  if (!o.preset.empty()) {
    *source = "preset " + o.preset;
    return kv::kv_geometry_from_preset(o.preset);
  }
  std::string path = o.config_path;
  if (has_gguf_magic(o.model_dir)) {  // a GGUF file: its keys, through the checked loader
    auto model = load_gguf_model(o.model_dir, LoadOptions{});
    if (!model) return model.status();
    *source = o.model_dir;
    return kv::kv_geometry_from_config_text(gguf_model_config_json(*model.value()), o.model_dir);
  }
  if (std::filesystem::is_regular_file(o.model_dir)) {  // a llama2.c model.bin: read its header
    auto json = llama2c_config_json(o.model_dir);
    if (!json) return json.status();
    *source = o.model_dir;
    return kv::kv_geometry_from_config_text(json.value(), o.model_dir);
  }
  if (!o.model_dir.empty()) {
    path = (std::filesystem::path(o.model_dir) / "config.json").string();
    if (!std::filesystem::is_regular_file(path)) {
      return Status::error("--model: no config.json in '" + o.model_dir + "' (looked for " + path +
                           ")");
    }
  }
  *source = path;
  return kv::kv_geometry_from_config_file(path);
}

// q8_0 and q8_0_kc store the same rows: int8 values and an fp16 scale per 32.
bool stores_q8_0_rows(kv::KvDtype dtype) {
  return dtype == kv::KvDtype::q8_0 || dtype == kv::KvDtype::q8_0_kc;
}

void print_json(const kv::KvGeometry& g, const kv::KvSize& s, const std::string& source) {
  nlohmann::ordered_json j;
  j["model"] = g.model;
  j["source"] = source;
  j["attention"] = g.attention_kind();
  j["n_layer"] = g.n_layer;
  j["n_head"] = g.n_head;
  if (g.mla) {
    j["kv_lora_rank"] = g.kv_lora_rank;
    j["qk_rope_head_dim"] = g.qk_rope_head_dim;
  } else {
    j["n_kv_head"] = g.n_kv_head;
    j["head_dim"] = g.head_dim;
  }
  j["sliding_window"] = g.sliding_window;
  j["n_ctx"] = g.n_ctx;
  j["dtype"] = kv_dtype_name(s.dtype);
  if (stores_q8_0_rows(s.dtype)) {
    j["dtype_bytes"] = kv::kv_dtype_bytes_per_value(s.dtype);  // 1.0625: an fp16 scale per 32
  } else {
    j["dtype_bytes"] = kv::kv_dtype_bytes(s.dtype);
  }
  j["seq_len"] = s.seq_len;
  j["batch"] = s.batch;
  j["kept_positions"] = s.kept_positions;
  j["values_per_token_per_layer"] = s.values_per_token_per_layer;
  j["bytes_per_token_per_layer"] = s.bytes_per_token_per_layer;
  j["bytes_per_token"] = s.bytes_per_token;
  j["bytes_per_layer"] = s.bytes_per_layer;
  j["bytes"] = s.bytes;
  j["mha_bytes"] = s.mha_bytes;
  // Weights are counted from the config; null when it lacks the fields (see weights_note).
  j["n_params"] = g.n_params > 0 ? nlohmann::ordered_json(g.n_params) : nullptr;
  j["weights_bytes"] = g.n_params > 0 ? nlohmann::ordered_json(s.weights_bytes) : nullptr;
  // weights_bytes is at the cache's row format (q8_0_kc's per-channel key scales are a cache
  // thing: its weights would be plain q8_0).
  j["weights_dtype"] = s.dtype == kv::KvDtype::q8_0_kc ? "q8_0" : kv_dtype_name(s.dtype);
  j["checkpoint_dtype"] =
      g.checkpoint_dtype.empty() ? nullptr : nlohmann::ordered_json(g.checkpoint_dtype);
  j["checkpoint_weights_bytes"] =
      s.checkpoint_weights_bytes > 0 ? nlohmann::ordered_json(s.checkpoint_weights_bytes) : nullptr;
  if (!g.weights_note.empty()) j["weights_note"] = g.weights_note;
  std::printf("%s\n", j.dump(2).c_str());
}

void print_text(const kv::KvGeometry& g, const kv::KvSize& s, const std::string& source) {
  std::printf("model    %s (%s)\n", g.model.c_str(), source.c_str());
  if (g.mla) {
    std::printf("layout   MLA: %" PRId64 " layers, latent %" PRId64 " + RoPE key %" PRId64
                " per token per layer,\n"
                "         stored once: K and V of all %" PRId64
                " heads are recovered from the latent\n",
                g.n_layer, g.kv_lora_rank, g.qk_rope_head_dim, g.n_head);
  } else {
    std::printf("layout   %s: %" PRId64 " layers, %" PRId64 " KV heads x head_dim %" PRId64
                " (%" PRId64 " query heads)\n",
                g.attention_kind(), g.n_layer, g.n_kv_head, g.head_dim, g.n_head);
  }
  const std::string per_value =
      stores_q8_0_rows(s.dtype) ? std::string("8.5 bits per value: int8 + an fp16 scale per 32")
                                : std::to_string(kv::kv_dtype_bytes(s.dtype)) + " bytes per value";
  std::printf("cache    %s (%s), seq_len %s, batch %s\n", kv_dtype_name(s.dtype), per_value.c_str(),
              with_commas(s.seq_len).c_str(), with_commas(s.batch).c_str());
  if (g.sliding_window > 0) {
    std::printf("window   sliding window %s: keeps min(T, window) = %s positions\n",
                with_commas(g.sliding_window).c_str(), with_commas(s.kept_positions).c_str());
  }
  if (g.n_ctx > 0 && s.seq_len > g.n_ctx) {
    std::printf("note     --seq-len %s is past the model's context of %s positions\n",
                with_commas(s.seq_len).c_str(), with_commas(g.n_ctx).c_str());
  }
  std::printf("\n  per token per layer  %s values = %s bytes%s\n",
              with_commas(s.values_per_token_per_layer).c_str(),
              with_commas(s.bytes_per_token_per_layer).c_str(),
              g.mla ? " (latent + RoPE key)" : " (K and V)");
  std::printf("  per token            %s across %" PRId64 " layers\n",
              exact_and_human(s.bytes_per_token).c_str(), g.n_layer);
  std::printf("  per layer            %s for %s positions x batch %s\n",
              exact_and_human(s.bytes_per_layer).c_str(), with_commas(s.kept_positions).c_str(),
              with_commas(s.batch).c_str());
  std::printf("  total                %s\n", exact_and_human(s.bytes).c_str());
  if (s.mha_bytes != s.bytes) {
    std::printf("  full multi-head K/V  %s: %.1fx this cache (one K and V per query head)\n",
                exact_and_human(s.mha_bytes).c_str(),
                static_cast<double>(s.mha_bytes) / static_cast<double>(s.bytes));
  }
  if (g.n_params == 0) {
    std::printf("\nweights  not counted: %s\n", g.weights_note.c_str());
    return;
  }
  std::printf("\nweights  %s parameters (counted from the config)\n",
              with_commas(g.n_params).c_str());
  std::printf("  at the cache's %-5s %s\n", kv_dtype_name(s.dtype),
              exact_and_human(s.weights_bytes).c_str());
  if (s.checkpoint_weights_bytes > 0 && s.checkpoint_weights_bytes != s.weights_bytes) {
    std::printf("  as stored, %-9s %s\n", g.checkpoint_dtype.c_str(),
                exact_and_human(s.checkpoint_weights_bytes).c_str());
  }
  const double ratio = static_cast<double>(s.bytes) / static_cast<double>(s.weights_bytes);
  if (ratio >= 0.01) {
    std::printf("  cache / weights      %.2fx (both at %s)\n", ratio, kv_dtype_name(s.dtype));
  } else {
    std::printf("  cache / weights      %.2g%% (both at %s)\n", 100 * ratio,
                kv_dtype_name(s.dtype));
  }
  if (!g.weights_note.empty()) std::printf("  note: %s\n", g.weights_note.c_str());
}

Status run_kv_size(const KvSizeOptions& o) {
  std::string source;
  Result<kv::KvGeometry> geometry = load_geometry(o, &source);
  KVLM_RETURN_IF_ERROR(geometry);
  kv::KvDtype dtype = kv::default_kv_dtype(*geometry);
  if (!o.dtype.empty()) {
    Result<kv::KvDtype> parsed = kv::parse_kv_dtype(o.dtype);
    KVLM_RETURN_IF_ERROR(parsed);
    dtype = *parsed;
  }
  Result<kv::KvSize> size = kv::compute_kv_size(*geometry, o.seq_len, o.batch, dtype);
  KVLM_RETURN_IF_ERROR(size);
  if (o.json) {
    print_json(*geometry, *size, source);
  } else {
    print_text(*geometry, *size, source);
  }
  return Status::ok();
}

}  // namespace

void add_kv_size_command(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<KvSizeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "kv-size",
      "Bytes a model's KV cache takes for T tokens x batch B (K and V, every layer), beside "
      "the weights");
  cmd->add_option("--config", options->config_path, "a Hugging Face config.json");
  cmd->add_option("--model", options->model_dir,
                  "a model folder holding config.json, a GGUF file or a llama2.c model.bin");
  std::string presets;
  for (const std::string& n : kv::kv_preset_names()) presets += (presets.empty() ? "" : ", ") + n;
  cmd->add_option("--preset", options->preset, "a built-in model: " + presets);
  cmd->add_option("--seq-len", options->seq_len, "tokens per sequence (T)")->required();
  cmd->add_option("--batch", options->batch, "sequences (B)")->capture_default_str();
  cmd->add_option(
      "--dtype", options->dtype,
      "cache element type: f32, f16, bf16, fp8, int8, q8_0, q8_0_kc (default: the checkpoint's "
      "torch_dtype, f32 when the config has none)");
  cmd->add_flag("--json", options->json, "print one JSON object");
  cmd->callback([options, exit_code]() {
    const Status status = run_kv_size(*options);
    if (!status.is_ok()) {
      std::fprintf(stderr, "kvlm kv-size: error: %s\n", status.message().c_str());
      *exit_code = 1;
    }
  });
}

}  // namespace kvlm::cli
