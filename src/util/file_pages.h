// Giving back the pages of a mapped file that will not be read again: a checkpoint's matrices
// once their column strips are packed. Only where the bytes lie in a read-only private mapping
// of a file, whose pages can never differ from the file's: they leave this process's resident
// set and come back from the page cache (or the disk) if read again. Anywhere else (anonymous
// memory, whose pages MADV_DONTNEED would zero) nothing is touched.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvlm {

class FileMappings {
 public:
  // This process's read-only private file mappings, as /proc/self/maps lists them now (none
  // where it cannot be read).
  static FileMappings current();

  // Drops the whole pages of [p, p + n) that lie in one of these mappings (madvise
  // MADV_DONTNEED). Returns the bytes dropped.
  size_t drop_pages(const void* p, size_t n) const;

  size_t size() const { return ranges_.size(); }

 private:
  struct Range {
    uintptr_t begin, end;
  };
  std::vector<Range> ranges_;
};

}  // namespace kvlm
