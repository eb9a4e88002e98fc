// PagedKvCache without a model: block tables, runs, growth without copies, running out as a
// clean error, prefix matching, copy on write, forks, LRU eviction of cached prefixes. K/V
// rows are filled with values that name their sequence and position, so a test can tell
// whose data a block holds.
#include "kv/paged_kv_cache.h"

#include <gtest/gtest.h>

#include <numeric>

namespace kvlm {
namespace {

constexpr int kLayers = 2;
constexpr int kDim = 3;

std::unique_ptr<PagedKvCache> make_cache(int block_size, int n_blocks) {
  PagedKvCacheOptions options;
  options.block_size = block_size;
  options.token_budget = static_cast<int64_t>(block_size) * n_blocks;
  auto cache = PagedKvCache::create(kLayers, kDim, options);
  EXPECT_TRUE(cache.is_ok()) << cache.message();
  return std::move(cache.value());
}

float tag(int seq, int layer, int pos, int i) {
  return seq * 10000 + layer * 1000 + pos * 10 + i;
}

// Writes positions [from, to) of `seq` as the model would, tagged with `writer`.
void write(PagedKvCache& cache, int seq, int from, int to, int writer) {
  for (int l = 0; l < kLayers; ++l)
    for (int p = from; p < to; ++p) {
      float k[kDim], v[kDim];
      for (int i = 0; i < kDim; ++i) {
        k[i] = tag(writer, l, p, i);
        v[i] = -tag(writer, l, p, i);
      }
      cache.write_row(seq, l, p, k, v);
    }
}

// Where position `pos` of `seq` in `layer` keeps its key row, found through runs().
const float* key_at(const PagedKvCache& cache, int seq, int layer, int pos) {
  std::vector<KvRun> runs;
  cache.runs(seq, layer, pos + 1, &runs);
  return reinterpret_cast<const float*>(runs.back().k) + (runs.back().n_positions - 1) * kDim;
}

// The writer whose tags positions [0, n) of `seq` hold, read back through runs(); -1 if mixed
// or wrong.
int reader(const PagedKvCache& cache, int seq, int n) {
  int who = -2;
  for (int l = 0; l < kLayers; ++l) {
    std::vector<KvRun> runs;
    cache.runs(seq, l, n, &runs);
    int p = 0;
    for (const KvRun& run : runs) {
      const auto* k = reinterpret_cast<const float*>(run.k);
      const auto* v = reinterpret_cast<const float*>(run.v);
      for (int j = 0; j < run.n_positions; ++j, ++p) {
        const int w = static_cast<int>(k[j * kDim] - tag(0, l, p, 0)) / 10000;
        if (who == -2) who = w;
        for (int i = 0; i < kDim; ++i)
          if (k[j * kDim + i] != tag(w, l, p, i) || v[j * kDim + i] != -tag(w, l, p, i) || w != who)
            return -1;
      }
    }
    if (p != n) return -1;
  }
  return who;
}

std::vector<int32_t> iota_tokens(int n, int first = 1) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

TEST(PagedKvCache, CreateRejectsBadSizes) {
  PagedKvCacheOptions options;
  options.block_size = 0;
  options.token_budget = 64;
  auto bad_block = PagedKvCache::create(kLayers, kDim, options);
  ASSERT_FALSE(bad_block.is_ok());
  EXPECT_NE(bad_block.message().find("--block-size"), std::string::npos) << bad_block.message();
  options.block_size = 16;
  options.token_budget = 0;
  EXPECT_FALSE(PagedKvCache::create(kLayers, kDim, options).is_ok());
  options.kv_memory_bytes = 100;  // one block is 2 * 2 * 16 * 3 * 4 = 768 bytes
  auto small = PagedKvCache::create(kLayers, kDim, options);
  ASSERT_FALSE(small.is_ok());
  EXPECT_NE(small.message().find("--kv-memory 100"), std::string::npos) << small.message();
  EXPECT_NE(small.message().find("768 bytes"), std::string::npos) << small.message();
  options.kv_memory_bytes = 768 * 5 + 700;
  auto five = PagedKvCache::create(kLayers, kDim, options);
  ASSERT_TRUE(five.is_ok());
  EXPECT_EQ(five.value()->n_blocks(), 5);
  EXPECT_EQ(five.value()->block_bytes(), 768u);
  EXPECT_EQ(five.value()->arena_bytes(), 768u * 5);
}

TEST(PagedKvCache, GrowsBlockByBlockWithoutMovingAnything) {
  auto cache = make_cache(4, 8);
  ASSERT_TRUE(cache->reserve(0, 3).is_ok());
  EXPECT_EQ(cache->block_table(0), (std::vector<int>{0}));
  EXPECT_EQ(cache->allocated_bytes(), cache->block_bytes());
  write(*cache, 0, 0, 3, 0);
  const float* first = key_at(*cache, 0, 1, 2);
  for (int n = 4; n <= 9; ++n) {  // decode one position at a time
    ASSERT_TRUE(cache->reserve(0, n).is_ok());
    write(*cache, 0, n - 1, n, 0);
  }
  EXPECT_EQ(cache->block_table(0), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(key_at(*cache, 0, 1, 2), first);  // growth never moved a cached row
  EXPECT_EQ(cache->copies(), 0);
  EXPECT_EQ(reader(*cache, 0, 9), 0);
  std::vector<KvRun> runs;
  cache->runs(0, 0, 9, &runs);
  ASSERT_EQ(runs.size(), 3u);  // one run per block: 4 + 4 + 1 positions
  EXPECT_EQ(runs[0].n_positions, 4);
  EXPECT_EQ(runs[2].n_positions, 1);
  EXPECT_EQ(reinterpret_cast<const float*>(runs[2].k), key_at(*cache, 0, 0, 8));
  EXPECT_EQ(cache->held_positions(), 9);
  EXPECT_EQ(cache->allocated_bytes(), 3 * cache->block_bytes());
  EXPECT_EQ(cache->peak_allocated_bytes(), 3 * cache->block_bytes());
  cache->free_sequence(0);
  EXPECT_EQ(cache->allocated_bytes(), 0u);
  EXPECT_EQ(cache->pool().n_free(), 8);
  EXPECT_TRUE(cache->check().is_ok()) << cache->check().message();
}

TEST(PagedKvCache, RunningOutIsACleanErrorThatChangesNothing) {
  auto cache = make_cache(4, 3);
  ASSERT_TRUE(cache->reserve(0, 6).is_ok());  // 2 blocks
  write(*cache, 0, 0, 6, 0);
  const auto queue = cache->pool().free_queue();
  auto status = cache->reserve(1, 5);  // needs 2, 1 free
  ASSERT_FALSE(status.is_ok());
  EXPECT_NE(status.message().find("out of memory"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("needs 2 more blocks"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("1 of 3 are free"), std::string::npos) << status.message();
  EXPECT_FALSE(cache->holds(1));
  EXPECT_EQ(cache->pool().free_queue(), queue);
  // A batch step is planned as a whole: seq 0 could grow, seq 1 could not, so neither does.
  const PositionsRequest step[] = {{0, 9}, {1, 1}};
  ASSERT_FALSE(cache->reserve_all(step).is_ok());
  EXPECT_EQ(cache->length(0), 6);
  EXPECT_EQ(cache->block_table(0).size(), 2u);
  EXPECT_EQ(cache->pool().free_queue(), queue);
  EXPECT_TRUE(cache->check().is_ok()) << cache->check().message();
  EXPECT_EQ(reader(*cache, 0, 6), 0);
  // Freeing a sequence makes room again.
  cache->free_sequence(0);
  EXPECT_TRUE(cache->reserve(1, 12).is_ok());
  EXPECT_TRUE(cache->check().is_ok()) << cache->check().message();
  EXPECT_FALSE(cache->reserve(-1, 1).is_ok());
}

// Sequence 0 computes a 10-token prompt with blocks of 4; sequence 1's prompt starts with the
// same 9 tokens: it is handed the two full blocks (8 positions) and computes from position 8.
TEST(PagedKvCache, PrefixIsFoundByHashAndShared) {
  auto cache = make_cache(4, 8);
  const std::vector<int32_t> a = iota_tokens(10);
  ASSERT_TRUE(cache->reserve(0, 10).is_ok());
  write(*cache, 0, 0, 10, 0);
  cache->register_full_blocks(0, a);
  EXPECT_EQ(cache->pool().n_cached(), 2);  // only full blocks are hashed
  std::vector<int32_t> b = iota_tokens(9);
  b.push_back(99);
  b.push_back(98);
  EXPECT_EQ(cache->cached_prefix_length(b), 8);
  auto matched = cache->match_prefix(1, b);
  ASSERT_TRUE(matched.is_ok());
  EXPECT_EQ(matched.value(), 8);
  EXPECT_EQ(cache->block_table(1), (std::vector<int>{0, 1}));
  EXPECT_EQ(cache->pool().ref_count(0), 2);
  ASSERT_TRUE(cache->reserve(1, 11).is_ok());
  EXPECT_EQ(cache->copies(), 0);  // the new positions fall in a new block
  write(*cache, 1, 8, 11, 1);
  EXPECT_EQ(reader(*cache, 1, 8), 0);  // positions 0..7 are sequence 0's bits
  EXPECT_EQ(reader(*cache, 0, 10), 0);
  // Same tokens at other offsets do not match: the hash chains on the whole prefix.
  std::vector<int32_t> shifted = a;
  shifted[0] = 50;
  EXPECT_EQ(cache->cached_prefix_length(shifted), 0);
  std::vector<int32_t> second_block_differs = a;
  second_block_differs[5] = 77;
  EXPECT_EQ(cache->cached_prefix_length(second_block_differs), 4);
  auto again = cache->match_prefix(1, b);  // the sequence already holds positions
  EXPECT_FALSE(again.is_ok());
  EXPECT_TRUE(cache->check().is_ok()) << cache->check().message();
}

// The whole prompt is cached (two full blocks): the sequence is handed both but its last
// position must be recomputed for logits, so reserve() copies the last block before that write
// and the cached original stays intact for others.
TEST(PagedKvCache, WholePromptHitCopiesTheLastBlockOnWrite) {
  auto cache = make_cache(4, 8);
  const std::vector<int32_t> prompt = iota_tokens(8);
  ASSERT_TRUE(cache->reserve(0, 8).is_ok());
  write(*cache, 0, 0, 8, 0);
  cache->register_full_blocks(0, prompt);
  cache->free_sequence(0);
  EXPECT_EQ(cache->pool().n_cached(), 2);
  EXPECT_EQ(cache->pool().n_used(), 0);

  auto matched = cache->match_prefix(1, prompt);
  ASSERT_TRUE(matched.is_ok());
  EXPECT_EQ(matched.value(), 7);
  EXPECT_EQ(cache->block_table(1), (std::vector<int>{0, 1}));
  EXPECT_TRUE(cache->check().is_ok()) << cache->check().message();
  ASSERT_TRUE(cache->reserve(1, 8).is_ok());
  EXPECT_EQ(cache->copies(), 1);
  ASSERT_EQ(cache->block_table(1).size(), 2u);
  EXPECT_EQ(cache->block_table(1)[0], 0);
  const int copy = cache->block_table(1)[1];
  EXPECT_NE(copy, 1);
  EXPECT_EQ(reader(*cache, 1, 8), 0);  // the copy carries positions 4..7
  write(*cache, 1, 7, 8, 1);           // rewriting position 7 touches only the copy
  EXPECT_EQ(reader(*cache, 1, 7), 0);
  EXPECT_EQ(cache->pool().ref_count(1), 0);
  EXPECT_EQ(cache->pool().find(*cache->pool().hash(1)), 1);  // original still cached
  auto other = cache->match_prefix(2, prompt);
  ASSERT_TRUE(other.is_ok());
  EXPECT_EQ(cache->block_table(2), (std::vector<int>{0, 1}));
  EXPECT_EQ(reader(*cache, 2, 8), 0);
  EXPECT_TRUE(cache->check().is_ok()) << cache->check().message();
}

// A fork shares every block, the half-full last one too; the first writer copies it.
TEST(PagedKvCache, ForkCopiesTheSharedPartialBlockOnWrite) {
  auto cache = make_cache(4, 8);
  ASSERT_TRUE(cache->reserve(0, 6).is_ok());
  write(*cache, 0, 0, 6, 0);
  ASSERT_TRUE(cache->fork_sequence(0, 1).is_ok());
  EXPECT_EQ(cache->block_table(1), cache->block_table(0));
  EXPECT_EQ(cache->pool().ref_count(1), 2);
  EXPECT_EQ(cache->pool().n_used(), 2);              // a fork takes no memory
  EXPECT_FALSE(cache->fork_sequence(0, 1).is_ok());  // slot in use
  EXPECT_FALSE(cache->fork_sequence(5, 6).is_ok());  // nothing to fork

  ASSERT_TRUE(cache->reserve(1, 7).is_ok());  // writes position 6, inside shared block 1
  EXPECT_EQ(cache->copies(), 1);
  EXPECT_EQ(cache->block_table(1)[0], 0);  // the full block stays shared
  EXPECT_NE(cache->block_table(1)[1], 1);
  EXPECT_EQ(cache->pool().ref_count(1), 1);
  write(*cache, 1, 6, 7, 1);
  ASSERT_TRUE(cache->reserve(0, 7).is_ok());  // block 1 is now private to sequence 0
  EXPECT_EQ(cache->copies(), 1);
  write(*cache, 0, 6, 7, 0);
  EXPECT_EQ(reader(*cache, 0, 7), 0);
  EXPECT_EQ(reader(*cache, 1, 6), 0);
  EXPECT_EQ(key_at(*cache, 1, 0, 6)[0], tag(1, 0, 6, 0));
  EXPECT_EQ(cache->held_positions(), 4 + 3 + 3);
  EXPECT_TRUE(cache->check().is_ok()) << cache->check().message();
}

// Freed prompts stay cached until memory is needed; then the least recently used prefix goes
// first, its tail block before its head.
TEST(PagedKvCache, CachedPrefixesAreEvictedLeastRecentlyUsedFirst) {
  auto cache = make_cache(2, 6);
  const std::vector<int32_t> a = {1, 2, 3, 4}, b = {5, 6, 7, 8};
  for (int seq : {0, 1}) {
    const auto& tokens = seq == 0 ? a : b;
    ASSERT_TRUE(cache->reserve(seq, 4).is_ok());
    write(*cache, seq, 0, 4, seq);
    cache->register_full_blocks(seq, tokens);
  }
  cache->free_sequence(0);  // a's blocks 0, 1
  cache->free_sequence(1);  // b's blocks 2, 3
  EXPECT_EQ(cache->pool().free_queue(), (std::vector<int>{4, 5, 1, 0, 3, 2}));
  EXPECT_EQ(cache->cached_prefix_length(std::vector<int32_t>{1, 2, 3, 4, 9}), 4);
  // A new sequence needs 4 blocks: the two plain ones, then a's tail, then a's head.
  ASSERT_TRUE(cache->reserve(2, 7).is_ok());
  EXPECT_EQ(cache->block_table(2), (std::vector<int>{4, 5, 1, 0}));
  EXPECT_EQ(cache->cached_prefix_length(std::vector<int32_t>{1, 2, 3, 4, 9}), 0);
  EXPECT_EQ(cache->cached_prefix_length(std::vector<int32_t>{5, 6, 7, 8, 9}), 4);
  auto hit = cache->match_prefix(3, std::vector<int32_t>{5, 6, 7, 8, 9});
  ASSERT_TRUE(hit.is_ok());
  EXPECT_EQ(hit.value(), 4);
  EXPECT_EQ(reader(*cache, 3, 4), 1);
  EXPECT_TRUE(cache->check().is_ok()) << cache->check().message();
}

TEST(PagedKvCache, BlockOfOnePositionWorks) {
  auto cache = make_cache(1, 6);
  const std::vector<int32_t> prompt = {4, 5, 6};
  ASSERT_TRUE(cache->reserve(0, 3).is_ok());
  write(*cache, 0, 0, 3, 0);
  cache->register_full_blocks(0, prompt);
  EXPECT_EQ(cache->pool().n_cached(), 3);
  auto hit = cache->match_prefix(1, prompt);
  ASSERT_TRUE(hit.is_ok());
  EXPECT_EQ(hit.value(), 2);
  EXPECT_EQ(cache->block_table(1).size(), 3u);  // holds the block it will recompute
  EXPECT_TRUE(cache->check().is_ok()) << cache->check().message();
  ASSERT_TRUE(cache->reserve(1, 3).is_ok());
  EXPECT_EQ(cache->copies(), 1);
  EXPECT_EQ(reader(*cache, 1, 3), 0);
  EXPECT_TRUE(cache->check().is_ok()) << cache->check().message();
}

// In one batch, a prompt that shares an uncached block with an earlier one waits a wave.
TEST(PagedKvCache, SharedPrefillsAreDeferredOneWave) {
  auto cache = make_cache(4, 16);
  const std::vector<std::vector<int32_t>> prompts = {
      iota_tokens(10), iota_tokens(6, 50), iota_tokens(9), {1, 2, 3}, iota_tokens(5)};
  std::vector<int> wave = {0, 1, 2, 3, 4};
  std::vector<int> later = defer_shared_prefills(*cache, prompts, &wave);
  EXPECT_EQ(wave, (std::vector<int>{0, 1, 3}));  // prompt 3 has no full block to share
  EXPECT_EQ(later, (std::vector<int>{2, 4}));
  // Once prompt 0's blocks are cached, nobody waits.
  ASSERT_TRUE(cache->reserve(0, 10).is_ok());
  cache->register_full_blocks(0, prompts[0]);
  wave = later;
  EXPECT_TRUE(defer_shared_prefills(*cache, prompts, &wave).empty());
  EXPECT_EQ(wave, (std::vector<int>{2, 4}));
}

}  // namespace
}  // namespace kvlm
