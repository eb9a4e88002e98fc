#include "model/gguf_writer.h"

#include <cstdio>
#include <cstring>

namespace kvlm {

namespace {

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

void put_string(std::vector<uint8_t>& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

uint64_t padded(uint64_t n, uint64_t alignment) {
  return n + (alignment - n % alignment) % alignment;
}

}  // namespace

void GgufWriter::add_raw(const std::string& key, GgufType type, std::vector<uint8_t> value) {
  std::vector<uint8_t> v;
  put<uint32_t>(v, static_cast<uint32_t>(type));
  v.insert(v.end(), value.begin(), value.end());
  kv_.emplace_back(key, std::move(v));
}

void GgufWriter::add_string(const std::string& key, const std::string& value) {
  std::vector<uint8_t> v;
  put_string(v, value);
  add_raw(key, GgufType::kString, std::move(v));
}

void GgufWriter::add_u32(const std::string& key, uint32_t value) {
  std::vector<uint8_t> v;
  put(v, value);
  add_raw(key, GgufType::kU32, std::move(v));
}

void GgufWriter::add_i32(const std::string& key, int32_t value) {
  std::vector<uint8_t> v;
  put(v, value);
  add_raw(key, GgufType::kI32, std::move(v));
}

void GgufWriter::add_u64(const std::string& key, uint64_t value) {
  std::vector<uint8_t> v;
  put(v, value);
  add_raw(key, GgufType::kU64, std::move(v));
}

void GgufWriter::add_f32(const std::string& key, float value) {
  std::vector<uint8_t> v;
  put(v, value);
  add_raw(key, GgufType::kF32, std::move(v));
}

void GgufWriter::add_bool(const std::string& key, bool value) {
  add_raw(key, GgufType::kBool, {static_cast<uint8_t>(value ? 1 : 0)});
}

void GgufWriter::add_string_array(const std::string& key, const std::vector<std::string>& values) {
  std::vector<uint8_t> v;
  put<uint32_t>(v, static_cast<uint32_t>(GgufType::kString));
  put<uint64_t>(v, values.size());
  for (const std::string& s : values) put_string(v, s);
  add_raw(key, GgufType::kArray, std::move(v));
}

void GgufWriter::add_f32_array(const std::string& key, const std::vector<float>& values) {
  std::vector<uint8_t> v;
  put<uint32_t>(v, static_cast<uint32_t>(GgufType::kF32));
  put<uint64_t>(v, values.size());
  for (float x : values) put(v, x);
  add_raw(key, GgufType::kArray, std::move(v));
}

void GgufWriter::add_i32_array(const std::string& key, const std::vector<int32_t>& values) {
  std::vector<uint8_t> v;
  put<uint32_t>(v, static_cast<uint32_t>(GgufType::kI32));
  put<uint64_t>(v, values.size());
  for (int32_t x : values) put(v, x);
  add_raw(key, GgufType::kArray, std::move(v));
}

void GgufWriter::add_tensor(const std::string& name, std::vector<int64_t> ne, DType type,
                            std::vector<uint8_t> data) {
  tensors_.push_back({name, std::move(ne), type, std::move(data)});
}

std::vector<uint8_t> GgufWriter::header() const {
  std::vector<uint8_t> out = {'G', 'G', 'U', 'F'};
  put<uint32_t>(out, 3);
  put<uint64_t>(out, tensors_.size());
  const bool write_alignment = alignment_ != 32;
  put<uint64_t>(out, kv_.size() + (write_alignment ? 1 : 0));
  if (write_alignment) {
    put_string(out, "general.alignment");
    put<uint32_t>(out, static_cast<uint32_t>(GgufType::kU32));
    put<uint32_t>(out, alignment_);
  }
  for (const auto& [key, value] : kv_) {
    put_string(out, key);
    out.insert(out.end(), value.begin(), value.end());
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    put_string(out, t.name);
    put<uint32_t>(out, static_cast<uint32_t>(t.ne.size()));
    for (int64_t n : t.ne) put<uint64_t>(out, static_cast<uint64_t>(n));
    put<uint32_t>(out, ggml_type_of(t.type));
    put<uint64_t>(out, offset);
    offset = padded(offset + t.data.size(), alignment_);
  }
  out.resize(padded(out.size(), alignment_), 0);
  return out;
}

std::vector<uint8_t> GgufWriter::bytes() const {
  std::vector<uint8_t> out = header();
  const size_t data_start = out.size();
  for (const Tensor& t : tensors_) {
    out.insert(out.end(), t.data.begin(), t.data.end());
    out.resize(data_start + padded(out.size() - data_start, alignment_), 0);
  }
  return out;
}

Status GgufWriter::write(const std::string& path) const {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return Status::error(path + ": cannot open for writing");
  const std::vector<uint8_t> head = header();
  bool ok = std::fwrite(head.data(), 1, head.size(), f) == head.size();
  static const uint8_t kZeros[64] = {};
  for (const Tensor& t : tensors_) {
    if (!ok) break;
    ok = std::fwrite(t.data.data(), 1, t.data.size(), f) == t.data.size();
    const size_t pad = padded(t.data.size(), alignment_) - t.data.size();
    for (size_t done = 0; ok && done < pad; done += sizeof(kZeros))
      ok = std::fwrite(kZeros, 1, std::min(sizeof(kZeros), pad - done), f) ==
           std::min(sizeof(kZeros), pad - done);
  }
  ok = std::fclose(f) == 0 && ok;
  if (!ok) return Status::error(path + ": write failed (disk full?)");
  return Status::ok();
}

}  // namespace kvlm
