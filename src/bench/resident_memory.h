// Resident memory of this process (Linux /proc/self), to check that decoding holds the weights,
// the KV cache and a small fixed overhead, and no second copy of anything large.
#pragma once

#include <cstddef>

#include "kvlm/status.h"

namespace kvlm {

struct ResidentMemory {
  size_t current_bytes = 0;  // VmRSS
  size_t peak_bytes = 0;     // VmHWM: the most resident since start or the last reset
};

// Fails with a message naming the file when /proc/self/status is missing or lacks the fields.
Result<ResidentMemory> read_resident_memory();

// Starts a new peak from the current resident size (writes 5 to /proc/self/clear_refs), so a
// measurement is not charged for memory freed before it began.
Status reset_peak_resident_memory();

}  // namespace kvlm
