#include "util/file_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

namespace kvlm {

FileMappings FileMappings::current() {
  FileMappings mappings;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    // start-end perms offset dev inode [path]
    std::istringstream fields(line);
    std::string span, perms, offset, dev;
    unsigned long long inode = 0;
    if (!(fields >> span >> perms >> offset >> dev >> inode) || inode == 0 || perms != "r--p")
      continue;
    const size_t dash = span.find('-');
    if (dash == std::string::npos) continue;
    Range r{static_cast<uintptr_t>(std::stoull(span.substr(0, dash), nullptr, 16)),
            static_cast<uintptr_t>(std::stoull(span.substr(dash + 1), nullptr, 16))};
    if (r.begin < r.end) mappings.ranges_.push_back(r);
  }
  return mappings;
}

size_t FileMappings::drop_pages(const void* p, size_t n) const {
  const long page_size = sysconf(_SC_PAGESIZE);
  if (p == nullptr || n == 0 || page_size <= 0) return 0;
  const uintptr_t page = static_cast<uintptr_t>(page_size);
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p), end = begin + n;
  size_t dropped = 0;
  for (const Range& r : ranges_) {
    // Whole pages only: a page the range shares with other bytes may hold what is still read.
    const uintptr_t lo = (std::max(begin, r.begin) + page - 1) / page * page;
    const uintptr_t hi = std::min(end, r.end) / page * page;
    if (lo < hi && madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED) == 0)
      dropped += hi - lo;
  }
  return dropped;
}

}  // namespace kvlm
