// Safetensors reader: an 8-byte little-endian header length, a JSON header naming each tensor's
// dtype, shape and byte range, then the raw bytes. We read the format ourselves because we must
// validate everything in it before a kernel touches the bytes: the header length against the
// file, every range against the data section, its dtype and shape, and overlaps.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kvlm/status.h"
#include "util/mapped_file.h"

namespace kvlm {

struct SafetensorsEntry {
  std::string dtype;              // as written: "F32", "F16", "BF16", "I64", ...
  std::vector<int64_t> shape;     // row-major
  const uint8_t* data = nullptr;  // into the mapping
  size_t n_bytes = 0;
};

class SafetensorsFile {
 public:
  static Result<SafetensorsFile> open(const std::string& path);
  // Parses safetensors bytes held in memory (same checks as a file).
  static Result<SafetensorsFile> from_bytes(std::vector<uint8_t> bytes, const std::string& name);

  const std::string& path() const { return file_.path(); }
  const std::map<std::string, SafetensorsEntry>& tensors() const { return tensors_; }
  const SafetensorsEntry* find(const std::string& name) const;

 private:
  static Result<SafetensorsFile> parse(MappedFile file);
  MappedFile file_;
  std::map<std::string, SafetensorsEntry> tensors_;
};

// Bytes per element of a safetensors dtype name, or 0 when unknown.
size_t safetensors_dtype_size(const std::string& dtype);

}  // namespace kvlm
