#include "model/checkpoint.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "model/quantize_weights.h"
#include "ops/half_rows.h"
#include "util/mapped_file.h"

namespace kvlm {

void* OwnedTensors::allocate(size_t bytes) {
  // Chunks reserve address space, not memory: pages come into being when written, so a
  // chunk's unused tail costs nothing. 64-byte alignment keeps SIMD loads happy on any target.
  constexpr size_t kChunkBytes = size_t{64} << 20, kAlign = 64;
  const size_t start = (chunk_used + kAlign - 1) / kAlign * kAlign;
  if (chunks.empty() || start + bytes > chunks.back().size()) {
    chunks.emplace_back(std::max(bytes, kChunkBytes));
    chunk_used = 0;
    return allocate(bytes);
  }
  chunk_used = start + bytes;
  n_bytes += bytes;
  return chunks.back().data() + start;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

namespace {

bool is_file(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_dir(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

Result<Checkpoint> Checkpoint::open_file(const std::string& path) {
  KVLM_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(path));
  Checkpoint c;
  c.files_.push_back(std::make_unique<SafetensorsFile>(std::move(file)));
  c.description_ = path;
  return c;
}

Checkpoint Checkpoint::from_file(SafetensorsFile file) {
  Checkpoint c;
  c.description_ = file.path();
  c.files_.push_back(std::make_unique<SafetensorsFile>(std::move(file)));
  return c;
}

Result<Checkpoint> Checkpoint::open_folder(const std::string& dir) {
  if (!is_dir(dir)) return Status::error(dir + ": no such model folder");
  const std::string single = dir + "/model.safetensors";
  if (is_file(single)) return open_file(single);
  const std::string index_path = dir + "/model.safetensors.index.json";
  if (!is_file(index_path))
    return Status::error(dir + ": no model.safetensors (nor model.safetensors.index.json) found");
  KVLM_ASSIGN_OR_RETURN(const std::string text, read_text_file(index_path));
  nlohmann::json index;
  try {
    index = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return Status::error(index_path + ": not valid JSON: " + e.what());
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    return Status::error(index_path + ": missing object field 'weight_map'");
  std::set<std::string> shard_names;
  for (const auto& [tensor, shard] : index["weight_map"].items()) {
    if (!shard.is_string())
      return Status::error(index_path + ": weight_map entry '" + tensor +
                           "' must name a file, found " + shard.dump());
    const std::string name = shard.get<std::string>();
    if (name.find('/') != std::string::npos)
      return Status::error(index_path + ": shard name '" + name + "' must be a plain file name");
    shard_names.insert(name);
  }
  Checkpoint c;
  c.description_ = dir;
  for (const std::string& name : shard_names) {
    const std::string path = dir + "/" + name;
    if (!is_file(path))
      return Status::error(index_path + ": names shard '" + name + "', which is missing from " +
                           dir);
    KVLM_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(path));
    c.files_.push_back(std::make_unique<SafetensorsFile>(std::move(file)));
  }
  return c;
}

const SafetensorsEntry* Checkpoint::find(const std::string& name,
                                         const std::vector<std::string>& prefixes) const {
  for (const std::string& prefix : prefixes)
    for (const auto& file : files_)
      if (const SafetensorsEntry* e = file->find(prefix + name)) return e;
  return nullptr;
}

Result<const SafetensorsEntry*> Checkpoint::require(const std::string& name,
                                                    const std::vector<std::string>& prefixes,
                                                    const std::vector<int64_t>& shape) const {
  const SafetensorsEntry* e = find(name, prefixes);
  if (e == nullptr)
    return Status::error(description_ + ": missing tensor '" + name + "'" +
                         (shape.empty() ? "" : " of shape " + shape_string(shape)));
  if (!parse_dtype(e->dtype))
    return Status::error(description_ + ": tensor '" + name + "' has dtype " + e->dtype +
                         ", expected F32, F16 or BF16");
  if (!shape.empty() && e->shape != shape)
    return Status::error(description_ + ": tensor '" + name + "' has shape " +
                         shape_string(e->shape) + ", expected " + shape_string(shape));
  return e;
}

Result<WeightMatrix> Checkpoint::matrix(const std::string& name,
                                        const std::vector<std::string>& prefixes, int rows,
                                        int cols, WeightLayout layout,
                                        std::optional<DType> convert_to, OwnedTensors* owned,
                                        int n_threads) const {
  if (convert_to && dtype_is_quantized(*convert_to)) {  // --weights q8_0|q4_0
    KVLM_ASSIGN_OR_RETURN(const WeightMatrix plain,
                          matrix(name, prefixes, rows, cols, layout, std::nullopt, owned));
    return convert_matrix_on_load(plain, *convert_to, owned,
                                  description_ + ": tensor '" + name + "'", n_threads);
  }
  KVLM_ASSIGN_OR_RETURN(const SafetensorsEntry* e, require(name, prefixes, {rows, cols}));
  WeightMatrix m;
  m.dtype = *parse_dtype(e->dtype);
  m.layout = layout;
  m.n_in = layout == WeightLayout::kInOut ? rows : cols;
  m.n_out = layout == WeightLayout::kInOut ? cols : rows;
  m.data = e->data;
  const DType target = convert_to.value_or(m.dtype);
  const bool aligned = reinterpret_cast<uintptr_t>(e->data) % dtype_size(m.dtype) == 0;
  if (target == m.dtype && aligned) return m;  // used in place from the mapping
  const size_t n = static_cast<size_t>(rows) * cols;
  void* dst = owned->allocate(n * dtype_size(target));
  if (m.dtype == DType::kF32 && aligned && target != DType::kF32) {  // fp32 rounded: SIMD rows
    const auto* src = reinterpret_cast<const float*>(e->data);
    auto* out = static_cast<uint16_t*>(dst);
    target == DType::kF16 ? f32_to_f16_row(out, src, n) : f32_to_bf16_row(out, src, n);
    m.data = dst;
    m.dtype = target;
    return m;
  }
  for (size_t i = 0; i < n; ++i) {
    float value;
    if (m.dtype == DType::kF32) {
      std::memcpy(&value, e->data + 4 * i, 4);
    } else {
      uint16_t half;
      std::memcpy(&half, e->data + 2 * i, 2);
      value = m.dtype == DType::kF16 ? f16_to_f32(half) : bf16_to_f32(half);
    }
    if (target == DType::kF32) static_cast<float*>(dst)[i] = value;
    if (target == DType::kF16) static_cast<uint16_t*>(dst)[i] = f32_to_f16(value);
    if (target == DType::kBF16) static_cast<uint16_t*>(dst)[i] = f32_to_bf16(value);
  }
  m.data = dst;
  m.dtype = target;
  return m;
}

Result<const float*> Checkpoint::vector_f32(const std::string& name,
                                            const std::vector<std::string>& prefixes,
                                            const std::vector<int64_t>& shape,
                                            OwnedTensors* owned) const {
  KVLM_ASSIGN_OR_RETURN(const SafetensorsEntry* e, require(name, prefixes, shape));
  const DType type = *parse_dtype(e->dtype);
  const size_t n = e->n_bytes / dtype_size(type);
  float* dst = static_cast<float*>(owned->allocate(n * sizeof(float)));
  for (size_t i = 0; i < n; ++i) {
    if (type == DType::kF32) {
      std::memcpy(&dst[i], e->data + 4 * i, 4);
    } else {
      uint16_t half;
      std::memcpy(&half, e->data + 2 * i, 2);
      dst[i] = type == DType::kF16 ? f16_to_f32(half) : bf16_to_f32(half);
    }
  }
  return static_cast<const float*>(dst);
}

}  // namespace kvlm
