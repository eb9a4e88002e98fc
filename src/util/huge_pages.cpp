#include "util/huge_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <new>
#include <sstream>
#include <utility>

namespace kvlm {
namespace {

bool kernel_allows_huge_pages() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  if (!std::getline(in, modes)) return false;  // no THP in this kernel
  return modes.find("[never]") == std::string::npos;
}

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// The KiB of a /proc line "Field:   N kB" when it is one of `fields`, else 0.
size_t field_kib(const std::string& line, std::initializer_list<const char*> fields) {
  for (const char* field : fields)
    if (line.rfind(field, 0) == 0) return std::strtoull(line.c_str() + std::strlen(field), nullptr, 10);
  return 0;
}

constexpr std::initializer_list<const char*> kHugeFields = {"AnonHugePages:", "FilePmdMapped:"};

// The sum of the named fields of a /proc file, in bytes (0 where it is absent).
size_t proc_fields_bytes(const char* path, std::initializer_list<const char*> fields) {
  std::ifstream in(path);
  std::string line;
  size_t kib = 0;
  while (std::getline(in, line)) kib += field_kib(line, fields);
  return kib * 1024;
}

}  // namespace

bool huge_pages_wanted() {
  static const bool wanted = [] {
    const char* setting = std::getenv("KVLM_HUGE_PAGES");
    if (setting != nullptr && std::strcmp(setting, "0") == 0) return false;
    return kernel_allows_huge_pages();
  }();
  return wanted;
}

void* reserve_huge_aligned(size_t n_bytes) {
  // Over-reserve by one huge page, then give back the slack on both sides (munmap takes whole
  // pages, so the used part ends at its last page's end).
  const size_t used = round_up(n_bytes, static_cast<size_t>(sysconf(_SC_PAGESIZE)));
  const size_t reserved = used + kHugePageBytes;
  void* p = mmap(nullptr, reserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<uintptr_t>(p);
  const uintptr_t aligned = round_up(start, kHugePageBytes);
  if (aligned > start) munmap(p, aligned - start);
  const uintptr_t end = start + reserved, used_end = aligned + used;
  if (end > used_end) munmap(reinterpret_cast<void*>(used_end), end - used_end);
  return reinterpret_cast<void*>(aligned);
}

void advise_huge_pages(void* p, size_t n_bytes) {
  if (huge_pages_wanted() && n_bytes >= kHugePageBytes) madvise(p, n_bytes, MADV_HUGEPAGE);
}

size_t huge_mapped_bytes(const std::string& smaps, const void* p) {
  // Each mapping starts with a line "start-end perms ..." (hex, no 0x), followed by its fields.
  char header[32];
  std::snprintf(header, sizeof header, "%lx-", static_cast<unsigned long>(reinterpret_cast<uintptr_t>(p)));
  std::istringstream in(smaps);
  std::string line;
  bool inside = false;
  size_t kib = 0;
  while (std::getline(in, line)) {
    const bool is_header = !line.empty() && line.find(':') > line.find(' ');
    if (is_header) {
      if (inside) break;
      inside = line.rfind(header, 0) == 0;
      continue;
    }
    if (inside) kib += field_kib(line, kHugeFields);
  }
  return kib * 1024;
}

size_t process_huge_page_bytes() {
  return proc_fields_bytes("/proc/self/smaps_rollup", kHugeFields);
}

bool page_cache_builds_huge_pages() {
  return proc_fields_bytes("/proc/meminfo", {"FileHugePages:"}) > 0;
}

size_t huge_mapped_bytes(const void* p) {
  std::ifstream in("/proc/self/smaps");
  std::ostringstream text;
  text << in.rdbuf();
  return huge_mapped_bytes(text.str(), p);
}

HugePageBuffer::HugePageBuffer(size_t n_bytes) {
  if (n_bytes == 0) return;
  // Small buffers take ordinary pages: aligning them to 2 MiB would only waste address space.
  // The reservation is PROT_NONE and costs no commit charge; making it writable is where the
  // kernel's overcommit check refuses a buffer larger than the machine can back.
  void* p = n_bytes >= kHugePageBytes
                ? reserve_huge_aligned(n_bytes)
                : mmap(nullptr, n_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == nullptr || p == MAP_FAILED) throw std::bad_alloc();
  if (mprotect(p, n_bytes, PROT_READ | PROT_WRITE) != 0) {
    munmap(p, n_bytes);
    throw std::bad_alloc();
  }
  advise_huge_pages(p, n_bytes);
  data_ = static_cast<std::byte*>(p);
  size_ = n_bytes;
}

HugePageBuffer::~HugePageBuffer() {
  if (data_ != nullptr) munmap(data_, size_);
}

HugePageBuffer::HugePageBuffer(HugePageBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

HugePageBuffer& HugePageBuffer::operator=(HugePageBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) munmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

}  // namespace kvlm
