#include "util/available_memory.h"

#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <limits>
#include <string>

namespace kvlm {

size_t available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  while (meminfo >> key >> kib) {
    if (key == "MemAvailable:") return static_cast<size_t>(kib) * 1024;
    meminfo.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0) return static_cast<size_t>(pages) * page_size;
  return std::numeric_limits<size_t>::max();
}

}  // namespace kvlm
