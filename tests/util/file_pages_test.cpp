// FileMappings (util/file_pages.h): a mapped file's pages dropped and read back unchanged, and
// anonymous memory, whose pages MADV_DONTNEED would zero, never touched.
#include "util/file_pages.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <vector>

#include "support/test_support.h"
#include "util/mapped_file.h"

namespace kvlm {
namespace {

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> bytes(n);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  return bytes;
}

TEST(FileMappings, MappedFilePagesAreDroppedAndReadBackUnchanged) {
  test::TempDir dir;
  const std::vector<uint8_t> bytes = random_bytes(1 << 20, 1);
  {
    std::ofstream out(dir.file("weights.bin"), std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  }
  auto file = MappedFile::open(dir.file("weights.bin"));
  ASSERT_TRUE(file.is_ok()) << file.message();
  const uint8_t* data = file.value().data();
  ASSERT_EQ(std::memcmp(data, bytes.data(), bytes.size()), 0);  // every page read in
  const FileMappings mappings = FileMappings::current();
  ASSERT_GT(mappings.size(), size_t{0}) << "the file's mapping is not listed";
  // A range that starts and ends inside pages: only the whole pages between go.
  const size_t dropped = mappings.drop_pages(data + 100, bytes.size() - 200);
  EXPECT_GT(dropped, bytes.size() / 2);
  EXPECT_LE(dropped, bytes.size() - 200);
  EXPECT_EQ(std::memcmp(data, bytes.data(), bytes.size()), 0) << "the file read back differs";
}

TEST(FileMappings, AnonymousMemoryIsNeverTouched) {
  const std::vector<uint8_t> bytes = random_bytes(1 << 20, 2);
  std::vector<uint8_t> heap = bytes;
  const size_t n = bytes.size();
  void* anon = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(anon, MAP_FAILED);
  std::memcpy(anon, bytes.data(), n);
  const FileMappings mappings = FileMappings::current();
  EXPECT_EQ(mappings.drop_pages(heap.data(), n), size_t{0});
  EXPECT_EQ(mappings.drop_pages(anon, n), size_t{0});
  EXPECT_EQ(std::memcmp(heap.data(), bytes.data(), n), 0) << "heap memory changed";
  EXPECT_EQ(std::memcmp(anon, bytes.data(), n), 0) << "anonymous pages changed";
  munmap(anon, n);
}

}  // namespace
}  // namespace kvlm
