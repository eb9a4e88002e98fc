#include "model/gguf.h"

#include <cstring>

namespace kvlm {

namespace {

constexpr uint64_t kMaxKeyBytes = 65535;  // the spec's limit
constexpr uint64_t kMaxNameBytes = 63;    // ggml's GGML_MAX_NAME (64) less the terminator
constexpr int kMaxDims = 4;
// Smallest encodings, which bound the counts a file of a given size can really hold: a key-value
// pair is at least a key length (8), a value type (4) and a one-byte value; a tensor info a name
// length (8), n_dims (4), a type (4) and an offset (8).
constexpr uint64_t kMinKvBytes = 13;
constexpr uint64_t kMinTensorInfoBytes = 24;

size_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kBool:
      return 1;
    case GgufType::kU16:
    case GgufType::kI16:
      return 2;
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kF32:
      return 4;
    case GgufType::kU64:
    case GgufType::kI64:
    case GgufType::kF64:
      return 8;
    default:
      return 0;  // string, array: not fixed
  }
}

template <typename T>
T read_le(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));  // kvlm runs on little-endian machines only (x86-64, Arm64)
  return v;
}

std::optional<DType> dtype_of_ggml(uint32_t t) {
  switch (t) {
    case 0:
      return DType::kF32;
    case 1:
      return DType::kF16;
    case 2:
      return DType::kQ4_0;
    case 6:
      return DType::kQ5_0;
    case 8:
      return DType::kQ8_0;
    case 12:
      return DType::kQ4_K;
    case 14:
      return DType::kQ6_K;
    case 30:
      return DType::kBF16;
    default:
      return std::nullopt;
  }
}

// Names of the ggml types kvlm does not read, for messages.
std::string ggml_type_label(uint32_t t) {
  static const char* const kNames[] = {
      "F32",     "F16",    "Q4_0",    "Q4_1",  "Q4_2",   "Q4_3",  "Q5_0",  "Q5_1",
      "Q8_0",    "Q8_1",   "Q2_K",    "Q3_K",  "Q4_K",   "Q5_K",  "Q6_K",  "Q8_K",
      "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS",
      "I8",      "I16",    "I32",     "I64",   "F64",    "IQ1_M", "BF16"};
  const std::string id = std::to_string(t);
  return t < std::size(kNames) ? std::string(kNames[t]) + " (ggml type " + id + ")"
                               : "ggml type " + id;
}

}  // namespace

const char* gguf_type_name(GgufType type) {
  static const char* const kNames[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                       "bool", "string", "array", "u64", "i64", "f64"};
  const auto i = static_cast<uint32_t>(type);
  return i < std::size(kNames) ? kNames[i] : "unknown";
}

uint32_t ggml_type_of(DType type) {
  switch (type) {
    case DType::kF32:
      return 0;
    case DType::kF16:
      return 1;
    case DType::kQ4_0:
      return 2;
    case DType::kQ5_0:
      return 6;
    case DType::kQ8_0:
      return 8;
    case DType::kQ4_K:
      return 12;
    case DType::kQ6_K:
      return 14;
    case DType::kBF16:
      return 30;
  }
  return 0;
}

// Reads the buffer front to back; every read checks the bytes left first.
class GgufParser {
 public:
  GgufParser(std::span<const uint8_t> bytes, GgufFile* file) : bytes_(bytes), file_(file) {}

  Status parse();

 private:
  uint64_t left() const { return bytes_.size() - pos_; }
  std::string at() const { return " (at byte " + std::to_string(pos_) + ")"; }
  Status need(uint64_t n, const std::string& what) const {
    if (n <= left()) return Status::ok();
    return Status::error(file_->source_ + ": " + what + ": needs " + std::to_string(n) +
                         " bytes, only " + std::to_string(left()) + " left in the file" + at());
  }
  template <typename T>
  Status read(T* out, const std::string& what) {
    KVLM_RETURN_IF_ERROR(need(sizeof(T), what));
    *out = read_le<T>(bytes_.data() + pos_);
    pos_ += sizeof(T);
    return Status::ok();
  }
  Status read_string(std::string_view* out, uint64_t max_len, const std::string& what);
  Status read_value(GgufValue* value, GgufType type, const std::string& what);
  Status read_kv(std::string_view* key_out);
  Status read_tensor_info(uint64_t index, GgufTensor* t);
  Status check_alignment();
  Status place_tensors(uint64_t data_start);

