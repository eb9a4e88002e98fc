// Huge pages for weights, caches and the bandwidth probe (util/huge_pages.h), the mapped-file
// path that asks for them, and the loader's owned-tensor arena built on them.
#include "util/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "model/checkpoint.h"
#include "support/test_support.h"
#include "util/mapped_file.h"

namespace kvlm {
namespace {

bool huge_aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % kHugePageBytes == 0;
}

TEST(HugePageBufferTest, LargeBufferIsZeroFilledOnAHugePageBoundary) {
  const size_t n = 5 * kHugePageBytes + 123;
  HugePageBuffer buffer(n);
  ASSERT_NE(buffer.data(), nullptr);
  EXPECT_EQ(buffer.size(), n);
  EXPECT_TRUE(huge_aligned(buffer.data()));
  size_t nonzero = 0;
  for (size_t i = 0; i < n; ++i) nonzero += buffer.data()[i] != std::byte{0};
  EXPECT_EQ(nonzero, 0u);
  buffer.data()[n - 1] = std::byte{7};  // the last byte is writable
  EXPECT_EQ(buffer.data()[n - 1], std::byte{7});
}

TEST(HugePageBufferTest, SmallAndEmptyBuffers) {
  HugePageBuffer small(100);
  ASSERT_NE(small.data(), nullptr);
  for (size_t i = 0; i < 100; ++i) ASSERT_EQ(small.data()[i], std::byte{0});
  small.data()[99] = std::byte{1};
  HugePageBuffer empty(0);
  EXPECT_EQ(empty.data(), nullptr);
  EXPECT_EQ(empty.size(), 0u);
}

TEST(HugePageBufferTest, MovingHandsOverTheMemory) {
  HugePageBuffer a(3 * kHugePageBytes);
  a.data()[5] = std::byte{42};
  std::byte* memory = a.data();
  HugePageBuffer b(std::move(a));
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(b.data(), memory);
  HugePageBuffer c(10);
  c = std::move(b);
  EXPECT_EQ(c.data(), memory);
  EXPECT_EQ(c.data()[5], std::byte{42});
}

// Bytes of address space mapped with no access (reservations), from /proc/self/maps.
size_t reserved_bytes() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  size_t n = 0;
  while (std::getline(maps, line)) {
    unsigned long begin = 0, end = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %4s", &begin, &end, perms) == 3 &&
        std::string(perms) == "---p")
      n += end - begin;
  }
  return n;
}

TEST(HugePageBufferTest, FreeingGivesBackEveryPageOfTheReservation) {
  // Sizes off page boundaries: the slack around the aligned part must go back whole, or each
  // buffer would leave up to a huge page of reserved address space behind.
  const size_t before = reserved_bytes();
  for (int i = 0; i < 200; ++i) {
    HugePageBuffer buffer(kHugePageBytes + 1 + static_cast<size_t>(i) * 4099);
    buffer.data()[buffer.size() - 1] = std::byte{1};
  }
  // Leaking the slack was 400 MB here; a little room for what sanitizers reserve meanwhile.
  EXPECT_LE(reserved_bytes(), before + 16 * kHugePageBytes);
}

TEST(HugePageBufferTest, KernelBacksALargeBufferWithHugePages) {
  if (!huge_pages_wanted())
    GTEST_SKIP() << "transparent huge pages are off (KVLM_HUGE_PAGES=0 or the kernel's "
                    "/sys/kernel/mm/transparent_hugepage/enabled is [never])";
  HugePageBuffer buffer(4 * kHugePageBytes);
  for (size_t i = 0; i < buffer.size(); i += 4096) buffer.data()[i] = std::byte{1};
  // Madvised regions get direct compaction under the default defrag setting, so the kernel
  // gives at least one of the four unless memory is exhausted.
  EXPECT_GT(huge_mapped_bytes(buffer.data()), 0u)
      << "no huge page behind a madvised 8 MiB buffer; decode would run at 4 KiB pages";
  EXPECT_GE(process_huge_page_bytes(), huge_mapped_bytes(buffer.data()));
}

