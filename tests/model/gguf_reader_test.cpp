// The GGUF reader on crafted files: a valid file round-trips through GgufWriter, and each class
// of hostile file from the GGUF parsers' CVE history gets an error naming the key or tensor,
// what was expected and what was found, never a crash or an allocation the size of a claim.
#include <gtest/gtest.h>

#include <cstring>

#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "support/expect_error.h"

namespace kvlm {
namespace {

using test::expect_error;

// Raw little-endian bytes, for headers no writer would produce.
struct Bytes {
  std::vector<uint8_t> b;
  template <typename T>
  Bytes& put(T v) {
    const size_t at = b.size();
    b.resize(at + sizeof(T));
    std::memcpy(b.data() + at, &v, sizeof(T));
    return *this;
  }
  Bytes& str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    b.insert(b.end(), {'G', 'G', 'U', 'F'});
    return put(version).put(n_tensors).put(n_kv);
  }
};

Result<GgufFile> parse(const std::vector<uint8_t>& bytes) {
  return GgufFile::parse(bytes, "crafted.gguf");
}

std::vector<uint8_t> f32_bytes(std::vector<float> v) {
  std::vector<uint8_t> out(v.size() * 4);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

TEST(GgufReader, RoundTripsMetadataAndTensors) {
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_u32("llama.block_count", 2);
  w.add_u64("llama.context_length", 128);
  w.add_f32("llama.rope.freq_base", 10000.0f);
  w.add_bool("tokenizer.ggml.add_bos_token", true);
  w.add_string_array("tokenizer.ggml.tokens", {"<s>", "a", ""});
  w.add_f32_array("tokenizer.ggml.scores", {0.0f, -1.5f, 2.0f});
  w.add_i32_array("tokenizer.ggml.token_type", {3, 1, 1});
  w.add_tensor("a", {3}, DType::kF32, f32_bytes({1, 2, 3}));
  w.add_tensor("b", {2, 2}, DType::kF32, f32_bytes({4, 5, 6, 7}));
  w.set_alignment(64);
  const std::vector<uint8_t> bytes = w.bytes();
  auto f = parse(bytes);
  ASSERT_TRUE(f.is_ok()) << f.message();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->get_string("general.architecture").value(), "llama");
  EXPECT_EQ(f->get_uint("llama.block_count").value(), 2u);
  EXPECT_EQ(f->get_uint("llama.context_length").value(), 128u);
  EXPECT_EQ(f->get_float("llama.rope.freq_base").value(), 10000.0);
  EXPECT_TRUE(f->get_bool("tokenizer.ggml.add_bos_token").value());
  auto tokens = f->get_array("tokenizer.ggml.tokens", GgufType::kString);
  ASSERT_TRUE(tokens.is_ok());
  EXPECT_EQ(tokens.value()->strings, (std::vector<std::string_view>{"<s>", "a", ""}));
  auto scores = f->get_array("tokenizer.ggml.scores", GgufType::kF32);
  ASSERT_TRUE(scores.is_ok());
  EXPECT_EQ(gguf_array_float(*scores.value(), 1), -1.5);
  auto types = f->get_array("tokenizer.ggml.token_type", GgufType::kI32);
  ASSERT_TRUE(types.is_ok());
  EXPECT_EQ(gguf_array_int(*types.value(), 0), 3);
  ASSERT_EQ(f->tensors().size(), 2u);
  const GgufTensor* b = f->tensor("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->ne[0], 2);
  EXPECT_EQ(b->ne[1], 2);
  EXPECT_EQ(b->n_bytes, 16u);
  EXPECT_EQ(b->offset, 64u);  // "a" (12 bytes) padded to the alignment
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data) - reinterpret_cast<uintptr_t>(bytes.data()) - 0,
            bytes.size() - 64);
  float v;
  std::memcpy(&v, b->data + 12, 4);
  EXPECT_EQ(v, 7.0f);
  // Typed getters name the key and the type found.
  expect_error(f->get_string("llama.block_count"), {"llama.block_count", "string", "u32"});
  expect_error(f->get_uint("missing.key"), {"missing key 'missing.key'"});
}

