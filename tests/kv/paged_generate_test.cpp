// generate() on the paged cache: prefix sharing in one batch and across requests computes only
// what is not cached (the counts pinned), copy on write leaves cached blocks alone, running out
// of blocks is a clean error, a sequence that stops returns its blocks at once; and through all
// of it every sequence's logits stay bitwise those of uncached generation. That paged equals
// contiguous for every model and block size is tests/model/exactness_test.cpp's claim; here the
// prompts are long (a 40-token shared prefix) and the caches outlive requests.
#include <gtest/gtest.h>

#include <cstring>

#include "generate/generate.h"
#include "kv/paged_kv_cache.h"
#include "model/loader.h"
#include "support/generation.h"
#include "support/test_support.h"

namespace kvlm {
namespace {

using Outcome = test::Generation;

Outcome run(Model& model, const std::vector<std::vector<int32_t>>& prompts,
            const GenerateOptions& options) {
  return test::run_generate(model, prompts, options, 2);
}

GenerateOptions uncached(int n_new) {
  GenerateOptions o;
  o.max_new_tokens = n_new;
  o.use_cache = false;
  return o;
}
GenerateOptions contiguous(int n_new) {
  GenerateOptions o;
  o.max_new_tokens = n_new;
  return o;
}
GenerateOptions paged(int n_new, int block_size, bool share) {
  GenerateOptions o;
  o.max_new_tokens = n_new;
  o.paged = PagedGenerateOptions{block_size, 0, share};
  return o;
}

void expect_identical(const Outcome& a, const Outcome& b, const std::string& what) {
  test::expect_same_bits(a, b, what);
}

std::vector<int32_t> tokens_from(uint64_t seed, int n) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    t.push_back(static_cast<int32_t>((seed >> 33) % 60));
  }
  return t;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class PagedGenerate : public ::testing::Test {
 protected:
  void SetUp() override {
    ModelConfig config = test::tiny_gpt2_config();
    config.n_ctx = 128;  // room for a 40-token shared prefix, a tail and new tokens
    RandomGpt2Options options;
    options.seed = 7;
    ASSERT_TRUE(write_random_gpt2(dir_.path(), config, options).is_ok());
    auto model = load_model(dir_.path(), LoadOptions{});
    ASSERT_TRUE(model.is_ok()) << model.message();
    model_ = std::move(model.value());
  }
  std::unique_ptr<PagedKvCache> make_cache(int block_size, size_t bytes = 0, int64_t tokens = 0) {
    PagedKvCacheOptions options{block_size, bytes, tokens, {}};
    auto cache = PagedKvCache::create(model_->config().n_layer, model_->config().kv_dim(), options);
    EXPECT_TRUE(cache.is_ok()) << cache.message();
    return std::move(cache.value());
  }
  test::TempDir dir_;
  std::unique_ptr<Model> model_;
};

const std::vector<int32_t> kPrefix40 = tokens_from(1, 40);

// Two prompts share a 40-token prefix (2.5 blocks of 16: it ends mid-block), a third shares
// nothing, a fourth is short. Batched.
std::vector<std::vector<int32_t>> shared_prefix_batch() {
  return {concat(kPrefix40, tokens_from(2, 7)),
          tokens_from(3, 11),
          concat(kPrefix40, tokens_from(4, 12)),
          {5, 9}};
}

// Sharing the 40-token prefix skips exactly its full blocks, whatever the block size.
TEST_F(PagedGenerate, SharedPrefixSkipsItsFullBlocksForEveryBlockSize) {
  const auto prompts = shared_prefix_batch();
  const Outcome reference = run(*model_, prompts, contiguous(6));
  for (const auto& [block_size, share] :
       std::vector<std::pair<int, bool>>{{1, true}, {3, true}, {3, false}, {16, true}}) {
    const std::string what =
        "block size " + std::to_string(block_size) + (share ? " shared" : " unshared");
    const Outcome paged_run = run(*model_, prompts, paged(6, block_size, share));
    expect_identical(paged_run, reference, what);
    // Shared: the second prompt with the prefix finds its full blocks in this very batch.
    const int64_t expected_cached = share ? (40 / block_size) * block_size : 0;
    EXPECT_EQ(paged_run.stats.prompt_tokens_cached, expected_cached) << what;
    EXPECT_EQ(paged_run.stats.rows_computed, (47 + 11 + 52 + 2) - expected_cached + 5 * 4) << what;
  }
}

// The prefix ends exactly on a block boundary (40 = 5 blocks of 8): all 40 positions shared.
TEST_F(PagedGenerate, PrefixEndingOnABlockBoundaryIsSharedWhole) {
  const auto prompts = shared_prefix_batch();
  const Outcome shared = run(*model_, prompts, paged(6, 8, true));
  expect_identical(shared, run(*model_, prompts, uncached(6)), "block size 8");
  EXPECT_EQ(shared.stats.prompt_tokens_cached, 40);
}

// Two identical prompts in one batch: the second finds the whole prompt cached, recomputes
// only its last position after copying the block holding it.
TEST_F(PagedGenerate, IdenticalPromptsShareEverythingButTheLastPosition) {
  const std::vector<std::vector<int32_t>> prompts = {kPrefix40, kPrefix40};
  const Outcome shared = run(*model_, prompts, paged(5, 4, true));
  expect_identical(shared, run(*model_, prompts, uncached(5)), "identical prompts");
  EXPECT_EQ(shared.stats.prompt_tokens_cached, 39);
  EXPECT_EQ(shared.stats.rows_computed, 40 + 1 + 4 * 2);
}

// A caller-owned cache outlives the request: the second request finds the prefix the first
// cached (its generated tokens too) and computes less, with identical logits.
TEST_F(PagedGenerate, SecondRequestReusesTheFirstRequestsPrefix) {
  auto cache = make_cache(16, 0, 1024);
  GenerateOptions first = contiguous(10);
  first.paged_cache = cache.get();
  const std::vector<std::vector<int32_t>> request1 = {concat(kPrefix40, tokens_from(5, 9))};
  const Outcome one = run(*model_, request1, first);
  expect_identical(one, run(*model_, request1, uncached(10)), "first request");
  EXPECT_EQ(one.stats.prompt_tokens_cached, 0);
  EXPECT_EQ(cache->pool().n_used(), 0);    // its blocks were returned ...
  EXPECT_EQ(cache->pool().n_cached(), 3);  // ... and its 3 full blocks (49 + 9 positions) stay

  // Same prefix, new tail: the two full blocks within the prefix are reused.
  const std::vector<std::vector<int32_t>> request2 = {concat(kPrefix40, tokens_from(6, 20)),
                                                      tokens_from(8, 30)};
  const Outcome two = run(*model_, request2, first);
  expect_identical(two, run(*model_, request2, uncached(10)), "second request");
  EXPECT_EQ(two.stats.prompt_tokens_cached, 32);
  EXPECT_EQ(two.stats.rows_computed, (60 + 30 - 32) + 9 * 2);

  // A follow-up turn: the first prompt plus what it generated, plus more. Cached blocks of the
  // generated text are found too (positions 0..47 in 3 blocks).
  const std::vector<std::vector<int32_t>> request3 = {
      concat(concat(request1[0], one.tokens[0]), tokens_from(9, 5))};
  GenerateOptions turn = first;
  turn.max_new_tokens = 4;
  const Outcome three = run(*model_, request3, turn);
  expect_identical(three, run(*model_, request3, uncached(4)), "follow-up turn");
  EXPECT_EQ(three.stats.prompt_tokens_cached, 48);
  EXPECT_TRUE(cache->check().is_ok()) << cache->check().message();

  // A prompt of 40 tokens finds its 2 full blocks (the rest of its third is not a block).
  const std::vector<std::vector<int32_t>> request4 = {kPrefix40, {1, 2, 3}};
  const Outcome four = run(*model_, request4, first);
  expect_identical(four, run(*model_, request4, uncached(10)), "40-token prompt");
  EXPECT_EQ(four.stats.prompt_tokens_cached, 32);

  // The very same prompt of 3 full blocks twice: the second time every block is found, and the
  // last is copied before its last position is recomputed (the cached original untouched).
  const std::vector<std::vector<int32_t>> request5 = {tokens_from(1, 48)};  // kPrefix40 + 8
  const Outcome five = run(*model_, request5, first);
  EXPECT_EQ(five.stats.prompt_tokens_cached, 32);
  const int64_t copies_before = cache->copies();
  const Outcome six = run(*model_, request5, first);
  expect_identical(six, run(*model_, request5, uncached(10)), "whole prompt cached");
  expect_identical(six, five, "whole prompt cached, against its first run");
  EXPECT_EQ(six.stats.prompt_tokens_cached, 47);
  EXPECT_EQ(cache->copies(), copies_before + 1);
  EXPECT_TRUE(cache->check().is_ok()) << cache->check().message();
  EXPECT_EQ(cache->pool().n_used(), 0);
}

// Running out of blocks fails the request with a clear error; the cache stays consistent, its
// slots are free again and a request that fits still runs, bitwise as before.
TEST_F(PagedGenerate, RunningOutOfMemoryIsACleanError) {
  // 4 blocks of 16 positions = 64 positions; the batch needs 47 + 11 + 52 + 2 + 4 * 9.
  auto cache = make_cache(16, 0, 64);
  GenerateOptions options = contiguous(10);
  options.paged_cache = cache.get();
  const Outcome failed = run(*model_, shared_prefix_batch(), options);
  ASSERT_FALSE(failed.status.is_ok());
  EXPECT_NE(failed.status.message().find("KV cache out of memory"), std::string::npos)
      << failed.status.message();
  EXPECT_NE(failed.status.message().find("--kv-memory"), std::string::npos);
  EXPECT_TRUE(cache->check().is_ok()) << cache->check().message();
  EXPECT_EQ(cache->pool().n_used(), 0);
  for (int s = 0; s < 4; ++s) EXPECT_FALSE(cache->holds(s));

  const std::vector<std::vector<int32_t>> fits = {tokens_from(11, 20), {3, 4, 5}};
  expect_identical(run(*model_, fits, options), run(*model_, fits, uncached(10)), "after OOM");
  EXPECT_TRUE(cache->check().is_ok()) << cache->check().message();

  // An arena of a few bytes is refused up front, naming the flag.
  GenerateOptions tiny = paged(4, 16, true);
  tiny.paged->kv_memory_bytes = 1000;
  const Outcome refused = run(*model_, fits, tiny);
  ASSERT_FALSE(refused.status.is_ok());
  EXPECT_NE(refused.status.message().find("--kv-memory 1000"), std::string::npos)
      << refused.status.message();
}

// A sequence that stops early returns its blocks at once; the others go on unchanged.
TEST_F(PagedGenerate, EarlyStopReturnsBlocksAndChangesNoBits) {
  const auto prompts = shared_prefix_batch();
  auto cache = make_cache(4, 0, 1024);
  // Blocks held when sequence 0 gets its second token, with sequence 1 stopping after its
  // first token or not.
  auto blocks_held = [&](bool stop, Outcome* out) {
    GenerateOptions options = contiguous(12);
    options.paged_cache = cache.get();
    int n_seen = 0, held = -1;
    options.on_token = [&](int seq, int32_t) {
      if (seq == 0 && ++n_seen == 2) held = cache->pool().n_used();
      return stop && seq == 1;
    };
    *out = run(*model_, prompts, options);
    return held;
  };
  Outcome stopped, kept;
  const int held_stopped = blocks_held(true, &stopped);
  const int held_kept = blocks_held(false, &kept);
  ASSERT_TRUE(stopped.status.is_ok()) << stopped.status.message();
  EXPECT_EQ(held_stopped, held_kept - 3);  // sequence 1's 11 positions, in 3 blocks, returned
  EXPECT_EQ(stopped.tokens[1].size(), 1u);
  EXPECT_EQ(stopped.tokens[0].size(), 12u);
  const Outcome full = run(*model_, prompts, uncached(12));
  expect_identical(kept, full, "nobody stops");
  for (size_t step = 0; step < 12; ++step)
    for (size_t s : {0u, 2u, 3u})
      EXPECT_EQ(std::memcmp(stopped.logits[step][s].data(), full.logits[step][s].data(),
                            full.logits[step][s].size() * sizeof(float)),
                0)
          << "step " << step << " sequence " << s;
  EXPECT_TRUE(cache->check().is_ok()) << cache->check().message();
}

TEST_F(PagedGenerate, CallerCacheMustFitTheModelAndHaveFreeSlots) {
  PagedKvCacheOptions options{16, 0, 256, {}};
  auto other = PagedKvCache::create(3, model_->config().kv_dim(), options);
  ASSERT_TRUE(other.is_ok());
  GenerateOptions o = contiguous(2);
  o.paged_cache = other.value().get();
  EXPECT_FALSE(run(*model_, {{1, 2}}, o).status.is_ok());
  auto cache = make_cache(16, 0, 256);
  ASSERT_TRUE(cache->reserve(0, 3).is_ok());
  o.paged_cache = cache.get();
  const Outcome busy = run(*model_, {{1, 2}}, o);
  ASSERT_FALSE(busy.status.is_ok());
  EXPECT_NE(busy.status.message().find("slot 0 is in use"), std::string::npos);
  EXPECT_TRUE(cache->holds(0));  // someone else's sequence is left alone
}

}  // namespace
}  // namespace kvlm
