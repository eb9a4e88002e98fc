// Fuzz targets for the model files: safetensors, config.json and llama2.c's model.bin.
#include <optional>

#include "fuzz/targets.h"
#include "kv/kv_size.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/llama2c.h"
#include "model/llama_config.h"
#include "model/safetensors.h"

namespace kvlm::fuzz {

std::string fuzz_safetensors(Bytes data) {
  auto file = SafetensorsFile::from_bytes(std::vector<uint8_t>(data.begin(), data.end()),
                                          "fuzz.safetensors");
  if (!file) return "";
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
  uint64_t covered = 0;
  for (const auto& [name, e] : file->tensors()) {
    uint64_t n = safetensors_dtype_size(e.dtype);
    for (int64_t d : e.shape) n *= static_cast<uint64_t>(d);
    if (n != e.n_bytes) return "tensor '" + name + "': n_bytes disagrees with dtype x shape";
    covered += e.n_bytes;
    // Touch the first and last byte: AddressSanitizer reports a range outside the buffer.
    if (e.n_bytes > 0) keep(e.data[0] ^ e.data[e.n_bytes - 1]);
    shapes.emplace_back(name, e.shape);
  }
  if (covered > data.size()) return "tensors cover more bytes than the file has";
  // The typed views the loaders use, on every tensor with a matrix or vector shape.
  const Checkpoint checkpoint = Checkpoint::from_file(std::move(file.value()));
  OwnedTensors owned;
  for (const auto& [name, shape] : shapes) {
    if (shape.size() == 2 && shape[0] <= (1 << 20) && shape[1] <= (1 << 20)) {
      for (std::optional<DType> to : {std::optional<DType>(), std::optional<DType>(DType::kF16)}) {
        auto m = checkpoint.matrix(name, {""}, static_cast<int>(shape[0]),
                                   static_cast<int>(shape[1]), WeightLayout::kOutIn, to, &owned);
        if (m && m->n_in > 0 && m->n_out > 0) {
          const size_t last = static_cast<size_t>(m->n_in) * m->n_out - 1;
          keep(load_as_f32(m->data, m->dtype, 0) + load_as_f32(m->data, m->dtype, last));
        }
      }
    }
    if (shape.size() == 1) {
      auto v = checkpoint.vector_f32(name, {""}, shape, &owned);
      if (v && shape[0] > 0) keep(v.value()[shape[0] - 1]);
    }
  }
  return "";
}

std::string fuzz_config_json(Bytes data) {
  const std::string text = as_text(data);
  if (auto c = parse_gpt2_config(text, "config.json")) {
    if (c->n_ff <= 0 || c->head_dim * c->n_head != c->n_embd) return "GPT-2 config: bad widths";
  }
  if (auto lc = parse_llama_config(text, "config.json")) {
    // What kvlm writes for a config reads back as the same config.
    auto again = parse_llama_config(llama_config_json(lc.value()), "round trip");
    if (!again) return "Llama config does not read back: " + again.message();
    const ModelConfig &a = lc->model, &b = again->model;
    if (a.n_vocab != b.n_vocab || a.n_embd != b.n_embd || a.n_layer != b.n_layer ||
        a.n_head != b.n_head || a.n_kv_head != b.n_kv_head || a.head_dim != b.head_dim ||
        a.n_ff != b.n_ff || a.n_ctx != b.n_ctx || a.tied_embeddings != b.tied_embeddings)
      return "Llama config changes when written and read back";
    // The rotary table is sized by head_dim, which loaders check against the tensors first.
    if (a.head_dim <= (1 << 16)) (void)llama_rope_frequencies(lc.value());
  }
  if (auto g = kv::kv_geometry_from_config_text(text, "config.json")) {
    (void)kv::compute_kv_size(g.value(), 4096, 8, kv::KvDtype::f16);
  }
  return "";
}

std::string fuzz_llama2c_model(Bytes data) {
  auto header = parse_llama2c_header(data.data(), data.size(), "model.bin");
  if (!header) return "";
  if (llama2c_file_bytes(header.value()) != data.size())
    return "header accepted for a file of another size";
  auto config = llama2c_config(header.value(), "model.bin");
  if (!config) return "header accepted but its config is not: " + config.message();
  return "";
}

}  // namespace kvlm::fuzz
