// GgufWriter: writes GGUF version 3 files (kvlm convert, and tests that build files, hostile
// ones included: add_raw writes any value type under any key).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kvlm/status.h"
#include "model/gguf.h"

namespace kvlm {

class GgufWriter {
 public:
  void add_string(const std::string& key, const std::string& value);
  void add_u32(const std::string& key, uint32_t value);
  void add_i32(const std::string& key, int32_t value);
  void add_u64(const std::string& key, uint64_t value);
  void add_f32(const std::string& key, float value);
  void add_bool(const std::string& key, bool value);
  void add_string_array(const std::string& key, const std::vector<std::string>& values);
  void add_f32_array(const std::string& key, const std::vector<float>& values);
  void add_i32_array(const std::string& key, const std::vector<int32_t>& values);
  // A value of `type` whose encoding (after the type) is `value` exactly.
  void add_raw(const std::string& key, GgufType type, std::vector<uint8_t> value);
  // A tensor of shape ne (ne[0] contiguous) stored as `type`; data holds its bytes.
  void add_tensor(const std::string& name, std::vector<int64_t> ne, DType type,
                  std::vector<uint8_t> data);
  // Alignment of the data section and of every tensor (general.alignment is written when it is
  // not the default 32).
  void set_alignment(uint32_t alignment) { alignment_ = alignment; }

  std::vector<uint8_t> bytes() const;
  Status write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> ne;
    DType type;
    std::vector<uint8_t> data;
  };
  std::vector<uint8_t> header() const;  // everything before the tensor data, padding included
  std::vector<std::pair<std::string, std::vector<uint8_t>>> kv_;  // key, type + value bytes
  std::vector<Tensor> tensors_;
  uint32_t alignment_ = 32;
};

}  // namespace kvlm
