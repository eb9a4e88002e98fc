// Writes safetensors bytes: used to make test and demo models, and by tests that build
// deliberately broken files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvlm/status.h"

namespace kvlm {

struct TensorToWrite {
  std::string name;
  std::string dtype;  // "F32", "F16", "BF16", ...
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// Header padded with spaces so the data section starts 8-byte aligned (as Hugging Face does).
std::vector<uint8_t> serialize_safetensors(const std::vector<TensorToWrite>& tensors);

Status write_file(const std::string& path, const void* data, size_t n_bytes);

}  // namespace kvlm
