#include "model/llama2c.h"

#include <cstdlib>
#include <cstring>

#include "model/quantize_weights.h"

namespace kvlm {

namespace {

std::string field(const char* name, int32_t value) {
  return std::string(name) + " (" + std::to_string(value) + ")";
}

// Element counts of each part of the file, in file order.
struct Llama2cLayout {
  uint64_t embed, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, freq_cis, wcls;
  uint64_t total() const {
    return embed + rms_att + wq + wk + wv + wo + rms_ffn + w1 + w2 + w3 + rms_final + freq_cis +
           wcls;
  }
};

// Only called on a header llama2c_config accepted, which bounds the total below 2^62 bytes, so
// no product here overflows.
Llama2cLayout layout_of(const Llama2cHeader& h) {
  const uint64_t C = h.dim, F = h.hidden_dim, L = h.n_layers, V = std::abs(h.vocab_size);
  const uint64_t D = static_cast<uint64_t>(h.dim / h.n_heads);
  const uint64_t Q = h.n_heads * D, KV = h.n_kv_heads * D;
  Llama2cLayout s{};
  s.embed = V * C;
  s.rms_att = L * C;
  s.wq = L * Q * C;
  s.wk = L * KV * C;
  s.wv = L * KV * C;
  s.wo = L * C * Q;
  s.rms_ffn = L * C;
  s.w1 = L * F * C;
  s.w2 = L * C * F;
  s.w3 = L * F * C;
  s.rms_final = C;
  s.freq_cis = 2 * static_cast<uint64_t>(h.seq_len) * (D / 2);
  s.wcls = h.vocab_size < 0 ? V * C : 0;
  return s;
}

// Copies or converts a matrix into owned memory of dtype `to` (for --weights; quantized on
// `n_threads`, 0: omp_get_max_threads()).
WeightMatrix convert(const WeightMatrix& m, DType to, OwnedTensors* owned, int n_threads) {
  if (m.dtype == to) return m;
  if (dtype_is_quantized(to)) {  // cannot fail: widths that are not whole blocks fall back
    auto q = convert_matrix_on_load(m, to, owned, "llama2.c matrix", n_threads);
    return q ? q.value() : m;
  }
  const size_t n = static_cast<size_t>(m.n_in) * m.n_out;
  void* dst = owned->allocate(n * dtype_size(to));
  for (size_t i = 0; i < n; ++i) {
    const float value = load_as_f32(m.data, m.dtype, i);
    if (to == DType::kF32) static_cast<float*>(dst)[i] = value;
    if (to == DType::kF16) static_cast<uint16_t*>(dst)[i] = f32_to_f16(value);
    if (to == DType::kBF16) static_cast<uint16_t*>(dst)[i] = f32_to_bf16(value);
  }
  WeightMatrix out = m;
  out.data = dst;
  out.dtype = to;
  return out;
}

}  // namespace

Result<LlamaConfig> llama2c_config(const Llama2cHeader& h, const std::string& source) {
  const std::string where = source + ": llama2.c header: ";
  const std::pair<const char*, int32_t> sizes[] = {
      {"dim", h.dim},         {"hidden_dim", h.hidden_dim}, {"n_layers", h.n_layers},
      {"n_heads", h.n_heads}, {"n_kv_heads", h.n_kv_heads}, {"seq_len", h.seq_len}};
  for (const auto& [name, value] : sizes)
    if (value <= 0) return Status::error(where + field(name, value) + " must be positive");
  if (h.vocab_size == 0 || h.vocab_size == INT32_MIN)
    return Status::error(where + field("vocab_size", h.vocab_size) +
                         " must be non-zero (negative means an unshared classifier)");
  if (h.dim % h.n_heads != 0)
    return Status::error(where + field("n_heads", h.n_heads) + " must divide " +
                         field("dim", h.dim));
  if (h.n_heads % h.n_kv_heads != 0)
    return Status::error(where + field("n_kv_heads", h.n_kv_heads) + " must divide " +
                         field("n_heads", h.n_heads));
  const int head_size = h.dim / h.n_heads;
  if (head_size % 2 != 0)
    return Status::error(where + "head size dim / n_heads = " + std::to_string(head_size) +
                         " must be even for rotary embeddings");
  // Products of three int32 sizes overflow 64 bits; estimate in long double first so that
  // layout_of's integer arithmetic is safe. No real file is anywhere near 4e18 bytes.
  const long double bytes =
      4.0L * (2.0L * h.dim * h.dim * h.n_layers + 3.0L * h.dim * h.hidden_dim * h.n_layers +
              2.0L * std::abs(static_cast<long double>(h.vocab_size)) * h.dim +
              static_cast<long double>(h.seq_len) * head_size);
  if (bytes > 4.0e18L)
    return Status::error(where + "sizes describe a model of ~" + std::to_string(bytes / 1e9L) +
                         " GB, not a real file");
  LlamaConfig lc;
  ModelConfig& c = lc.model;
  c.arch = Architecture::kLlama;
  c.n_vocab = std::abs(h.vocab_size);
  c.n_ctx = h.seq_len;
  c.n_embd = h.dim;
  c.n_layer = h.n_layers;
  c.n_head = h.n_heads;
  c.n_kv_head = h.n_kv_heads;
  c.head_dim = head_size;
  c.n_ff = h.hidden_dim;
  c.norm_eps = 1e-5f;  // run.c's rmsnorm
  c.rope_theta = 10000.0f;
  c.tied_embeddings = h.vocab_size > 0;
  c.bos_token_id = c.n_vocab > 1 ? 1 : -1;
  c.eos_token_id = c.n_vocab > 2 ? 2 : -1;
  KVLM_RETURN_IF_ERROR(validate_llama_config(lc, source));
  return lc;
}

uint64_t llama2c_file_bytes(const Llama2cHeader& header) {
  return kLlama2cHeaderBytes + sizeof(float) * layout_of(header).total();
}

namespace {

Result<Llama2cHeader> parse_header(const MappedFile& file) {
  return parse_llama2c_header(file.data(), file.size(), file.path());
}

}  // namespace

Result<Llama2cHeader> parse_llama2c_header(const uint8_t* data, size_t size,
                                           const std::string& path) {
  if (size < kLlama2cHeaderBytes)
    return Status::error(path + ": " + std::to_string(size) +
                         " bytes, too short for llama2.c's 28-byte header");
  uint32_t magic;
  std::memcpy(&magic, data, 4);
  if (magic == 0x616b3432u) {  // "ak42": export.py's version 1 and 2
    int32_t version;
    std::memcpy(&version, data + 4, 4);
    return Status::error(path + ": a llama2.c version-" + std::to_string(version) +
                         " export (magic \"ak42\"); kvlm reads the legacy version-0 export that "
                         "run.c reads (export.py --version 0)");
  }
  Llama2cHeader h;
  std::memcpy(&h, data, kLlama2cHeaderBytes);
  KVLM_RETURN_IF_ERROR(llama2c_config(h, path));
  const uint64_t expected = llama2c_file_bytes(h);
  if (size != expected) {
    const Llama2cLayout s = layout_of(h);
    return Status::error(
        path + ": " + std::to_string(size) + " bytes, but its header (dim " +
        std::to_string(h.dim) + ", hidden_dim " + std::to_string(h.hidden_dim) + ", n_layers " +
        std::to_string(h.n_layers) + ", n_heads " + std::to_string(h.n_heads) + ", n_kv_heads " +
        std::to_string(h.n_kv_heads) + ", vocab_size " + std::to_string(h.vocab_size) +
        ", seq_len " + std::to_string(h.seq_len) + ") needs exactly " + std::to_string(expected) +
        " (28-byte header + " + std::to_string(s.total()) + " fp32 values" +
        (s.wcls ? ", classifier included" : "") + ")" +
        (size < expected ? ": the file is truncated" : ": trailing bytes"));
  }
  return h;
}

Result<Llama2cHeader> read_llama2c_header(const std::string& path) {
  KVLM_ASSIGN_OR_RETURN(const MappedFile file, MappedFile::open(path));
  return parse_header(file);
}

Result<std::string> llama2c_config_json(const std::string& path) {
  KVLM_ASSIGN_OR_RETURN(const Llama2cHeader header, read_llama2c_header(path));
  KVLM_ASSIGN_OR_RETURN(const LlamaConfig config, llama2c_config(header, path));
  return llama_config_json(config);
}

Result<std::unique_ptr<LlamaModel>> load_llama2c(const std::string& path,
                                                 const LoadOptions& options) {
  auto storage = std::make_unique<WeightStorage>();
  KVLM_ASSIGN_OR_RETURN(storage->file, MappedFile::open(path));
  KVLM_ASSIGN_OR_RETURN(const Llama2cHeader header, parse_header(storage->file));
  KVLM_ASSIGN_OR_RETURN(LlamaConfig config, llama2c_config(header, path));
  const ModelConfig& c = config.model;
  const Llama2cLayout s = layout_of(header);

  // The header is 28 bytes, so every fp32 array after it is 4-byte aligned in the mapping.
  const float* base = reinterpret_cast<const float*>(storage->file.data() + kLlama2cHeaderBytes);
  const float* embed = base;
  const float* rms_att = embed + s.embed;
  const float* wq = rms_att + s.rms_att;
  const float* wk = wq + s.wq;
  const float* wv = wk + s.wk;
  const float* wo = wv + s.wv;
  const float* rms_ffn = wo + s.wo;
  const float* w1 = rms_ffn + s.rms_ffn;
  const float* w2 = w1 + s.w1;
  const float* w3 = w2 + s.w2;
  const float* rms_final = w3 + s.w3;
  const float* wcls = rms_final + s.rms_final + s.freq_cis;

  const DType to = options.convert_weights.value_or(DType::kF32);
  OwnedTensors* owned = &storage->owned;
  // matrix(p, layer, out, in): layer `layer` of a [L, out, in] array.
  auto matrix = [&](const float* p, int layer, int n_out, int n_in) {
    WeightMatrix m;
    m.data = p + static_cast<size_t>(layer) * n_out * n_in;
    m.dtype = DType::kF32;
    m.layout = WeightLayout::kOutIn;
    m.n_in = n_in;
    m.n_out = n_out;
    return convert(m, to, owned, options.n_threads);
  };
  const int C = c.n_embd, F = c.n_ff, Q = c.q_dim(), KV = c.kv_dim(), V = c.n_vocab;
  LlamaWeights w;
  w.embed = matrix(embed, 0, V, C);
  w.layers.resize(c.n_layer);
  for (int l = 0; l < c.n_layer; ++l) {
    LlamaLayer& L = w.layers[l];
    L.attn_norm = rms_att + static_cast<size_t>(l) * C;
    L.wq = matrix(wq, l, Q, C);
    L.wk = matrix(wk, l, KV, C);
    L.wv = matrix(wv, l, KV, C);
    L.wo = matrix(wo, l, C, Q);
    L.ffn_norm = rms_ffn + static_cast<size_t>(l) * C;
    L.w1 = matrix(w1, l, F, C);
    L.w2 = matrix(w2, l, C, F);
    L.w3 = matrix(w3, l, F, C);
  }
  w.final_norm = rms_final;
  w.lm_head = c.tied_embeddings ? w.embed : matrix(wcls, 0, V, C);
  return LlamaModel::create(std::move(config), std::move(w), std::move(storage),
                            path + " (llama2.c model.bin)");
}

}  // namespace kvlm