  std::span<const uint8_t> bytes_;
  GgufFile* file_;
  uint64_t pos_ = 0;
};

Status GgufParser::read_string(std::string_view* out, uint64_t max_len, const std::string& what) {
  uint64_t len = 0;
  KVLM_RETURN_IF_ERROR(read(&len, what + " length"));
  if (len > max_len)
    return Status::error(file_->source_ + ": " + what + " is " + std::to_string(len) +
                         " bytes long, expected at most " + std::to_string(max_len) + at());
  KVLM_RETURN_IF_ERROR(need(len, what + " of " + std::to_string(len) + " bytes"));
  *out = std::string_view(reinterpret_cast<const char*>(bytes_.data() + pos_), len);
  pos_ += len;
  return Status::ok();
}

Status GgufParser::read_value(GgufValue* value, GgufType type, const std::string& what) {
  value->type = type;
  if (type == GgufType::kString) {
    std::string_view s;
    KVLM_RETURN_IF_ERROR(read_string(&s, UINT64_MAX, what + ": string"));
    value->strings.push_back(s);
    return Status::ok();
  }
  if (type == GgufType::kArray) {
    uint32_t element = 0;
    uint64_t count = 0;
    KVLM_RETURN_IF_ERROR(read(&element, what + ": array element type"));
    KVLM_RETURN_IF_ERROR(read(&count, what + ": array length"));
    value->element_type = static_cast<GgufType>(element);
    value->count = count;
    if (value->element_type == GgufType::kArray)
      return Status::error(file_->source_ + ": " + what + ": arrays of arrays are not supported");
    if (value->element_type == GgufType::kString) {
      // Each string takes at least its 8-byte length: the count is bounded before reserving.
      if (count > left() / 8)
        return Status::error(file_->source_ + ": " + what + ": array of " + std::to_string(count) +
                             " strings cannot fit in the " + std::to_string(left()) +
                             " bytes left" + at());
      value->strings.reserve(count);
      for (uint64_t i = 0; i < count; ++i) {
        std::string_view s;
        KVLM_RETURN_IF_ERROR(
            read_string(&s, UINT64_MAX, what + ": string " + std::to_string(i) + " of the array"));
        value->strings.push_back(s);
      }
      return Status::ok();
    }
    const size_t size = scalar_size(value->element_type);
    if (size == 0)
      return Status::error(file_->source_ + ": " + what + ": array element type " +
                           std::to_string(element) + " is not a GGUF value type (expected 0..12)");
    if (count > left() / size)
      return Status::error(file_->source_ + ": " + what + ": array of " + std::to_string(count) +
                           " " + gguf_type_name(value->element_type) + " values (" +
                           std::to_string(size) + " bytes each) cannot fit in the " +
                           std::to_string(left()) + " bytes left" + at());
    value->data = bytes_.data() + pos_;
    if (value->element_type == GgufType::kBool)
      for (uint64_t i = 0; i < count; ++i)
        if (value->data[i] > 1)
          return Status::error(file_->source_ + ": " + what + ": bool element " +
                               std::to_string(i) + " is " + std::to_string(value->data[i]) +
                               ", expected 0 or 1");
    pos_ += count * size;
    return Status::ok();
  }
  const size_t size = scalar_size(type);
  if (size == 0)
    return Status::error(file_->source_ + ": " + what + ": value type " +
                         std::to_string(static_cast<uint32_t>(type)) +
                         " is not a GGUF value type (expected 0..12)");
  KVLM_RETURN_IF_ERROR(need(size, what + ": " + gguf_type_name(type) + " value"));
  value->data = bytes_.data() + pos_;
  if (type == GgufType::kBool && value->data[0] > 1)
    return Status::error(file_->source_ + ": " + what + ": bool value is " +
                         std::to_string(value->data[0]) + ", expected 0 or 1");
  pos_ += size;
  return Status::ok();
}

