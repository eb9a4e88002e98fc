// Checkpoint: the tensors of a Hugging Face model folder, from model.safetensors or from the
// shards named by model.safetensors.index.json, looked up by name. Also turns entries into
// typed views (matrices used in place from the mapping) after checking dtype and shape.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kvlm/status.h"
#include "model/safetensors.h"
#include "ops/weight_matrix.h"
#include "util/huge_pages.h"

namespace kvlm {

// Storage the loader had to create: fp32 copies of small vectors, converted or realigned
// matrices. Matrices used as stored are not here. Handed out 64-byte aligned from chunks in
// huge pages (util/huge_pages.h: decode streams these weights as it does mapped ones).
struct OwnedTensors {
  std::vector<HugePageBuffer> chunks;
  size_t chunk_used = 0;  // bytes handed out from chunks.back()
  size_t n_bytes = 0;     // bytes asked for in all
  void* allocate(size_t n_bytes);
};

class Checkpoint {
 public:
  // Opens DIR/model.safetensors, or DIR/model.safetensors.index.json and its shards.
  static Result<Checkpoint> open_folder(const std::string& dir);
  // Opens one safetensors file.
  static Result<Checkpoint> open_file(const std::string& path);
  // Wraps an already parsed file (e.g. a model made in memory).
  static Checkpoint from_file(SafetensorsFile file);

  // The entry named `name`, trying each prefix in order ("" means the name as given).
  const SafetensorsEntry* find(const std::string& name,
                               const std::vector<std::string>& prefixes = {""}) const;
  const std::string& description() const { return description_; }

  // A 2-D weight of shape [rows, cols] as a matrix view. Used in place when stored as F32, F16
  // or BF16 and aligned; converted into `owned` when `convert_to` differs or it is misaligned
  // (quantized on `n_threads`, 0: omp_get_max_threads()).
  Result<WeightMatrix> matrix(const std::string& name, const std::vector<std::string>& prefixes,
                              int rows, int cols, WeightLayout layout,
                              std::optional<DType> convert_to, OwnedTensors* owned,
                              int n_threads = 0) const;
  // A tensor of `n` elements (any shape with that many elements if `shape` is empty,
  // otherwise exactly `shape`) widened to an owned fp32 array.
  Result<const float*> vector_f32(const std::string& name, const std::vector<std::string>& prefixes,
                                  const std::vector<int64_t>& shape, OwnedTensors* owned) const;

 private:
  Result<const SafetensorsEntry*> require(const std::string& name,
                                          const std::vector<std::string>& prefixes,
                                          const std::vector<int64_t>& shape) const;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::string description_;  // file or folder, for messages
};

std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace kvlm