TEST(GgufReader, RefusesBadMagicAndVersions) {
  expect_error(parse({'G', 'G'}), {"crafted.gguf", "magic", "needs 4 bytes"});
  expect_error(parse(Bytes().put<uint32_t>(0x12345678).put<uint32_t>(3).b),
               {"not a GGUF file", "GGUF"});
  expect_error(parse(Bytes().header(0, 0, 1).b), {"version 1", "supported: 2, 3"});
  expect_error(parse(Bytes().header(0, 0, 0x03000000).b), {"version 50331648"});
  EXPECT_TRUE(parse(Bytes().header(0, 0, 2).b).is_ok());
}

TEST(GgufReader, RefusesCountsBeyondTheFile) {
  // Counts near 2^64 (which a naive reader multiplies by a struct size, overflowing) and
  // merely absurd ones are both bounded by the bytes that follow.
  expect_error(parse(Bytes().header(0, UINT64_MAX).b), {"18446744073709551615", "key-value"});
  expect_error(parse(Bytes().header(UINT64_MAX / 8 + 1, 0).b), {"tensors", "bytes left"});
  expect_error(parse(Bytes().header(1000, 0).b), {"1000 tensors"});
}

TEST(GgufReader, RefusesStringAndArrayLengthsBeyondTheFile) {
  Bytes huge_key = Bytes().header(0, 1).put<uint64_t>(UINT64_MAX);
  huge_key.b.resize(huge_key.b.size() + 16, 'k');
  expect_error(parse(huge_key.b), {"metadata key", "18446744073709551615", "at most 65535"});
  Bytes long_key = Bytes().header(0, 1).put<uint64_t>(40);
  long_key.b.resize(long_key.b.size() + 16, 'k');
  expect_error(parse(long_key.b), {"metadata key of 40 bytes"});
  // A string value claiming more bytes than exist.
  expect_error(parse(Bytes()
                         .header(0, 1)
                         .str("general.name")
                         .put<uint32_t>(8)
                         .put<uint64_t>(UINT64_MAX - 3)
                         .b),
               {"key 'general.name'", "needs", "bytes"});
  // Arrays: a count the rest of the file cannot hold, for numbers and for strings.
  expect_error(parse(Bytes()
                         .header(0, 1)
                         .str("tokenizer.ggml.scores")
                         .put<uint32_t>(9)
                         .put<uint32_t>(6)
                         .put<uint64_t>(UINT64_MAX / 2)
                         .b),
               {"key 'tokenizer.ggml.scores'", "f32 values", "cannot fit"});
  expect_error(parse(Bytes()
                         .header(0, 1)
                         .str("tokenizer.ggml.tokens")
                         .put<uint32_t>(9)
                         .put<uint32_t>(8)
                         .put<uint64_t>(1ull << 40)
                         .b),
               {"key 'tokenizer.ggml.tokens'", "strings cannot fit"});
  // Nested arrays and unknown value types.
  expect_error(
      parse(Bytes().header(0, 1).str("x.y").put<uint32_t>(9).put<uint32_t>(9).put<uint64_t>(0).b),
      {"key 'x.y'", "arrays of arrays"});
  expect_error(parse(Bytes().header(0, 1).str("x.y").put<uint32_t>(13).put<uint64_t>(0).b),
               {"key 'x.y'", "value type 13", "expected 0..12"});
  expect_error(parse(Bytes().header(0, 1).str("x.y").put<uint32_t>(7).put<uint8_t>(2).b),
               {"key 'x.y'", "bool value is 2", "0 or 1"});
}