Status GgufParser::read_kv(std::string_view* key_out) {
  std::string_view key;
  KVLM_RETURN_IF_ERROR(read_string(&key, kMaxKeyBytes, "metadata key"));
  if (key.empty()) return Status::error(file_->source_ + ": empty metadata key" + at());
  const std::string where = "key '" + std::string(key) + "'";
  if (file_->kv_.count(key)) return Status::error(file_->where_key(key) + ": duplicate key");
  uint32_t type = 0;
  KVLM_RETURN_IF_ERROR(read(&type, "value type of key '" + std::string(key) + "'"));
  GgufValue value;
  KVLM_RETURN_IF_ERROR(read_value(&value, static_cast<GgufType>(type), where));
  file_->kv_.emplace(key, std::move(value));
  *key_out = key;
  return Status::ok();
}

Status GgufParser::read_tensor_info(uint64_t index, GgufTensor* t) {
  KVLM_RETURN_IF_ERROR(
      read_string(&t->name, kMaxNameBytes, "name of tensor " + std::to_string(index)));
  const std::string what = "tensor '" + std::string(t->name) + "'";
  const std::string where = file_->where_tensor(t->name);
  if (file_->tensor_index_.count(t->name)) return Status::error(where + ": duplicate tensor name");
  uint32_t n_dims = 0;
  KVLM_RETURN_IF_ERROR(read(&n_dims, what + ": n_dims"));
  if (n_dims > kMaxDims)
    return Status::error(where + ": has " + std::to_string(n_dims) +
                         " dimensions, expected at most 4");
  t->n_dims = static_cast<int>(n_dims);
  uint64_t n = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    uint64_t ne = 0;
    KVLM_RETURN_IF_ERROR(read(&ne, what + ": dimension " + std::to_string(d)));
    if (ne > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(n, ne, &n) ||
        n > static_cast<uint64_t>(INT64_MAX))
      return Status::error(where + ": dimension " + std::to_string(d) + " (" + std::to_string(ne) +
                           ") makes the element count overflow 64 bits");
    t->ne[d] = static_cast<int64_t>(ne);
  }
  t->n_elements = n;
  KVLM_RETURN_IF_ERROR(read(&t->ggml_type, what + ": type"));
  KVLM_RETURN_IF_ERROR(read(&t->offset, what + ": offset"));
  const auto dtype = dtype_of_ggml(t->ggml_type);
  if (!dtype)
    return Status::error(
        where + ": type " + ggml_type_label(t->ggml_type) +
        " is not supported (supported: F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_K, Q6_K)");
  t->dtype = *dtype;
  const uint64_t block = dtype_block_elements(t->dtype);
  if (t->ne[0] % block != 0)
    return Status::error(where + ": " + dtype_name(t->dtype) + " rows hold blocks of " +
                         std::to_string(block) + " values, but ne[0] is " +
                         std::to_string(t->ne[0]));
  if (__builtin_mul_overflow(n / block, dtype_block_bytes(t->dtype), &t->n_bytes))
    return Status::error(where + ": size in bytes overflows 64 bits");
  return Status::ok();
}

Status GgufParser::check_alignment() {
  const GgufValue* v = file_->find("general.alignment");
  if (!v) return Status::ok();  // the spec's default, 32
  const std::string where = file_->where_key("general.alignment");
  if (v->type != GgufType::kU32)
    return Status::error(where + ": expected type u32, found " + gguf_type_name(v->type));
  const uint32_t a = read_le<uint32_t>(v->data);
  if (a == 0 || (a & (a - 1)) != 0)
    return Status::error(where + ": expected a power of two, found " + std::to_string(a));
  file_->alignment_ = a;
  return Status::ok();
}

