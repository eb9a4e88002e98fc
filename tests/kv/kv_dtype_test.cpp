// KV cache storage types without a model: e4m3 and q8_0 conversions pinned by hand-worked
// values, every cache dtype stored and read back through both caches, and `kvlm kv-size`'s
// byte count equal to the bytes each cache really allocates, per dtype.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kv/contiguous_kv_cache.h"
#include "kv/kv_size.h"
#include "kv/paged_kv_cache.h"
#include "ops/dtype.h"
#include "ops/kv_format.h"

namespace kvlm {
namespace {

const KvDtype kCacheTypes[] = {KvDtype::f32,  KvDtype::f16, KvDtype::bf16,
                               KvDtype::q8_0, KvDtype::fp8, KvDtype::q8_0_kc};

TEST(KvFormat, E4m3RoundTripsEveryCodeAndRoundsToNearestEven) {
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7f) == 0x7f) continue;  // NaN
    const float f = e4m3_to_f32(static_cast<uint8_t>(b));
    EXPECT_EQ(f32_to_e4m3(f), b) << "code " << b << " value " << f;
  }
  EXPECT_EQ(e4m3_to_f32(0x7e), 448.0f);   // largest: 1.75 * 2^8
  EXPECT_EQ(e4m3_to_f32(0x08), 0x1p-6f);  // smallest normal
  EXPECT_EQ(e4m3_to_f32(0x01), 0x1p-9f);  // smallest subnormal
  EXPECT_EQ(e4m3_to_f32(0x38), 1.0f);     // exponent 7 = bias
  EXPECT_EQ(e4m3_to_f32(0xb9), -1.125f);  // sign, mantissa 1
  EXPECT_EQ(f32_to_e4m3(1.0625f), 0x38);  // halfway 1 and 1.125: to even (1)
  EXPECT_EQ(f32_to_e4m3(1.1875f), 0x3a);  // halfway 1.125 and 1.25: to even (1.25)
  EXPECT_EQ(f32_to_e4m3(1.07f), 0x39);    // above halfway
  EXPECT_EQ(f32_to_e4m3(15.5f), 0x58);    // 15 and 16 halfway: 16 (even), carries
  EXPECT_EQ(f32_to_e4m3(1000.0f), 0x7e);  // saturates, never NaN
  EXPECT_EQ(f32_to_e4m3(-1000.0f), 0xfe);
  EXPECT_EQ(f32_to_e4m3(0x1p-11f), 0x00);        // a quarter of the smallest: zero
  EXPECT_EQ(f32_to_e4m3(1.5f * 0x1p-9f), 0x02);  // halfway 1 and 2 quanta: to even (2)
}

TEST(KvFormat, Q8_0IsGgmlsBlockScaleAndRounding) {
  // 40 values: a full block of 32 and a short one of 8. Block 0's largest magnitude is 127, so
  // d = 1 and q = round(x) (half away from zero, as roundf); block 1's is 2.54, so d = 0.02.
  std::vector<float> x(40, 0.0f);
  x[0] = 127.0f;
  x[1] = -2.5f;
  x[2] = 0.49f;
  x[3] = -126.6f;
  x[32] = 2.54f;
  x[33] = -1.0f;
  x[34] = 0.011f;
  std::vector<std::byte> row(kv_row_bytes(KvDtype::q8_0, 40));
  ASSERT_EQ(row.size(), 40u + 2 * 2);
  kv_encode_row(row.data(), x.data(), 40, KvDtype::q8_0, nullptr, 40);
  auto q = [&](int c) { return static_cast<int>(static_cast<int8_t>(row[c])); };
  EXPECT_EQ(q(0), 127);
  EXPECT_EQ(q(1), -3);
  EXPECT_EQ(q(2), 0);
  EXPECT_EQ(q(3), -127);
  EXPECT_EQ(q(32), 127);
  EXPECT_EQ(q(33), -50);
  EXPECT_EQ(q(34), 1);  // 0.011 / 0.02 = 0.55
  uint16_t d0, d1;
  std::memcpy(&d0, row.data() + 40, 2);
  std::memcpy(&d1, row.data() + 42, 2);
  EXPECT_EQ(f16_to_f32(d0), 1.0f);
  EXPECT_EQ(d1, f32_to_f16(2.54f / 127.0f));
  const float d1f = f16_to_f32(d1);
  EXPECT_EQ(kv_decode_value(row.data(), 40, 33, KvDtype::q8_0, 0.0f), -50.0f * d1f);
  EXPECT_EQ(kv_decode_value(row.data(), 40, 1, KvDtype::q8_0, 0.0f), -3.0f);
  // A zero block stores d = 0 and zeros.
  std::vector<float> zeros(32, 0.0f);
  kv_encode_row(row.data(), zeros.data(), 32, KvDtype::q8_0, nullptr, 32);
  for (int c = 0; c < 32; ++c) EXPECT_EQ(kv_decode_value(row.data(), 32, c, KvDtype::q8_0, 0), 0);
}

