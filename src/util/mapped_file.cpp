#include "util/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "util/huge_pages.h"

namespace kvlm {
namespace {

// Files this large (weights) are mapped for huge pages; smaller ones (tokenizers, configs,
// test models) gain nothing and keep ordinary mappings.
constexpr size_t kMinHugeFile = 4 * kHugePageBytes;

// Maps the file read-only; with `huge`, on a huge-page boundary (file offset 0 there, so each
// 2 MiB of the file can sit behind one page-table entry) and advised for huge pages.
void* map_read_only(int fd, size_t size, bool huge) {
  void* at = huge ? reserve_huge_aligned(size) : nullptr;
  void* p = mmap(at, size, PROT_READ, MAP_PRIVATE | (at != nullptr ? MAP_FIXED : 0), fd, 0);
  if (p == MAP_FAILED && at != nullptr) munmap(at, size);
  if (p != MAP_FAILED && at != nullptr) advise_huge_pages(p, size);
  return p;
}

// Faults in one aligned huge page from the middle of the mapping and reports whether the
// kernel mapped it huge: a sample of how the page cache holds the file.
bool huge_pages_behind(const void* p, size_t size) {
  const size_t offset = size / 2 / kHugePageBytes * kHugePageBytes;
  volatile uint8_t sink = static_cast<const volatile uint8_t*>(p)[offset];
  (void)sink;
  return huge_mapped_bytes(p) > 0;
}

}  // namespace

MappedFile::~MappedFile() {
  release();
}

MappedFile::MappedFile(MappedFile&& other) noexcept {
  *this = std::move(other);
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    data_ = other.data_;
    size_ = other.size_;
    path_ = std::move(other.path_);
    owned_ = std::move(other.owned_);
    owned_huge_ = std::move(other.owned_huge_);
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

MappedFile MappedFile::from_bytes(std::vector<uint8_t> bytes, std::string name) {
  MappedFile file;
  if (bytes.size() >= kMinHugeFile && huge_pages_wanted()) {
    file.owned_huge_ = HugePageBuffer(bytes.size());
    std::memcpy(file.owned_huge_.data(), bytes.data(), bytes.size());
    file.data_ = reinterpret_cast<const uint8_t*>(file.owned_huge_.data());
    file.size_ = bytes.size();
  } else {
    file.owned_ = std::move(bytes);
    file.data_ = file.owned_.data();
    file.size_ = file.owned_.size();
  }
  file.path_ = std::move(name);
  return file;
}

void MappedFile::release() {
  const bool mapped = owned_.empty() && owned_huge_.data() == nullptr;
  if (data_ != nullptr && size_ > 0 && mapped) munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
  owned_.clear();
  owned_huge_ = HugePageBuffer();
}

Result<MappedFile> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return Status::error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::error(path + ": not a regular file");
  }
  MappedFile file;
  file.path_ = path;
  file.size_ = static_cast<size_t>(st.st_size);
  if (file.size_ > 0) {
    const bool huge = huge_pages_wanted() && file.size_ >= kMinHugeFile;
    void* p = map_read_only(fd, file.size_, huge);
    if (p != MAP_FAILED && huge && !huge_pages_behind(p, file.size_) &&
        page_cache_builds_huge_pages()) {
      // The page cache holds this file in small pages (it was written, or read without huge
      // pages, before), and a mapping can only use the pages that are there. Drop them (clean
      // pages no other process maps; nothing is lost, they come back from the disk) so that
      // this mapping's faults read the file again into huge ones. Only where the page cache
      // is seen building huge folios: elsewhere every load would read the file from the disk
      // for nothing.
      munmap(p, file.size_);
      fdatasync(fd);
      posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
      p = map_read_only(fd, file.size_, huge);
    }
    if (p == MAP_FAILED) {
      ::close(fd);
      file.size_ = 0;
      return Status::error(path + ": cannot map: " + std::strerror(errno));
    }
    file.data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return file;
}

Result<std::string> read_text_file(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return Status::error(path + ": no such file");
  if (!S_ISREG(st.st_mode)) return Status::error(path + ": not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error(path + ": cannot open for reading");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace kvlm