Status GgufParser::place_tensors(uint64_t data_start) {
  const uint64_t a = file_->alignment_;
  // A file cut inside the padding before the data section: even empty tensors would point past
  // its end (found by the gguf fuzz target).
  if (data_start > bytes_.size() && !file_->tensors_.empty())
    return Status::error(file_->source_ + ": the tensor data would start at byte " +
                         std::to_string(data_start) +
                         " (after the alignment padding), beyond the " +
                         std::to_string(bytes_.size()) + " bytes of the file");
  const uint64_t data_size = data_start <= bytes_.size() ? bytes_.size() - data_start : 0;
  for (GgufTensor& t : file_->tensors_) {
    const std::string where = file_->where_tensor(t.name);
    if (t.offset % a != 0)
      return Status::error(where + ": offset " + std::to_string(t.offset) +
                           " is not a multiple of the alignment " + std::to_string(a));
    if (t.offset > data_size || t.n_bytes > data_size - t.offset)
      return Status::error(where + ": data [" + std::to_string(t.offset) + ", " +
                           std::to_string(t.offset) + " + " + std::to_string(t.n_bytes) +
                           ") lies outside the " + std::to_string(data_size) +
                           " bytes of tensor data");
    t.data = bytes_.data() + data_start + t.offset;
  }
  return Status::ok();
}

Status GgufParser::parse() {
  const std::string& src = file_->source_;
  uint32_t magic = 0;
  KVLM_RETURN_IF_ERROR(read(&magic, "magic"));
  if (std::memcmp(bytes_.data(), "GGUF", 4) != 0)
    return Status::error(src + ": not a GGUF file (expected the magic \"GGUF\" at byte 0)");
  KVLM_RETURN_IF_ERROR(read(&file_->version_, "version"));
  if (file_->version_ != 2 && file_->version_ != 3)
    return Status::error(src + ": GGUF version " + std::to_string(file_->version_) +
                         " is not supported (supported: 2, 3)");
  uint64_t n_tensors = 0, n_kv = 0;
  KVLM_RETURN_IF_ERROR(read(&n_tensors, "tensor count"));
  KVLM_RETURN_IF_ERROR(read(&n_kv, "metadata key-value count"));
  if (n_kv > left() / kMinKvBytes)
    return Status::error(src + ": header claims " + std::to_string(n_kv) +
                         " metadata key-value pairs, more than the " + std::to_string(left()) +
                         " bytes left can hold");
  if (n_tensors > left() / kMinTensorInfoBytes)
    return Status::error(src + ": header claims " + std::to_string(n_tensors) +
                         " tensors, more than the " + std::to_string(left()) +
                         " bytes left can hold");
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string_view key;
    KVLM_RETURN_IF_ERROR(read_kv(&key));
  }
  KVLM_RETURN_IF_ERROR(check_alignment());
  file_->tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensor t;
    KVLM_RETURN_IF_ERROR(read_tensor_info(i, &t));
    file_->tensor_index_.emplace(t.name, file_->tensors_.size());
    file_->tensors_.push_back(t);
  }
  const uint64_t a = file_->alignment_;
  const uint64_t data_start = pos_ + (a - pos_ % a) % a;
  return place_tensors(data_start);
}

Result<GgufFile> GgufFile::parse(std::span<const uint8_t> bytes, std::string source) {
  GgufFile file;
  file.source_ = std::move(source);
  GgufParser parser(bytes, &file);
  KVLM_RETURN_IF_ERROR(parser.parse());
  return file;
}

Result<GgufFile> GgufFile::open(const std::string& path) {
  KVLM_ASSIGN_OR_RETURN(MappedFile mapping, MappedFile::open(path));
  KVLM_ASSIGN_OR_RETURN(GgufFile file, parse({mapping.data(), mapping.size()}, path));
  file.mapping_ = std::move(mapping);  // views stay valid: the mapping does not move
  return file;
}

const GgufTensor* GgufFile::tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

std::string GgufFile::where_key(std::string_view key) const {
  return source_ + ": key '" + std::string(key) + "'";
}

std::string GgufFile::where_tensor(std::string_view name) const {
  return source_ + ": tensor '" + std::string(name) + "'";
}

