// MappedFile: a whole file mapped read-only into memory. Checkpoint weights are used in place
// from the mapping, so loading a model costs page-table entries, not a copy of the weights.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kvlm/status.h"
#include "util/huge_pages.h"

namespace kvlm {

class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  static Result<MappedFile> open(const std::string& path);
  // Holds bytes made in memory (a model built on the fly) behind the same interface;
  // `name` stands in for the path in messages. Bytes as large as a mapped file that gets huge
  // pages are moved into a HugePageBuffer, so weights made in memory (the embedded bench
  // model) stream as a mapped checkpoint's do.
  static MappedFile from_bytes(std::vector<uint8_t> bytes, std::string name);

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void release();
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
  // from_bytes only (one of the two); otherwise data_ is an mmap
  std::vector<uint8_t> owned_;
  HugePageBuffer owned_huge_;
};

// Reads a whole (small) text file, e.g. config.json.
Result<std::string> read_text_file(const std::string& path);

}  // namespace kvlm
