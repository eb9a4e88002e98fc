#include "kv_flags.h"

#include "eval/kv_calibration.h"

namespace kvlm::cli {

void add_kv_dtype_flag(CLI::App* cmd, std::string* dtype) {
  cmd->add_option("--kv-dtype", *dtype,
                  "KV cache storage: f32 (default), f16, bf16, q8_0 (int8 + an fp16 scale per 32 "
                  "values, 8.5 bits), fp8 (e4m3, one scale per layer and KV head, calibrated "
                  "once per model) or q8_0_kc (q8_0 of keys divided by per-channel scales "
                  "calibrated once per model, stored before RoPE)");
}

Result<KvStorageOptions> kv_storage_from_flag(const std::string& dtype, const std::string& flag) {
  KvStorageOptions options;
  if (dtype.empty()) return options;
  auto parsed = parse_cache_dtype(dtype);
  if (!parsed)
    return Status::error(flag + ": unknown KV cache dtype '" + dtype +
                         "'; accepted: f32, f16, bf16, q8_0, fp8, q8_0_kc");
  options.dtype = *parsed;
  return options;
}

Result<KvStorageOptions> kv_storage_for_model(const std::string& dtype, Model& model,
                                              const Parallel& par, const std::string& flag) {
  auto options = kv_storage_from_flag(dtype, flag);
  if (!options) return options;
  return calibrated_kv_storage(options->dtype, model, par);
}

void add_window_flags(CLI::App* cmd, WindowFlags* flags) {
  cmd->add_option("--kv-window", flags->window,
                  "Attention sinks + sliding window (rotary models): attend over the first "
                  "--sink-tokens positions and the last W minus them, renumbered within the "
                  "window; the cache stays bounded, so generation may run past the context");
  cmd->add_option("--sink-tokens", flags->sinks,
                  "With --kv-window: leading positions always kept (StreamingLLM uses 4)");
}

Result<KvWindow> window_from_flags(const WindowFlags& flags) {
  if (flags.window == 0 && flags.sinks != 0)
    return Status::error("--sink-tokens " + std::to_string(flags.sinks) +
                         " needs --kv-window (the sinks are part of a window)");
  KvStorageOptions options;
  options.window = {flags.window, flags.sinks};
  KVLM_RETURN_IF_ERROR(validate_kv_storage(options, 1, 1));
  return options.window;
}

}  // namespace kvlm::cli
