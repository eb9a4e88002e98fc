// BlockPool: the metadata of a paged KV cache's blocks, and nothing else: which blocks are
// free, how many sequences hold each block, and which full blocks are cached prefixes found by
// hash. The K/V storage lives in PagedKvCache; this class never touches a float, so it is
// tested without a model (tests/kv/block_pool_test.cpp asserts exact eviction orders).
//
// As in vLLM v1's block_pool.py, a block is plain metadata (id, reference count, hash,
// intrusive links), and every block with no reference sits in one free queue:
//   front: blocks holding nothing worth keeping, then cached blocks, least recently used first
//   back:  the cached blocks released most recently
// allocate() takes from the front, so an unreferenced cached block is evicted (its hash
// forgotten) only when no plain free block is left, and then the least recently used first.
// Running out is a return value: allocate() either takes all it was asked for or nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "kvlm/status.h"

namespace kvlm {

// Hash of a full block's tokens chained on the hash of every block before it, so equal hashes
// mean (barring a 64-bit collision, which PagedKvCache also rules out) equal whole prefixes.
using BlockHash = uint64_t;

class BlockPool {
 public:
  explicit BlockPool(int n_blocks);

  int n_blocks() const { return static_cast<int>(blocks_.size()); }
  // Blocks allocate() can hand out now: unreferenced ones, cached or not.
  int n_free() const { return n_free_; }
  // Blocks held by at least one sequence.
  int n_used() const { return n_blocks() - n_free_; }
  // Blocks registered under a hash, referenced or not.
  int n_cached() const { return static_cast<int>(by_hash_.size()); }

  // Appends `n` blocks, each with one reference, to `out`, taken from the front of the free
  // queue (evicting the hash of any cached block taken). Returns false, changing nothing, when
  // fewer than `n` are free.
  bool allocate(int n, std::vector<int>* out);
  // Adds a reference to `block`; an unreferenced cached block leaves the free queue (a prefix
  // hit revives it).
  void add_ref(int block);
  // Drops a reference. At zero the block returns to the free queue: at the back if it is
  // cached (it will be evicted after every block released before it), at the front if not.
  void release(int block);

  // The cached block registered under `hash`, if any.
  std::optional<int> find(BlockHash hash) const;
  // Registers a held, unhashed block under `hash`. Returns false, changing nothing, when the
  // hash already names another block (the same prefix computed twice; the first one stays).
  bool set_hash(int block, BlockHash hash);
  // Forgets `block`'s hash (it must be held): used when its contents are about to change.
  void clear_hash(int block);

  int ref_count(int block) const { return blocks_[block].ref_count; }
  std::optional<BlockHash> hash(int block) const;
  // Free queue from front (next to allocate) to back. For tests and the consistency check.
  std::vector<int> free_queue() const;
  // Checks every invariant (queue links, counts, hash map both ways); an error names the first
  // broken one. For tests: after any sequence of calls the pool must pass.
  Status check() const;

 private:
  struct Block {
    int ref_count = 0;
    bool hashed = false;
    BlockHash hash = 0;
    int prev = -1;  // free queue links (indices; -1: end or not queued)
    int next = -1;
    bool queued = false;
  };
  void push_front(int block);
  void push_back(int block);
  void unlink(int block);

  std::vector<Block> blocks_;
  int head_ = -1;  // front of the free queue
  int tail_ = -1;  // back of the free queue
  int n_free_ = 0;
  std::unordered_map<BlockHash, int> by_hash_;
};

}  // namespace kvlm