TEST(KvFormat, EachTypeDecodesWithinItsPrecision) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const size_t n = 70, head_dim = 35;
  std::vector<float> x(n);
  for (float& f : x) f = normal(rng);
  const float scales[2] = {0.5f, 0.125f};
  for (KvDtype dtype : kCacheTypes) {
    std::vector<std::byte> row(kv_row_bytes(dtype, n));
    kv_encode_row(row.data(), x.data(), n, dtype, scales, head_dim);
    for (size_t c = 0; c < n; ++c) {
      const float got = kv_decode_value(row.data(), n, c, dtype, scales[c / head_dim]);
      const float a = std::fabs(x[c]);
      float tolerance = 0.0f;
      if (dtype == KvDtype::f16) tolerance = a * 0x1p-11f;
      if (dtype == KvDtype::bf16) tolerance = a * 0x1p-8f;
      if (dtype == KvDtype::fp8) tolerance = a * 0x1p-4f + scales[c / head_dim] * 0x1p-10f;
      if (dtype == KvDtype::q8_0 || dtype == KvDtype::q8_0_kc)  // the same row format
        tolerance = 12.0f / 127.0f;                             // d / 2 for max|x| < 12
      EXPECT_LE(std::fabs(got - x[c]), tolerance) << kv_dtype_name(dtype) << " value " << c;
    }
  }
}

// The bytes kvlm kv-size prints for a config and those both caches allocate, per dtype: GPT-2
// small's shape and a GQA shape whose rows are not a multiple of 32 values.
TEST(KvFormat, KvSizeEqualsWhatTheCachesAllocate) {
  auto gpt2 = kv::kv_geometry_from_preset("gpt2");
  ASSERT_TRUE(gpt2.is_ok()) << gpt2.message();
  auto odd = kv::kv_geometry_from_config_text(
      R"({"model_type": "llama", "num_hidden_layers": 3, "num_attention_heads": 6,
          "num_key_value_heads": 2, "hidden_size": 120, "intermediate_size": 256,
          "vocab_size": 100, "max_position_embeddings": 64})",
      "test/config.json");
  ASSERT_TRUE(odd.is_ok()) << odd.message();
  ASSERT_EQ(odd->n_kv_head * odd->head_dim, 40);  // 1 full + 1 short q8_0 block per row
  for (const kv::KvGeometry* g : {&gpt2.value(), &odd.value()}) {
    const int n_layer = static_cast<int>(g->n_layer);
    const int kv_dim = static_cast<int>(g->n_kv_head * g->head_dim);
    for (KvDtype dtype : kCacheTypes) {
      SCOPED_TRACE(g->model + " " + kv_dtype_name(dtype));
      const int T = 32, B = 3, block = 16;
      auto size = kv::compute_kv_size(*g, T, B, dtype);
      ASSERT_TRUE(size.is_ok()) << size.message();
      KvStorageOptions storage;
      storage.dtype = dtype;
      storage.n_kv_head = static_cast<int>(g->n_kv_head);
      ContiguousKvCache contiguous(n_layer, kv_dim, std::vector<int>(B, T), storage);
      EXPECT_EQ(contiguous.allocated_bytes(), size->bytes);
      auto paged = PagedKvCache::create(n_layer, kv_dim, {block, 0, T * B, storage});
      ASSERT_TRUE(paged.is_ok()) << paged.message();
      for (int s = 0; s < B; ++s) ASSERT_TRUE(paged.value()->reserve(s, T).is_ok());
      EXPECT_EQ(paged.value()->allocated_bytes(), size->bytes);
      EXPECT_EQ(paged.value()->arena_bytes(), size->bytes);
      EXPECT_EQ(size->bytes_per_token * T * B, size->bytes);
    }
  }
  // q8_0 against f32: 4 / (34 / 32) = 3.76x smaller for GPT-2's 768-value rows.
  auto f32 = kv::compute_kv_size(*gpt2, 1024, 1, KvDtype::f32);
  auto q8 = kv::compute_kv_size(*gpt2, 1024, 1, KvDtype::q8_0);
  EXPECT_EQ(q8->bytes, 2ull * 12 * (768 + 2 * 24) * 1024);
  EXPECT_NEAR(static_cast<double>(f32->bytes) / q8->bytes, 4.0 / (34.0 / 32.0), 1e-9);
}