TEST(HugeMappedBytesTest, ReadsTheFieldsOfTheMappingThatStartsThere) {
  const std::string smaps =
      "7f0000000000-7f0000400000 r--p 00000000 fe:00 1234    /models/a.gguf\n"
      "Size:               4096 kB\n"
      "AnonHugePages:         0 kB\n"
      "FilePmdMapped:      2048 kB\n"
      "VmFlags: rd mr mw me hg\n"
      "7f0000400000-7f0000c00000 rw-p 00000000 00:00 0\n"
      "Size:               8192 kB\n"
      "AnonHugePages:      6144 kB\n"
      "FilePmdMapped:         0 kB\n"
      "VmFlags: rd wr mr mw me ac hg\n";
  EXPECT_EQ(huge_mapped_bytes(smaps, reinterpret_cast<void*>(0x7f0000000000)), 2048u * 1024);
  EXPECT_EQ(huge_mapped_bytes(smaps, reinterpret_cast<void*>(0x7f0000400000)), 6144u * 1024);
  // An address inside a mapping, or none at all, is not a mapping's start.
  EXPECT_EQ(huge_mapped_bytes(smaps, reinterpret_cast<void*>(0x7f0000200000)), 0u);
  EXPECT_EQ(huge_mapped_bytes("", reinterpret_cast<void*>(0x7f0000000000)), 0u);
}

TEST(MappedFileHugeTest, LargeFileIsMappedOnAHugePageBoundaryWithItsBytes) {
  // Written just before it is opened, so the page cache holds it in small (dirty) pages: the
  // path that drops them and maps the file again must still give back exactly its bytes.
  test::TempDir dir;
  const std::string path = dir.file("weights.bin");
  std::vector<uint32_t> words(5 * kHugePageBytes / 4 + 1000);
  for (size_t i = 0; i < words.size(); ++i) words[i] = static_cast<uint32_t>(i * 2654435761u);
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(words.data()), words.size() * sizeof(uint32_t));
  }
  auto file = MappedFile::open(path);
  ASSERT_TRUE(file.is_ok()) << file.message();
  ASSERT_EQ(file->size(), words.size() * sizeof(uint32_t));
  if (huge_pages_wanted()) {
    EXPECT_TRUE(huge_aligned(file->data()));
  }
  std::vector<uint32_t> read(words.size());
  std::memcpy(read.data(), file->data(), file->size());
  EXPECT_EQ(read, words);
}

TEST(MappedFileHugeTest, LargeBytesMadeInMemoryMoveToHugePagesWithTheirBytes) {
  // The embedded bench model's weights are made in memory: in a vector's 4 KiB pages its decode
  // would stream at a TLB-limited rate no mapped checkpoint has.
  std::vector<uint8_t> bytes(5 * kHugePageBytes + 1000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 131 + 7);
  const std::vector<uint8_t> expected = bytes;
  MappedFile file = MappedFile::from_bytes(std::move(bytes), "<in memory>");
  ASSERT_EQ(file.size(), expected.size());
  EXPECT_EQ(file.path(), "<in memory>");
  if (huge_pages_wanted()) {
    EXPECT_TRUE(huge_aligned(file.data()));
  }
  EXPECT_EQ(std::memcmp(file.data(), expected.data(), expected.size()), 0);
  MappedFile moved = std::move(file);  // the buffer goes with it
  EXPECT_EQ(std::memcmp(moved.data(), expected.data(), expected.size()), 0);
  // Small bytes (tokenizers, test models) stay where they are.
  MappedFile small = MappedFile::from_bytes({1, 2, 3}, "<small>");
  ASSERT_EQ(small.size(), 3u);
  EXPECT_EQ(small.data()[2], 3);
}

TEST(OwnedTensorsTest, AllocationsAreAlignedDisjointAndZeroed) {
  OwnedTensors owned;
  std::vector<std::pair<uint8_t*, size_t>> blocks;
  for (size_t bytes : {size_t{3}, size_t{100}, size_t{70} << 20, size_t{1}, size_t{5000}}) {
    auto* p = static_cast<uint8_t*>(owned.allocate(bytes));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    for (size_t i = 0; i < bytes; i += 4096) ASSERT_EQ(p[i], 0) << bytes;
    std::memset(p, static_cast<int>(blocks.size() + 1), bytes);
    blocks.push_back({p, bytes});
  }
  EXPECT_EQ(owned.n_bytes, 3u + 100 + (size_t{70} << 20) + 1 + 5000);
  // Each block still holds its own fill: no two overlap.
  for (size_t b = 0; b < blocks.size(); ++b)
    for (size_t i = 0; i < blocks[b].second; i += 997)
      ASSERT_EQ(blocks[b].first[i], b + 1) << "block " << b << " byte " << i;
}

}  // namespace
}  // namespace kvlm
