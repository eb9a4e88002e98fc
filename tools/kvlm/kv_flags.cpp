#include "kv_flags.h"

namespace kvlm::cli {

void add_kv_dtype_flag(CLI::App* cmd, std::string* dtype) {
  cmd->add_option("--kv-dtype", *dtype,
                  "KV cache storage: f32 (default), f16, bf16, q8_0 (int8 + an fp16 scale per 32 "
                  "values, 8.5 bits) or fp8 (e4m3, scale 1 per layer and KV head)");
}

Result<KvStorageOptions> kv_storage_from_flag(const std::string& dtype, const std::string& flag) {
  KvStorageOptions options;
  if (dtype.empty()) return options;
  auto parsed = parse_cache_dtype(dtype);
  if (!parsed)
    return Status::error(flag + ": unknown KV cache dtype '" + dtype +
                         "'; accepted: f32, f16, bf16, q8_0, fp8");
  options.dtype = *parsed;
  return options;
}

}  // namespace kvlm::cli
