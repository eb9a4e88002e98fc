// --kv-dtype: how a command's KV cache stores keys and values (kv/kv_cache.h's
// KvStorageOptions). Shared by every command that builds a cache.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "kv/kv_cache.h"
#include "kvlm/status.h"
#include "model/model.h"
#include "ops/parallel.h"

namespace kvlm::cli {

// Adds --kv-dtype f32|f16|bf16|q8_0|fp8 (default f32) storing into *dtype.
void add_kv_dtype_flag(CLI::App* cmd, std::string* dtype);
// The storage options a --kv-dtype value asks for; `flag` names it in the error, which lists
// what is accepted.
Result<KvStorageOptions> kv_storage_from_flag(const std::string& dtype,
                                              const std::string& flag = "--kv-dtype");
// The same for a loaded model: fp8 gets its per-(layer, KV head) scales from
// calibrate_fp8_scales (eval/kv_calibration.h), fixed before any request runs.
Result<KvStorageOptions> kv_storage_for_model(const std::string& dtype, Model& model,
                                              const Parallel& par,
                                              const std::string& flag = "--kv-dtype");

// --kv-window W --sink-tokens S: attention sinks + sliding window (docs/sliding_window.md).
struct WindowFlags {
  int window = 0;  // 0: off
  int sinks = 0;
};
void add_window_flags(CLI::App* cmd, WindowFlags* flags);
// The window the flags ask for, checked (W > S >= 0); the model checks the rest when it runs.
Result<KvWindow> window_from_flags(const WindowFlags& flags);

}  // namespace kvlm::cli