// Rows written through write_row() read back through runs() as the dtype's decoding of what
// was written, in both caches, for every layer and fp8 scale.
TEST(KvFormat, CachesStoreRowsAsTheirDtype) {
  const int n_layer = 2, n_kv_head = 2, head_dim = 20, kv_dim = n_kv_head * head_dim, T = 9;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  std::vector<float> rows(static_cast<size_t>(2) * n_layer * T * kv_dim);
  for (float& f : rows) f = normal(rng);
  auto row = [&](int kv, int l, int p) {
    return rows.data() + ((kv * n_layer + l) * T + p) * kv_dim;
  };
  for (KvDtype dtype : kCacheTypes) {
    SCOPED_TRACE(kv_dtype_name(dtype));
    KvStorageOptions storage{dtype, n_kv_head, {0.5f, 1.0f, 2.0f, 4.0f}, {1.0f, 0.25f, 1.0f, 8.0f},
                             {},    {}};
    ContiguousKvCache contiguous(n_layer, kv_dim, {T}, storage);
    auto paged = PagedKvCache::create(n_layer, kv_dim, {4, 0, 16, storage});
    ASSERT_TRUE(paged.is_ok()) << paged.message();
    ASSERT_TRUE(paged.value()->reserve(0, T).is_ok());  // the caller reserves; the model checks
    for (KvCache* cache :
         {static_cast<KvCache*>(&contiguous), static_cast<KvCache*>(paged->get())}) {
      ASSERT_TRUE(cache->check_reserved(0, T).is_ok());
      for (int l = 0; l < n_layer; ++l)
        for (int p = 0; p < T; ++p) cache->write_row(0, l, p, row(0, l, p), row(1, l, p));
      for (int l = 0; l < n_layer; ++l) {
        const KvRowFormat f = cache->row_format(l);
        EXPECT_EQ(f.row_bytes, kv_row_bytes(dtype, kv_dim));
        std::vector<KvRun> runs;
        cache->runs(0, l, T, &runs);
        std::vector<std::byte> want(f.row_bytes);
        int p = 0;
        for (const KvRun& run : runs)
          for (int j = 0; j < run.n_positions; ++j, ++p) {
            kv_encode_row(want.data(), row(0, l, p), kv_dim, dtype, &storage.fp8_k_scales[l * 2],
                          head_dim);
            ASSERT_EQ(std::memcmp(run.k + j * f.row_bytes, want.data(), f.row_bytes), 0) << p;
            kv_encode_row(want.data(), row(1, l, p), kv_dim, dtype, &storage.fp8_v_scales[l * 2],
                          head_dim);
            ASSERT_EQ(std::memcmp(run.v + j * f.row_bytes, want.data(), f.row_bytes), 0) << p;
            if (dtype == KvDtype::fp8) {
              EXPECT_EQ(f.k_scale[1], storage.fp8_k_scales[l * 2 + 1]);
              EXPECT_EQ(f.v_scale[0], storage.fp8_v_scales[l * 2]);
            }
          }
        EXPECT_EQ(p, T);
      }
    }
  }
}

TEST(KvFormat, BadStorageOptionsAreRefusedByName) {
  KvStorageOptions int8{KvDtype::int8, 1, {}, {}, {}, {}};
  Status s = validate_kv_storage(int8, 2, 8);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("int8"), std::string::npos) << s.message();
  EXPECT_FALSE(PagedKvCache::create(2, 8, {4, 0, 8, int8}).is_ok());
  KvStorageOptions scales{KvDtype::fp8, 2, {1.0f, 1.0f, 1.0f}, {}, {}, {}};
  s = validate_kv_storage(scales, 2, 8);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("4 values, found 3"), std::string::npos) << s.message();
  scales.fp8_k_scales = {1.0f, 0.0f, 1.0f, 1.0f};
  EXPECT_FALSE(validate_kv_storage(scales, 2, 8).is_ok());
  EXPECT_FALSE(parse_cache_dtype("int8").has_value());
  EXPECT_EQ(parse_cache_dtype("Q8_0"), KvDtype::q8_0);
  EXPECT_EQ(parse_cache_dtype("fp8_e4m3"), KvDtype::fp8);
}

}  // namespace
}  // namespace kvlm
