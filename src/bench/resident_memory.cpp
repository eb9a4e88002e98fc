#include "bench/resident_memory.h"

#include <fstream>
#include <sstream>
#include <string>

namespace kvlm {

Result<ResidentMemory> read_resident_memory() {
  const char* path = "/proc/self/status";
  std::ifstream in(path);
  if (!in)
    return Status::error(std::string("cannot read ") + path + " (resident memory needs Linux)");
  ResidentMemory m;
  bool have_rss = false, have_hwm = false;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    size_t kib = 0;
    if (!(fields >> key >> kib)) continue;
    if (key == "VmRSS:") {
      m.current_bytes = kib * 1024;
      have_rss = true;
    } else if (key == "VmHWM:") {
      m.peak_bytes = kib * 1024;
      have_hwm = true;
    }
  }
  if (!have_rss || !have_hwm)
    return Status::error(std::string(path) + ": expected VmRSS and VmHWM lines, found " +
                         (have_rss ? "no VmHWM" : "no VmRSS"));
  return m;
}

Status reset_peak_resident_memory() {
  const char* path = "/proc/self/clear_refs";
  std::ofstream out(path);
  if (!out || !(out << "5") || !out.flush())
    return Status::error(std::string("cannot write 5 to ") + path +
                         " to reset the peak resident size");
  return Status::ok();
}

}  // namespace kvlm
