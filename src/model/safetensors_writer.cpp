#include "model/safetensors_writer.h"

#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

namespace kvlm {

std::vector<uint8_t> serialize_safetensors(const std::vector<TensorToWrite>& tensors) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text += ' ';
  const uint64_t n = text.size();
  std::vector<uint8_t> out(8 + n + offset);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  std::memcpy(out.data() + 8, text.data(), n);
  uint8_t* data = out.data() + 8 + n;
  for (const TensorToWrite& t : tensors) {
    if (!t.bytes.empty()) std::memcpy(data, t.bytes.data(), t.bytes.size());
    data += t.bytes.size();
  }
  return out;
}

Status write_file(const std::string& path, const void* data, size_t n_bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return Status::error(path + ": cannot open for writing");
  const size_t written = n_bytes ? std::fwrite(data, 1, n_bytes, f) : 0;
  const bool closed = std::fclose(f) == 0;
  if (written != n_bytes || !closed) return Status::error(path + ": write failed");
  return Status::ok();
}

}  // namespace kvlm
