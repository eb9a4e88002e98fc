// kv_size: the cache formula, KvGeometry -> bytes, and the dtypes it prices. See kv_size.h for
// the formula; kv_size_config.cpp reads a KvGeometry from a config.json or a preset.
#include "kv/kv_size.h"

#include <algorithm>
#include <cctype>

#include "util/ascii.h"

namespace kvlm::kv {
namespace {

// ---- dtype ----------------------------------------------------------------------------------

struct DtypeName {
  const char* name;
  KvDtype dtype;
};

// The first spelling of each dtype is its canonical name.
constexpr DtypeName kDtypeNames[] = {
    {"f32", KvDtype::f32},   {"float32", KvDtype::f32},  {"fp32", KvDtype::f32},
    {"f16", KvDtype::f16},   {"float16", KvDtype::f16},  {"fp16", KvDtype::f16},
    {"half", KvDtype::f16},  {"bf16", KvDtype::bf16},    {"bfloat16", KvDtype::bf16},
    {"fp8", KvDtype::fp8},   {"fp8_e4m3", KvDtype::fp8}, {"fp8_e5m2", KvDtype::fp8},
    {"int8", KvDtype::int8}, {"q8_0", KvDtype::q8_0},    {"q8_0_kc", KvDtype::q8_0_kc},
};

// ---- checked arithmetic ---------------------------------------------------------------------

// Multiplies into *acc; false when the product does not fit in 64 bits.
bool mul_into(std::uint64_t* acc, std::uint64_t factor) {
  return !__builtin_mul_overflow(*acc, factor, acc);
}

std::uint64_t u(std::int64_t v) {
  return static_cast<std::uint64_t>(v);
}

std::uint64_t checkpoint_bytes_per_param(const std::string& dtype) {
  if (dtype == "f32") return 4;
  if (dtype == "f16" || dtype == "bf16") return 2;
  if (dtype == "fp8") return 1;
  return 0;
}

}  // namespace

// ---- public API -----------------------------------------------------------------------------

Result<KvDtype> parse_kv_dtype(std::string_view name) {
  const std::string key = ascii_lower(name);
  for (const DtypeName& d : kDtypeNames) {
    if (key == d.name) return d.dtype;
  }
  return Status::error(
      "--dtype: unknown cache dtype '" + std::string(name) +
      "'; accepted: f32, f16, bf16, fp8, int8, q8_0, q8_0_kc (also float32, fp32, float16, "
      "fp16, half, bfloat16, fp8_e4m3, fp8_e5m2)");
}

// fp8 and int8 count the values only. A quantized cache also keeps scales, but the engines
// that serve fp8 caches (vLLM, TensorRT-LLM) use one scale per tensor per layer (k_scale,
// v_scale): a few bytes per layer, not per token, so leaving them out changes nothing at the
// byte counts this tool prints. Per-token-per-head scales (as some int8 schemes use) would add
// sizeof(scale) / head_dim per value, about 3% for a 2-byte scale and head_dim 128.
std::uint64_t kv_dtype_bytes(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::f32:
      return 4;
    case KvDtype::f16:
    case KvDtype::bf16:
      return 2;
    case KvDtype::fp8:
    case KvDtype::int8:
    case KvDtype::q8_0:
    case KvDtype::q8_0_kc:
      return 1;
  }
  return 0;
}

double kv_dtype_bytes_per_value(KvDtype dtype) {
  return dtype == KvDtype::q8_0 || dtype == KvDtype::q8_0_kc
             ? 34.0 / 32.0
             : static_cast<double>(kv_dtype_bytes(dtype));
}

std::uint64_t KvGeometry::values_per_token_per_layer() const {
  if (mla) return u(kv_lora_rank) + u(qk_rope_head_dim);  // one latent + shared RoPE key
  return 2 * u(n_kv_head) * u(head_dim);                  // K and V
}

std::uint64_t KvGeometry::mha_values_per_token_per_layer() const {
  if (mla) return u(n_head) * (u(qk_nope_head_dim) + u(qk_rope_head_dim) + u(v_head_dim));
  return 2 * u(n_head) * u(head_dim);
}

const char* KvGeometry::attention_kind() const {
  if (mla) return "mla";
  if (n_kv_head == n_head) return "mha";
  return n_kv_head == 1 ? "mqa" : "gqa";
}

KvDtype default_kv_dtype(const KvGeometry& geometry) {
  if (geometry.checkpoint_dtype == "f16") return KvDtype::f16;
  if (geometry.checkpoint_dtype == "bf16" || geometry.checkpoint_dtype == "fp8") {
    return KvDtype::bf16;
  }
  return KvDtype::f32;
}

Result<KvSize> compute_kv_size(const KvGeometry& g, std::int64_t seq_len, std::int64_t batch,
                               KvDtype dtype) {
  if (seq_len <= 0) {
    return Status::error("--seq-len: must be a positive number of tokens, found " +
                         std::to_string(seq_len));
  }
  if (batch <= 0) {
    return Status::error("--batch: must be a positive number of sequences, found " +
                         std::to_string(batch));
  }
  if (g.n_layer <= 0 || g.values_per_token_per_layer() == 0 || g.sliding_window < 0) {
    return Status::error("model '" + g.model + "': geometry has a non-positive size (n_layer " +
                         std::to_string(g.n_layer) + ", values per token per layer " +
                         std::to_string(g.values_per_token_per_layer()) + ")");
  }
  KvSize s;
  s.dtype = dtype;
  s.seq_len = seq_len;
  s.batch = batch;
  s.kept_positions = g.sliding_window > 0 ? std::min(seq_len, g.sliding_window) : seq_len;
  s.values_per_token_per_layer = g.values_per_token_per_layer();

  // Rows as the cache stores them: K and V of n_kv_head * head_dim values each (MLA: one row of
  // the latent). Only q8_0 makes this differ from values x bytes per value: a scale per 32
  // values of a row, a short last block included.
  auto rows_bytes = [&](std::uint64_t values) -> std::uint64_t {
    if (g.mla) return kv_row_bytes(dtype, values);
    return 2 * kv_row_bytes(dtype, values / 2);
  };
  bool ok = true;
  s.bytes_per_token_per_layer = rows_bytes(s.values_per_token_per_layer);
  s.bytes_per_token = s.bytes_per_token_per_layer;
  ok &= mul_into(&s.bytes_per_token, u(g.n_layer));
  s.bytes_per_layer = s.bytes_per_token_per_layer;
  ok &= mul_into(&s.bytes_per_layer, u(s.kept_positions));
  ok &= mul_into(&s.bytes_per_layer, u(batch));
  s.bytes = s.bytes_per_layer;
  ok &= mul_into(&s.bytes, u(g.n_layer));
  s.mha_bytes = rows_bytes(g.mha_values_per_token_per_layer());
  for (std::uint64_t factor : {u(g.n_layer), u(s.kept_positions), u(batch)}) {
    ok &= mul_into(&s.mha_bytes, factor);
  }
  s.weights_bytes = g.n_params;
  ok &= mul_into(&s.weights_bytes, 4);  // the overflow check; the figure is the row's bytes
  if (ok) s.weights_bytes = kv_row_bytes(dtype, g.n_params);
  s.checkpoint_weights_bytes = g.n_params;
  ok &= mul_into(&s.checkpoint_weights_bytes, checkpoint_bytes_per_param(g.checkpoint_dtype));
  if (!ok) {
    return Status::error("--seq-len " + std::to_string(seq_len) + " x --batch " +
                         std::to_string(batch) + ": the cache size does not fit in 64 bits");
  }
  return s;
}

}  // namespace kvlm::kv