TEST(GgufReader, RefusesDuplicateKeysAndTensorNames) {
  GgufWriter w;
  w.add_u32("llama.block_count", 1);
  w.add_u32("llama.block_count", 2);
  expect_error(parse(w.bytes()), {"key 'llama.block_count'", "duplicate"});
  GgufWriter t;
  t.add_tensor("output.weight", {1}, DType::kF32, f32_bytes({1}));
  t.add_tensor("output.weight", {1}, DType::kF32, f32_bytes({2}));
  expect_error(parse(t.bytes()), {"tensor 'output.weight'", "duplicate"});
}

TEST(GgufReader, RefusesBadAlignment) {
  for (uint32_t a : {0u, 3u, 48u}) {
    GgufWriter w;
    w.add_u32("general.alignment", a);
    expect_error(parse(w.bytes()),
                 {"key 'general.alignment'", "power of two", "found " + std::to_string(a)});
  }
  GgufWriter w;
  w.add_u64("general.alignment", 32);  // right value, wrong type
  expect_error(parse(w.bytes()), {"key 'general.alignment'", "expected type u32", "found u64"});
}

TEST(GgufReader, RefusesBadTensorInfos) {
  auto info = [](uint32_t n_dims, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    Bytes b;
    b.header(1, 0).str("blk.0.ffn_up.weight").put(n_dims);
    for (uint64_t n : ne) b.put(n);
    b.put(type).put(offset);
    b.b.resize(b.b.size() + 64, 0);  // some data
    return parse(b.b);
  };
  expect_error(info(5, {1, 1, 1, 1, 1}, 0, 0),
               {"tensor 'blk.0.ffn_up.weight'", "5 dimensions", "at most 4"});
  // Element count x type size overflowing 64 bits, in the count and in the bytes.
  expect_error(info(2, {1ull << 32, 1ull << 32}, 0, 0), {"blk.0.ffn_up.weight", "overflow"});
  expect_error(info(1, {UINT64_MAX}, 0, 0), {"blk.0.ffn_up.weight", "overflow"});
  expect_error(info(2, {1ull << 62, 2}, 8, 0), {"blk.0.ffn_up.weight", "overflow"});
  // A type kvlm does not read, named, with the list.
  expect_error(info(1, {256}, 13, 0), {"Q5_K (ggml type 13)", "supported: F32, F16, BF16, Q8_0"});
  expect_error(info(1, {32}, 1000, 0), {"ggml type 1000"});
  // Rows that are not whole blocks.
  expect_error(info(2, {33, 2}, 8, 0), {"Q8_0", "blocks of 32", "ne[0] is 33"});
  // Offsets misaligned, or outside the data.
  expect_error(info(1, {4}, 0, 16), {"offset 16", "multiple of the alignment 32"});
  expect_error(info(1, {4}, 0, 1ull << 40), {"outside", "bytes of tensor data"});
  expect_error(info(1, {100}, 0, 0), {"[0, 0 + 400)", "outside"});
  expect_error(info(1, {4}, 0, UINT64_MAX - 31), {"outside"});
  // A tensor name longer than ggml allows.
  GgufWriter w;
  w.add_tensor(std::string(64, 'n'), {1}, DType::kF32, f32_bytes({1}));
  expect_error(parse(w.bytes()), {"name of tensor 0", "64 bytes long", "at most 63"});
}

TEST(GgufReader, ParsesEveryPrefixWithoutCrashing) {
  // Truncation at every byte of a valid file is an error or (at the very end) success.
  GgufWriter w;
  w.add_string("general.architecture", "gpt2");
  w.add_string_array("tokenizer.ggml.tokens", {"a", "bc"});
  w.add_tensor("t", {8}, DType::kF32, f32_bytes({1, 2, 3, 4, 5, 6, 7, 8}));
  const std::vector<uint8_t> bytes = w.bytes();
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + n);
    EXPECT_FALSE(parse(prefix).is_ok()) << "prefix of " << n << " bytes";
  }
  EXPECT_TRUE(parse(bytes).is_ok());
}

}  // namespace
}  // namespace kvlm
