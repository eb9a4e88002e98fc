// Memory in transparent huge pages (2 MiB on x86-64 and most Arm kernels). A decode step
// streams every weight once: with 4 KiB pages each page costs a TLB miss and stops the
// hardware prefetcher at its edge. Measured on GPT-2 124M Q8_0 decode (Sapphire Rapids, 2
// threads, interleaved runs): 140-149 tok/s in 4 KiB pages, 165-179 in 2 MiB pages, the
// same weights and kernels. So weights (mapped or converted at load), the KV caches and the
// bandwidth probe of `kvlm bench` all live in huge pages where the kernel gives them.
// KVLM_HUGE_PAGES=0 turns it off (for measuring what it buys).
#pragma once

#include <cstddef>
#include <string>

namespace kvlm {

constexpr size_t kHugePageBytes = size_t{2} << 20;

// False when KVLM_HUGE_PAGES=0 or the kernel's transparent huge pages are "never".
bool huge_pages_wanted();

// Address space for `n_bytes` starting on a huge-page boundary, reserved (PROT_NONE, no
// memory behind it) so a mapping can be placed there with MAP_FIXED. nullptr on failure.
// Release with munmap(p, n_bytes).
void* reserve_huge_aligned(size_t n_bytes);

// Asks for huge pages on [p, p + n_bytes) when huge_pages_wanted(); nothing otherwise.
void advise_huge_pages(void* p, size_t n_bytes);

// How much of the mapping that starts at `p` the kernel maps with huge (PMD) entries, read
// from `smaps` (the text of /proc/self/smaps): the mapping's AnonHugePages + FilePmdMapped.
// 0 when no mapping starts at `p` or the fields are absent.
size_t huge_mapped_bytes(const std::string& smaps, const void* p);
size_t huge_mapped_bytes(const void* p);  // reads /proc/self/smaps

// The whole process's memory behind huge pages (AnonHugePages + FilePmdMapped of
// /proc/self/smaps_rollup): what `kvlm bench` reports, so a user sees whether the kernel gave
// them. 0 where the file is absent.
size_t process_huge_page_bytes();

// Whether this kernel's page cache holds some file in huge folios now (FileHugePages in
// /proc/meminfo): filesystems with large folios (ext4 and xfs on recent kernels) build them
// when a huge-page-advised mapping faults a cold file in. Where it is false (Debian 12's 6.1
// kernel: ext4 without large folios), dropping a file's small pages to read it back huge
// would only cost a read from the disk.
bool page_cache_builds_huge_pages();

// Zero-filled anonymous memory on a huge-page boundary, advised for huge pages.
class HugePageBuffer {
 public:
  HugePageBuffer() = default;
  explicit HugePageBuffer(size_t n_bytes);  // throws std::bad_alloc when the map fails
  ~HugePageBuffer();
  HugePageBuffer(HugePageBuffer&& other) noexcept;
  HugePageBuffer& operator=(HugePageBuffer&& other) noexcept;
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer& operator=(const HugePageBuffer&) = delete;

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kvlm
