// The cache's promise, one suite for every model and cache: cached generation is bitwise
// identical to uncached at every step, a sequence's logits do not depend on its batch, its place
// in the batch, the thread count or how its prompt is split into prefill chunks; on the paged
// cache too (so paged == contiguous, shared prefixes included), for every KV cache dtype (f16,
// bf16, q8_0 and fp8 caches are compared with uncached runs on a cache of the same dtype). Cases
// are (model: architecture, format, attention layout, weight dtype) x (cache: contiguous or
// paged, block size, sharing, KV dtype).
//
// To add a dimension (an engine, a window), give CacheSpec or ModelSpec
// (tests/support/) the field and its part of name(), then list the cases below: pick cases,
// don't take the full cross product, so the suite stays a few seconds.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <ostream>
#include <vector>

#include "generate/generate.h"
#include "kv/contiguous_kv_cache.h"
#include "kv/paged_kv_cache.h"
#include "support/generation.h"
#include "support/test_models.h"

namespace kvlm {
namespace {

using test::CacheSpec;
using test::Generation;
using test::ModelFormat;
using test::ModelSpec;

// The seed's three prompts, a one-token prompt, one sharing its first 8 tokens with the first
// (on a paged cache that shares prefixes, it reuses the first prompt's blocks), and the third
// again (a whole-prompt hit: its last block is copied before its last position is recomputed).
const std::vector<std::vector<int32_t>> kPrompts = {
    {7, 3, 19, 1, 25, 8, 11, 4, 2, 15}, {9, 2},       {1, 6, 4, 22}, {47},
    {7, 3, 19, 1, 25, 8, 11, 4, 30},    {1, 6, 4, 22}};

struct ExactnessCase {
  ModelSpec model;
  CacheSpec cache;
};
// "gpt2_f32_paged3_unshared": the case's name in listings (and in ctest), as gtest prints it.
void PrintTo(const ExactnessCase& c, std::ostream* os) {
  *os << c.model.name() << "_" << c.cache.name();
}

class Exactness : public ::testing::TestWithParam<ExactnessCase> {
 protected:
  void SetUp() override {
    auto model = test::write_and_load(GetParam().model, dir_);
    ASSERT_TRUE(model.is_ok()) << model.message();
    model_ = std::move(model).value();
    const ModelSpec& spec = GetParam().model;
    ASSERT_EQ(model_->config().arch, spec.arch());
    ASSERT_EQ(model_->weight_dtype(), dtype_name(spec.quantize.value_or(spec.dtype)));
    if (spec.n_kv_head > 0) {
      ASSERT_EQ(model_->config().n_kv_head, spec.n_kv_head);
    }
    ASSERT_EQ(model_->config().tied_embeddings, spec.tied);
  }
  Generation run(const std::vector<std::vector<int32_t>>& prompts, int n_new, bool cached,
                 int threads) {
    return test::run_generate(*model_, prompts, n_new, cached, threads, GetParam().cache);
  }
  test::TempDir dir_;
  std::unique_ptr<Model> model_;
};

TEST_P(Exactness, CachedEqualsUncachedAtEveryStep) {
  const Generation uncached = run(kPrompts, 12, /*cached=*/false, 2);
  const Generation cached = run(kPrompts, 12, /*cached=*/true, 2);
  ASSERT_EQ(cached.logits.size(), 12u);
  test::expect_same_bits(cached, uncached, "cached vs uncached");
}

// Each prompt's logits in the batch equal the prompt run alone, and the batch reversed.
TEST_P(Exactness, BatchAndOrderInvariance) {
  const Generation batched = run(kPrompts, 8, true, 2);
  const std::vector<std::vector<int32_t>> reversed_prompts(kPrompts.rbegin(), kPrompts.rend());
  const Generation reversed = run(reversed_prompts, 8, true, 2);
  const size_t n = kPrompts.size();
  for (size_t s = 0; s < n; ++s) {
    const std::string what = "sequence " + std::to_string(s);
    test::expect_same_bits(run({kPrompts[s]}, 8, true, 1), test::only_sequence(batched, s),
                           what + " alone vs in the batch");
    test::expect_same_bits(test::only_sequence(reversed, n - 1 - s),
                           test::only_sequence(batched, s), what + " in the reversed batch");
  }
}

TEST_P(Exactness, ThreadCountInvariance) {
  const Generation one = run(kPrompts, 6, true, 1);
  for (int threads : {2, 3, 5})
    test::expect_same_bits(run(kPrompts, 6, true, threads), one,
                           std::to_string(threads) + " threads vs 1");
}

// One sequence on more threads than rows: each decode row's positions are split over the
// threads in whole chunks of attention's reduction (kAttentionChunk), where the prompt was
// prefilled row by row. Models of 64 positions: a 34-token prompt and 28 new tokens, decode rows
// of two chunks over 2 threads (a chunk each) and 3 (one part empty); of 32: one chunk. The
// split takes f32/f16/bf16 caches whose heads are whole vectors: the 64-wide quantized specs on
// every target (the tiny models' heads of 6 and 8 run head by head where vectors are 16 wide).
TEST_P(Exactness, OneSequenceSplitOverThreadsEqualsUncached) {
  const int n_ctx = model_->config().n_ctx;
  const int n_prompt = n_ctx / 2 + 2, n_new = n_ctx - n_prompt - 2;
  std::vector<int32_t> prompt;
  for (int i = 0; i < n_prompt; ++i) prompt.push_back((i * 7 + 3) % 40 + 1);
  const Generation uncached = run({prompt}, n_new, /*cached=*/false, 1);
  ASSERT_TRUE(uncached.status.is_ok()) << uncached.status.message();
  ASSERT_EQ(uncached.logits.size(), static_cast<size_t>(n_new));
  for (int threads : {2, 3})
    test::expect_same_bits(run({prompt}, n_new, true, threads), uncached,
                           std::to_string(threads) + " threads, cached, vs uncached");
}

// Splitting a prompt into prefill chunks (here 3 tokens at a time, on one thread, against one
// pass on two) changes no bit: each position's computation is independent of how rows group.
TEST_P(Exactness, ChunkedPrefillEqualsOnePass) {
  const std::vector<int32_t>& prompt = kPrompts[0];
  const ModelConfig& c = model_->config();
  const int n = static_cast<int>(prompt.size());
  // The caller reserves the positions a step writes (the model only checks): the contiguous
  // cache is sized up front, the paged one grows with reserve().
  struct TestCache {
    std::unique_ptr<KvCache> cache;
    PagedKvCache* paged = nullptr;
    Status reserve(int n_positions) {
      return paged ? paged->reserve(0, n_positions) : Status::ok();
    }
  };
  auto make_cache = [&]() {
    TestCache t;
    const CacheSpec& spec = GetParam().cache;
    if (spec.block_size <= 0) {
      t.cache = std::make_unique<ContiguousKvCache>(c.n_layer, c.kv_dim(), std::vector<int>{n},
                                                    spec.storage(c));
      return t;
    }
    auto paged =
        PagedKvCache::create(c.n_layer, c.kv_dim(), {spec.block_size, 0, 2 * n, spec.storage(c)});
    EXPECT_TRUE(paged.is_ok()) << paged.message();
    if (paged) {
      t.paged = paged.value().get();
      t.cache = std::move(paged).value();
    }
    return t;
  };
  std::vector<float> whole(c.n_vocab), pieces(c.n_vocab);
  TestCache a = make_cache(), b = make_cache();
  ASSERT_TRUE(a.cache && b.cache);
  const SequenceChunk all{0, 0, prompt};
  ASSERT_TRUE(a.reserve(n).is_ok());
  const Status one_pass = model_->forward(whole.data(), {&all, 1}, *a.cache, Parallel{2});
  ASSERT_TRUE(one_pass.is_ok()) << one_pass.message();
  for (int t = 0; t < n; t += 3) {
    const int len = std::min(3, n - t);
    const SequenceChunk part{0, t, std::span<const int32_t>(prompt).subspan(t, len)};
    ASSERT_TRUE(b.reserve(t + len).is_ok());
    const Status step = model_->forward(pieces.data(), {&part, 1}, *b.cache, Parallel{1});
    ASSERT_TRUE(step.is_ok()) << step.message();
  }
  EXPECT_TRUE(test::bitwise_equal(whole, pieces))
      << "max |difference| " << test::max_abs_diff(whole, pieces);
}

// Each model once or twice, on the contiguous cache or on a paged one: block sizes that cut the
// prompts at different places (1: every position its own block; 3 and 4: the shared 8-token
// prefix ends mid-block or on a boundary; 16: one block), sharing prefixes or not. Paged ==
// contiguous follows from both equalling uncached. Then each KV dtype on GPT-2 and on Llama with
// grouped-query attention, each on another cache kind.
ModelSpec llama(ModelFormat f, int kv, bool tied = true, DType d = DType::kF32, int shards = 1) {
  return test::llama_spec(f, kv, tied, d, shards);
}
using test::quantized;
constexpr ModelFormat kBin = ModelFormat::kLlama2cBin;
constexpr ModelFormat kHf = ModelFormat::kLlamaHf;

INSTANTIATE_TEST_SUITE_P(
    Models, Exactness,
    ::testing::Values(
        ExactnessCase{test::gpt2_spec(DType::kF32), test::contiguous_cache()},
        ExactnessCase{test::gpt2_spec(DType::kF32), test::paged_cache(1)},
        ExactnessCase{test::gpt2_spec(DType::kF32), test::paged_cache(3, false)},
        ExactnessCase{test::gpt2_spec(DType::kF16), test::paged_cache(16)},
        ExactnessCase{test::gpt2_spec(DType::kBF16), test::paged_cache(4)},
        ExactnessCase{llama(kBin, 2), test::contiguous_cache()},
        ExactnessCase{llama(kBin, 2), test::paged_cache(1)},
        ExactnessCase{llama(kBin, 1, false), test::paged_cache(3)},
        ExactnessCase{llama(kBin, 4), test::contiguous_cache()},
        ExactnessCase{llama(kHf, 2), test::paged_cache(4, false)},
        ExactnessCase{llama(kHf, 2, false, DType::kF32, 3), test::contiguous_cache()},
        ExactnessCase{llama(kHf, 1, true, DType::kBF16), test::contiguous_cache()},
        ExactnessCase{llama(kHf, 2, false, DType::kF16, 2), test::paged_cache(4)},
        ExactnessCase{test::gpt2_spec(), test::contiguous_cache().with(KvDtype::f16)},
        ExactnessCase{test::gpt2_spec(), test::paged_cache(3).with(KvDtype::bf16)},
        ExactnessCase{test::gpt2_spec(), test::paged_cache(4).with(KvDtype::q8_0)},
        ExactnessCase{test::gpt2_spec(), test::paged_cache(1).with(KvDtype::fp8)},
        ExactnessCase{llama(kBin, 2), test::paged_cache(16).with(KvDtype::f16)},
        ExactnessCase{llama(kBin, 2), test::contiguous_cache().with(KvDtype::bf16)},
        ExactnessCase{llama(kBin, 2), test::paged_cache(3).with(KvDtype::q8_0)},
        ExactnessCase{llama(kBin, 2), test::paged_cache(4, false).with(KvDtype::fp8)},
        // Weights quantized at load, on 256-wide models: prefill rows take the
        // block kernels' panel path, decode rows the fused one.
        ExactnessCase{quantized(test::gpt2_spec(), DType::kQ4_0), test::paged_cache(3)},
        ExactnessCase{quantized(test::gpt2_spec(), DType::kQ4_K), test::contiguous_cache()},
        ExactnessCase{quantized(test::gpt2_spec(DType::kF16), DType::kQ6_K),
                      test::paged_cache(4, false)},
        ExactnessCase{quantized(llama(kBin, 2), DType::kQ8_0), test::paged_cache(1)},
        ExactnessCase{quantized(llama(kHf, 1, false), DType::kQ4_K), test::paged_cache(4)},
        ExactnessCase{quantized(llama(kBin, 2), DType::kQ6_K), test::contiguous_cache()},
        ExactnessCase{quantized(llama(kHf, 2), DType::kQ4_0), test::contiguous_cache()},
        // Heads of 64 (the quantized specs' width): q8_0 attention applies its scales per
        // block on every target (the tiny models' heads of 6 and 8 take the per-value path
        // where vectors are 16 wide).
        ExactnessCase{quantized(test::gpt2_spec(), DType::kQ8_0),
                      test::paged_cache(3).with(KvDtype::q8_0)},
        ExactnessCase{quantized(llama(kBin, 2), DType::kQ8_0),
                      test::contiguous_cache().with(KvDtype::q8_0)},
        // q8_0_kc: keys stored before RoPE and widened as read (scales 1 here; calibrated
        // scales: KvCalibration.KeyChannelScalesAreFixedPerModelAndKeepExactness).
        ExactnessCase{test::gpt2_spec(), test::contiguous_cache().with(KvDtype::q8_0_kc)},
        ExactnessCase{llama(kBin, 2), test::paged_cache(3).with(KvDtype::q8_0_kc)}),
    ::testing::PrintToStringParamName());

// Each KV dtype is really applied: the first step's logits (the prompt's own pass, like for
// like) move off the f32 cache's, but only a little. A sanity bound only (the dtype did not
// wreck the model): how each dtype stores a row is pinned exactly by
// KvFormat.CachesStoreRowsAsTheirDtype, .Q8_0IsGgmlsBlockScaleAndRounding,
// .E4m3RoundTripsEveryCodeAndRoundsToNearestEven and .EachTypeDecodesWithinItsPrecision.
TEST(KvDtypes, LogitsMoveOffF32OnlyByTheStoredPrecision) {
  for (const ModelSpec& spec : {test::gpt2_spec(), llama(kBin, 2)}) {
    test::TempDir dir;
    auto model = test::write_and_load(spec, dir);
    ASSERT_TRUE(model.is_ok()) << model.message();
    const Generation f32 = test::run_generate(*model.value(), {kPrompts[0]}, 1, true, 1);
    ASSERT_TRUE(f32.status.is_ok()) << f32.status.message();
    for (KvDtype dtype : {KvDtype::f16, KvDtype::bf16, KvDtype::q8_0, KvDtype::fp8}) {
      const std::string what = spec.name() + " " + kv_dtype_name(dtype);
      const Generation stored = test::run_generate(*model.value(), {kPrompts[0]}, 1, true, 1,
                                                   test::contiguous_cache().with(dtype));
      ASSERT_TRUE(stored.status.is_ok()) << what << ": " << stored.status.message();
      const std::vector<float>& a = stored.logits[0][0];
      const std::vector<float>& b = f32.logits[0][0];
      EXPECT_FALSE(test::bitwise_equal(a, b)) << what << ": the cache dtype changed nothing";
      float max_abs = 0;
      for (float v : b) max_abs = std::max(max_abs, std::fabs(v));
      EXPECT_LT(test::max_abs_diff(a, b), 0.1f * max_abs) << what << ", max |logit| " << max_abs;
    }
  }
}

}  // namespace
}  // namespace kvlm
