// GGUF reader: ggml's single-file model format (versions 2 and 3, little-endian), parsed from a
// byte buffer with every length, count, offset and size checked against the bytes actually
// there before it is used, so a hostile file gets an error, never a crash or an allocation in
// proportion to a number it claims. Spec: docs/gguf.md in ggml-org/ggml; what is checked and
// why: docs/gguf.md here.
//
// Layout: "GGUF", u32 version, u64 n_tensors, u64 n_kv, the key-value pairs (string key, u32
// value type, value), the tensor infos (string name, u32 n_dims, u64 ne[n_dims], u32 ggml type,
// u64 offset), padding to general.alignment (default 32), then the tensor data, each tensor at
// an aligned offset from the data section's start. ne[0] is the contiguous dimension, so a
// matrix [n_out, n_in] in PyTorch terms has ne = {n_in, n_out}.
//
// The parsed file holds views into the buffer: keep the buffer alive (GgufFile::open keeps the
// mapping itself).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvlm/status.h"
#include "ops/dtype.h"
#include "util/mapped_file.h"

namespace kvlm {

enum class GgufType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

const char* gguf_type_name(GgufType type);

// One metadata value. Scalars and numeric arrays point at their bytes in the buffer (unaligned,
// little-endian); strings and arrays of strings are views.
struct GgufValue {
  GgufType type = GgufType::kU8;
  GgufType element_type = GgufType::kU8;  // arrays only
  uint64_t count = 1;                     // array length (1 for scalars)
  const uint8_t* data = nullptr;          // scalars and numeric arrays
  std::vector<std::string_view> strings;  // a string (one entry) or an array of strings
};

struct GgufTensor {
  std::string_view name;
  int n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // ne[0] contiguous
  uint32_t ggml_type = 0;
  DType dtype = DType::kF32;
  uint64_t offset = 0;  // from the data section's start
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;
};

// ggml's type id for a DType (F32 0, F16 1, Q4_0 2, Q8_0 8, Q4_K 12, Q6_K 14, BF16 30).
uint32_t ggml_type_of(DType type);

class GgufFile {
 public:
  // Parses `bytes` (the whole file); `source` names it in errors. Views point into `bytes`.
  static Result<GgufFile> parse(std::span<const uint8_t> bytes, std::string source);
  // Maps `path` and parses it; the result owns the mapping.
  static Result<GgufFile> open(const std::string& path);

  GgufFile(GgufFile&&) noexcept = default;
  GgufFile& operator=(GgufFile&&) noexcept = default;

  const std::string& source() const { return source_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* tensor(std::string_view name) const;
  const GgufValue* find(std::string_view key) const;
  const std::map<std::string_view, GgufValue>& metadata() const { return kv_; }

  // Typed getters: an error names the key and the type found. `get_uint` takes any integer
  // type (writers differ between u32 and u64) if the value is non-negative; `get_float` F32
  // or F64.
  Result<uint64_t> get_uint(std::string_view key) const;
  Result<double> get_float(std::string_view key) const;
  Result<bool> get_bool(std::string_view key) const;
  Result<std::string_view> get_string(std::string_view key) const;
  // An array whose elements have type `element` (strings: GgufValue::strings).
  Result<const GgufValue*> get_array(std::string_view key, GgufType element) const;

  // "SOURCE: key 'K'" or "SOURCE: tensor 'T'", the start of every message about them.
  std::string where_key(std::string_view key) const;
  std::string where_tensor(std::string_view name) const;

 private:
  GgufFile() = default;
  std::string source_;
  MappedFile mapping_;  // open() only
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::map<std::string_view, GgufValue> kv_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string_view, size_t> tensor_index_;
  friend class GgufParser;
};

// Reads element i of a numeric array as a double / int64 (any numeric element type).
double gguf_array_float(const GgufValue& array, uint64_t i);
int64_t gguf_array_int(const GgufValue& array, uint64_t i);

}  // namespace kvlm
