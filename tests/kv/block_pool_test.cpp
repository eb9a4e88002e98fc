// BlockPool without a model: exact allocation and eviction orders, reference counts, the hash
// map, and "no room" as a return value that changes nothing.
#include "kv/block_pool.h"

#include <gtest/gtest.h>

namespace kvlm {
namespace {

using Ids = std::vector<int>;

TEST(BlockPool, FreshPoolHandsOutIdsInOrder) {
  BlockPool pool(4);
  EXPECT_EQ(pool.n_blocks(), 4);
  EXPECT_EQ(pool.n_free(), 4);
  EXPECT_EQ(pool.free_queue(), (Ids{0, 1, 2, 3}));
  Ids got;
  ASSERT_TRUE(pool.allocate(3, &got));
  EXPECT_EQ(got, (Ids{0, 1, 2}));
  EXPECT_EQ(pool.n_free(), 1);
  EXPECT_EQ(pool.n_used(), 3);
  for (int b : got) EXPECT_EQ(pool.ref_count(b), 1);
  EXPECT_EQ(pool.ref_count(3), 0);
  EXPECT_TRUE(pool.check().is_ok()) << pool.check().message();
}

TEST(BlockPool, RunningOutIsAReturnValueThatChangesNothing) {
  BlockPool pool(3);
  Ids got;
  ASSERT_TRUE(pool.allocate(2, &got));
  const Ids queue = pool.free_queue();
  EXPECT_FALSE(pool.allocate(2, &got));
  EXPECT_EQ(got, (Ids{0, 1}));
  EXPECT_EQ(pool.free_queue(), queue);
  EXPECT_EQ(pool.n_free(), 1);
  EXPECT_FALSE(pool.allocate(-1, &got));
  EXPECT_TRUE(pool.allocate(0, &got));
  EXPECT_EQ(got.size(), 2u);
  EXPECT_TRUE(pool.check().is_ok());
  BlockPool empty(0);
  EXPECT_FALSE(empty.allocate(1, &got));
  EXPECT_TRUE(empty.check().is_ok());
}

TEST(BlockPool, ReferenceCountsKeepSharedBlocksHeld) {
  BlockPool pool(2);
  Ids got;
  ASSERT_TRUE(pool.allocate(1, &got));
  pool.add_ref(0);  // a second sequence shares it
  EXPECT_EQ(pool.ref_count(0), 2);
  pool.release(0);
  EXPECT_EQ(pool.ref_count(0), 1);
  EXPECT_EQ(pool.free_queue(), (Ids{1}));  // still held
  pool.release(0);
  EXPECT_EQ(pool.ref_count(0), 0);
  EXPECT_EQ(pool.free_queue(), (Ids{0, 1}));  // unhashed: back to the front
  pool.release(0);                            // an extra release is ignored
  EXPECT_EQ(pool.ref_count(0), 0);
  EXPECT_TRUE(pool.check().is_ok()) << pool.check().message();
}

TEST(BlockPool, HashMapRegistersOnlyHeldUnhashedBlocksOnce) {
  BlockPool pool(3);
  Ids got;
  ASSERT_TRUE(pool.allocate(2, &got));
  EXPECT_FALSE(pool.set_hash(2, 7));  // free blocks cannot be cached
  EXPECT_TRUE(pool.set_hash(0, 7));
  EXPECT_FALSE(pool.set_hash(1, 7));  // the same prefix again: the first block stays
  EXPECT_FALSE(pool.set_hash(0, 8));  // already hashed
  EXPECT_EQ(pool.find(7), 0);
  EXPECT_EQ(pool.find(8), std::nullopt);
  EXPECT_EQ(pool.hash(0), 7u);
  EXPECT_EQ(pool.hash(1), std::nullopt);
  EXPECT_EQ(pool.n_cached(), 1);
  pool.clear_hash(0);
  EXPECT_EQ(pool.find(7), std::nullopt);
  EXPECT_EQ(pool.n_cached(), 0);
  EXPECT_TRUE(pool.check().is_ok()) << pool.check().message();
}

// The whole life of cached blocks: plain free blocks are reused before any cached one, cached
// ones are evicted least recently released first, a hit revives a block and makes it the most
// recently used, and eviction forgets the hash.
TEST(BlockPool, ExactEvictionOrder) {
  BlockPool pool(6);
  Ids got;
  ASSERT_TRUE(pool.allocate(6, &got));
  for (int b = 0; b < 4; ++b) ASSERT_TRUE(pool.set_hash(b, 100 + b));
  // Sequence A held blocks 0, 1 and frees its last block first.
  pool.release(1);
  pool.release(0);
  EXPECT_EQ(pool.free_queue(), (Ids{1, 0}));
  pool.release(4);  // unhashed: to the front
  EXPECT_EQ(pool.free_queue(), (Ids{4, 1, 0}));
  pool.release(3);
  pool.release(2);
  EXPECT_EQ(pool.free_queue(), (Ids{4, 1, 0, 3, 2}));
  pool.release(5);
  EXPECT_EQ(pool.free_queue(), (Ids{5, 4, 1, 0, 3, 2}));
  EXPECT_EQ(pool.n_cached(), 4);  // unreferenced cached blocks stay findable

  got.clear();
  ASSERT_TRUE(pool.allocate(3, &got));
  EXPECT_EQ(got, (Ids{5, 4, 1}));           // two plain blocks, then the oldest cached one
  EXPECT_EQ(pool.find(101), std::nullopt);  // evicted
  EXPECT_EQ(pool.hash(1), std::nullopt);
  EXPECT_EQ(pool.find(100), 0);
  EXPECT_EQ(pool.n_cached(), 3);

  pool.add_ref(3);  // a prefix hit on block 3 takes it out of the queue
  EXPECT_EQ(pool.ref_count(3), 1);
  EXPECT_EQ(pool.free_queue(), (Ids{0, 2}));
  pool.release(3);  // ... and releasing it makes it the most recently used
  EXPECT_EQ(pool.free_queue(), (Ids{0, 2, 3}));

  got.clear();
  ASSERT_TRUE(pool.allocate(2, &got));
  EXPECT_EQ(got, (Ids{0, 2}));
  EXPECT_EQ(pool.find(100), std::nullopt);
  EXPECT_EQ(pool.find(102), std::nullopt);
  EXPECT_EQ(pool.find(103), 3);
  EXPECT_EQ(pool.n_free(), 1);
  EXPECT_TRUE(pool.check().is_ok()) << pool.check().message();
}

// Random operations keep every invariant (checked after each one) and the counts agree with a
// simple model of who holds what.
TEST(BlockPool, RandomOperationsKeepInvariants) {
  BlockPool pool(16);
  std::vector<int> refs(16, 0);
  uint64_t state = 12345;
  auto next = [&state](int n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int>((state >> 33) % n);
  };
  for (int i = 0; i < 2000; ++i) {
    const int op = next(4);
    const int b = next(16);
    if (op == 0) {
      Ids got;
      const int n = next(4);
      const int free_before = pool.n_free();
      if (pool.allocate(n, &got)) {
        ASSERT_EQ(static_cast<int>(got.size()), n);
        for (int g : got) refs[g] = 1;
      } else {
        ASSERT_GT(n, free_before);
      }
    } else if (op == 1 && (refs[b] > 0 || pool.hash(b))) {  // held, or a cached hit
      pool.add_ref(b);
      ++refs[b];
    } else if (op == 2 && refs[b] > 0) {
      pool.release(b);
      --refs[b];
    } else if (op == 3 && refs[b] > 0) {
      pool.set_hash(b, next(8));
    }
    ASSERT_TRUE(pool.check().is_ok()) << "after operation " << i << ": " << pool.check().message();
    for (int k = 0; k < 16; ++k) ASSERT_EQ(pool.ref_count(k), refs[k]);
  }
}

}  // namespace
}  // namespace kvlm