namespace {

Result<const GgufValue*> require(const GgufFile& f, std::string_view key) {
  const GgufValue* v = f.find(key);
  if (!v) return Status::error(f.source() + ": missing key '" + std::string(key) + "'");
  return v;
}

Status wrong_type(const GgufFile& f, std::string_view key, const char* expected, GgufType found) {
  return Status::error(f.where_key(key) + ": expected " + expected + ", found type " +
                       gguf_type_name(found));
}

// A scalar integer of any width as int64 (u64 above INT64_MAX: nullopt).
std::optional<int64_t> integer_at(GgufType type, const uint8_t* p) {
  switch (type) {
    case GgufType::kU8:
      return read_le<uint8_t>(p);
    case GgufType::kI8:
      return read_le<int8_t>(p);
    case GgufType::kU16:
      return read_le<uint16_t>(p);
    case GgufType::kI16:
      return read_le<int16_t>(p);
    case GgufType::kU32:
      return read_le<uint32_t>(p);
    case GgufType::kI32:
      return read_le<int32_t>(p);
    case GgufType::kU64: {
      const uint64_t v = read_le<uint64_t>(p);
      if (v > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
      return static_cast<int64_t>(v);
    }
    case GgufType::kI64:
      return read_le<int64_t>(p);
    default:
      return std::nullopt;
  }
}

bool is_integer(GgufType t) {
  return scalar_size(t) != 0 && t != GgufType::kF32 && t != GgufType::kF64 && t != GgufType::kBool;
}

}  // namespace

Result<uint64_t> GgufFile::get_uint(std::string_view key) const {
  KVLM_ASSIGN_OR_RETURN(const GgufValue* v, require(*this, key));
  const GgufValue& value = *v;
  if (!is_integer(value.type)) return wrong_type(*this, key, "an integer", value.type);
  const auto i = integer_at(value.type, value.data);
  if (!i || *i < 0)
    return Status::error(where_key(key) + ": expected a non-negative integer below 2^63, found " +
                         (i ? std::to_string(*i) : std::to_string(read_le<uint64_t>(value.data))));
  return static_cast<uint64_t>(*i);
}

Result<double> GgufFile::get_float(std::string_view key) const {
  KVLM_ASSIGN_OR_RETURN(const GgufValue* v, require(*this, key));
  const GgufValue& value = *v;
  if (value.type == GgufType::kF32) return static_cast<double>(read_le<float>(value.data));
  if (value.type == GgufType::kF64) return read_le<double>(value.data);
  return wrong_type(*this, key, "f32 or f64", value.type);
}

Result<bool> GgufFile::get_bool(std::string_view key) const {
  KVLM_ASSIGN_OR_RETURN(const GgufValue* v, require(*this, key));
  if (v->type != GgufType::kBool) return wrong_type(*this, key, "bool", v->type);
  return v->data[0] != 0;
}

Result<std::string_view> GgufFile::get_string(std::string_view key) const {
  KVLM_ASSIGN_OR_RETURN(const GgufValue* v, require(*this, key));
  if (v->type != GgufType::kString) return wrong_type(*this, key, "string", v->type);
  return v->strings[0];
}

Result<const GgufValue*> GgufFile::get_array(std::string_view key, GgufType element) const {
  KVLM_ASSIGN_OR_RETURN(const GgufValue* v, require(*this, key));
  const GgufValue& value = *v;
  if (value.type != GgufType::kArray) return wrong_type(*this, key, "an array", value.type);
  const bool numeric_ok = element == GgufType::kF32
                              ? !value.strings.size() && (value.element_type == GgufType::kF32 ||
                                                          value.element_type == GgufType::kF64)
                          : is_integer(element) ? is_integer(value.element_type)
                                                : value.element_type == element;
  if (!numeric_ok)
    return Status::error(where_key(key) + ": expected an array of " + gguf_type_name(element) +
                         ", found an array of " + gguf_type_name(value.element_type));
  return &value;
}

double gguf_array_float(const GgufValue& a, uint64_t i) {
  if (a.element_type == GgufType::kF64) return read_le<double>(a.data + 8 * i);
  if (a.element_type == GgufType::kF32) return read_le<float>(a.data + 4 * i);
  return static_cast<double>(gguf_array_int(a, i));
}

int64_t gguf_array_int(const GgufValue& a, uint64_t i) {
  const size_t size = scalar_size(a.element_type);
  return integer_at(a.element_type, a.data + size * i).value_or(-1);
}

}  // namespace kvlm
