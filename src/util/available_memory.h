// How much memory the machine can still give this process: Linux's MemAvailable (free memory
// plus the page cache and other memory the kernel can reclaim), for choices such as whether a
// second copy of the weights fits.
#pragma once

#include <cstddef>

namespace kvlm {

// Bytes available; where /proc/meminfo is missing, the free physical pages sysconf reports, and
// where neither is known, the largest size_t (no limit known).
size_t available_memory_bytes();

}  // namespace kvlm
