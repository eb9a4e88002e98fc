#include "model/safetensors.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace kvlm {

size_t safetensors_dtype_size(const std::string& dtype) {
  static const std::map<std::string, size_t> kSizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2},    {"I64", 8},
      {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},      {"BOOL", 1},
      {"U16", 2}, {"U32", 4}, {"U64", 8}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  auto it = kSizes.find(dtype);
  return it == kSizes.end() ? 0 : it->second;
}

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

namespace {

Status parse_entry(const std::string& path, const std::string& name, const nlohmann::json& spec,
                   uint64_t data_size, uint64_t* begin, uint64_t* end, SafetensorsEntry* entry) {
  const std::string where = path + ": tensor '" + name + "'";
  if (!spec.is_object()) return Status::error(where + ": expected an object in the header");
  if (!spec.contains("dtype") || !spec["dtype"].is_string())
    return Status::error(where + ": missing string field 'dtype'");
  if (!spec.contains("shape") || !spec["shape"].is_array())
    return Status::error(where + ": missing array field 'shape'");
  if (!spec.contains("data_offsets") || !spec["data_offsets"].is_array() ||
      spec["data_offsets"].size() != 2)
    return Status::error(where + ": 'data_offsets' must be an array of two integers");
  entry->dtype = spec["dtype"].get<std::string>();
  const size_t element_size = safetensors_dtype_size(entry->dtype);
  if (element_size == 0) return Status::error(where + ": unknown dtype '" + entry->dtype + "'");
  uint64_t n_elements = 1;
  for (const auto& dim : spec["shape"]) {
    if (!dim.is_number_integer() || dim.get<int64_t>() < 0)
      return Status::error(where + ": shape entries must be non-negative integers, found " +
                           dim.dump());
    const uint64_t d = dim.get<uint64_t>();
    if (d != 0 && n_elements > (uint64_t{1} << 62) / d)
      return Status::error(where + ": shape " + spec["shape"].dump() + " is too large");
    n_elements *= d;
    entry->shape.push_back(static_cast<int64_t>(d));
  }
  for (const auto& offset : spec["data_offsets"]) {
    if (!offset.is_number_integer() || offset.get<int64_t>() < 0)
      return Status::error(where + ": data_offsets must be non-negative integers, found " +
                           spec["data_offsets"].dump());
  }
  *begin = spec["data_offsets"][0].get<uint64_t>();
  *end = spec["data_offsets"][1].get<uint64_t>();
  if (*begin > *end)
    return Status::error(where + ": data_offsets [" + std::to_string(*begin) + ", " +
                         std::to_string(*end) + "] end before they begin");
  if (*end > data_size)
    return Status::error(where + ": data_offsets end at byte " + std::to_string(*end) +
                         " but the data section holds only " + std::to_string(data_size) +
                         " bytes");
  const uint64_t expected = n_elements * element_size;
  if (*end - *begin != expected)
    return Status::error(where + ": dtype " + entry->dtype + " and shape " + spec["shape"].dump() +
                         " need " + std::to_string(expected) + " bytes, but data_offsets span " +
                         std::to_string(*end - *begin));
  entry->n_bytes = expected;
  return Status::ok();
}

}  // namespace

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  KVLM_ASSIGN_OR_RETURN(MappedFile mapped, MappedFile::open(path));
  return parse(std::move(mapped));
}

Result<SafetensorsFile> SafetensorsFile::from_bytes(std::vector<uint8_t> bytes,
                                                    const std::string& name) {
  return parse(MappedFile::from_bytes(std::move(bytes), name));
}

Result<SafetensorsFile> SafetensorsFile::parse(MappedFile file) {
  SafetensorsFile st;
  st.file_ = std::move(file);
  const std::string path = st.file_.path();
  const uint8_t* bytes = st.file_.data();
  const uint64_t file_size = st.file_.size();
  if (file_size < 8)
    return Status::error(path + ": file is " + std::to_string(file_size) +
                         " bytes, too short for the 8-byte safetensors header length");
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | bytes[i];
  if (header_size > file_size - 8)
    return Status::error(path + ": header length " + std::to_string(header_size) +
                         " exceeds the file (" + std::to_string(file_size - 8) +
                         " bytes after the length field)");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes + 8, bytes + 8 + header_size);
  } catch (const nlohmann::json::exception& e) {
    return Status::error(path + ": header is not valid JSON: " + e.what());
  }
  if (!header.is_object()) return Status::error(path + ": header must be a JSON object");
  const uint8_t* data = bytes + 8 + header_size;
  const uint64_t data_size = file_size - 8 - header_size;

  struct Range {
    uint64_t begin, end;
    std::string name;
  };
  std::vector<Range> ranges;
  for (const auto& [name, spec] : header.items()) {
    if (name == "__metadata__") continue;
    SafetensorsEntry entry;
    uint64_t begin = 0, end = 0;
    KVLM_RETURN_IF_ERROR(parse_entry(path, name, spec, data_size, &begin, &end, &entry));
    entry.data = data + begin;
    ranges.push_back({begin, end, name});
    st.tensors_.emplace(name, std::move(entry));
  }
  // Tensors must tile the data section: no two share bytes and no bytes are left unindexed
  // (the format's rule; a gap or an overlap means the header and the data disagree).
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  for (const Range& r : ranges) {
    if (r.begin < covered)
      return Status::error(path + ": tensor '" + r.name + "' bytes [" + std::to_string(r.begin) +
                           ", " + std::to_string(r.end) + ") overlap the previous tensor");
    if (r.begin > covered)
      return Status::error(path + ": bytes [" + std::to_string(covered) + ", " +
                           std::to_string(r.begin) + ") of the data section belong to no tensor");
    covered = r.end;
  }
  if (covered != data_size)
    return Status::error(path + ": the data section has " + std::to_string(data_size) +
                         " bytes but tensors cover only " + std::to_string(covered));
  return st;
}

}  // namespace kvlm
