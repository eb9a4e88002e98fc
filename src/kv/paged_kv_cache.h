// PagedKvCache: a KV cache whose memory follows what is really cached. One arena, sized by
// bytes or by a token budget, is cut into blocks of `block_size` positions; each sequence
// holds a block table (position p lives in block table[p / B], row p % B) and attention reads
// one run per block. A sequence grows by taking a block when its last one is full, so nothing
// already cached is ever copied as it grows, and finishing a sequence returns its blocks.
//
// Prefix sharing, as in vLLM v1: every full block is registered in the BlockPool under a hash
// of its tokens chained on the hash of the blocks before it. A new sequence calls
// match_prefix() with its prompt and is handed the blocks of the longest cached prefix (their
// reference counts go up); its prefill then starts at the first uncached position. Freed
// sequences leave their full blocks behind as cached prefixes, evicted least recently used
// first when memory is needed. A block is never written while it is shared or cached: reserve()
// copies it first (copy on write), which is what lets a whole-prompt hit recompute its last
// position and lets fork_sequence() share a half-full block.
//
// Exactness: a position's K/V depend only on the tokens at and before it, computed by the
// same code whichever sequence or batch ran it, so a shared block holds the very bits the
// sequence would have written itself; attention reduces over positions in order across runs,
// so splitting a sequence into blocks changes nothing either.
//
// Sinks + sliding window (storage.window, docs/sliding_window.md): once no row at or after a
// sequence's length can attend to a block any more (every position in it is past the sinks and
// before the window's recent part), the block is evicted: released to the pool, its table entry
// marked kEvicted. A sequence then holds at most window_blocks_bound() blocks however long it
// runs. Eviction happens in evict_outside_window() (the engine calls it after each step),
// match_prefix() and reserve_all(); it frees only what no future row reads, so it never
// changes a bit of any result.
//
// Plan, then commit: reserve() and reserve_all() either make room for everything asked or
// return an error and change nothing. Metadata (tables, counts, hashes) is kept apart from the
// storage; the BlockPool holding most of it is tested without a model.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>
#include <vector>

#include "kv/block_pool.h"
#include "kv/kv_cache.h"
#include "util/huge_pages.h"

namespace kvlm {

struct PagedKvCacheOptions {
  int block_size = 16;         // B: positions per block
  size_t kv_memory_bytes = 0;  // arena size; the arena holds floor(bytes / block bytes) blocks
  // Without kv_memory_bytes: ceil(budget / B) blocks. With it: also the most blocks made, so a
  // huge --kv-memory for a small run costs no more than the run can use.
  int64_t token_budget = 0;
  KvStorageOptions storage;  // the rows' dtype (f32 by default)
};

// One sequence's need in reserve_all(): positions [0, n_positions) writable.
struct PositionsRequest {
  int seq = 0;
  int n_positions = 0;
};

class PagedKvCache final : public KvCache {
 public:
  // kv_dim = n_kv_head * head_dim. Fails on a block size < 1, an arena without a single block
  // or memory the system refuses.
  static Result<std::unique_ptr<PagedKvCache>> create(int n_layer, int kv_dim,
                                                      const PagedKvCacheOptions& options);

  // KvCache. reserve() takes the blocks that positions [length, n) need and copies any block
  // among them that is shared or cached (copy on write); it fails, changing nothing, when the
  // pool has too few free blocks. Positions below the sequence's length are never written again.
  Status reserve(int seq, int n_positions);
  Status check_reserved(int seq, int n_positions) const override;
  void write_row(int seq, int layer, int pos, const float* k, const float* v) override;
  void runs(int seq, int layer, int n_positions, std::vector<KvRun>* out) const override;
  void range_runs(int seq, int layer, int begin, int end, std::vector<KvRun>* out) const override;
  KvWindow window() const override { return window_; }
  KvRowFormat row_format(int layer) const override { return codec_.format(layer); }
  // Bytes of the blocks sequences hold now (cached prefixes nobody holds are not counted:
  // they are free memory that happens to remember something).
  size_t allocated_bytes() const override { return pool_.n_used() * block_bytes(); }

  // Reserves for several sequences at once: all of them or none (a batch step's plan).
  Status reserve_all(std::span<const PositionsRequest> requests);
  // The plan half of reserve(): blocks it would take (new ones plus copies on write). Running
  // out is this number exceeding n_free_blocks(), a value the scheduler acts on (it preempts),
  // not an error.
  int blocks_to_reserve(int seq, int n_positions) const { return blocks_needed(seq, n_positions); }
  int n_free_blocks() const { return pool_.n_free(); }

  // Starts sequence `seq` (which must hold nothing) on the longest cached prefix of `tokens`:
  // attaches those blocks and returns how many leading positions the sequence now has. At most
  // tokens.size() - 1: the last token's logits are needed, so it is always computed (when the
  // whole prompt is cached, its last block is copied before that position is rewritten).
  Result<int> match_prefix(int seq, std::span<const int32_t> tokens);
  // How many leading positions of `tokens` are cached now, with the same cap; attaches nothing.
  int cached_prefix_length(std::span<const int32_t> tokens) const;
  // Chain hashes of the full blocks of `tokens` (for planning which prompts share blocks).
  std::vector<BlockHash> block_hashes(std::span<const int32_t> tokens) const;
  // Tells the cache that `tokens` (the sequence's tokens from position 0) have their K/V
  // written up to min(tokens.size(), length): full blocks among them become cached prefixes
  // that later prompts find by hash.
  void register_full_blocks(int seq, std::span<const int32_t> tokens);
  // dst (which must hold nothing) shares every block of src, half-full last block included;
  // whichever writes into a shared block first copies it. Takes no memory.
  Status fork_sequence(int src, int dst);
  // Returns the sequence's blocks: full cached ones stay findable until evicted.
  void free_sequence(int seq);
  // With a window: releases the blocks of `seq` that no row at or after its length attends to.
  // Nothing without a window.
  void evict_outside_window(int seq);
  // The most blocks one sequence holds at once with the window when a step computes up to
  // `chunk_tokens` of its positions; without a window (or when it is smaller), all of
  // [0, n_positions).
  int64_t window_blocks_bound(int64_t n_positions, int chunk_tokens) const;
  static constexpr int kEvicted = -1;  // a block table entry whose block the window evicted

  bool holds(int seq) const { return seq >= 0 && seq < n_slots() && !seqs_[seq].table.empty(); }
  int length(int seq) const { return seq >= 0 && seq < n_slots() ? seqs_[seq].length : 0; }
  const std::vector<int>& block_table(int seq) const { return seqs_.at(seq).table; }

  int n_layer() const { return n_layer_; }
  int kv_dim() const { return kv_dim_; }
  int block_size() const { return block_size_; }
  int n_blocks() const { return pool_.n_blocks(); }
  size_t block_bytes() const { return 2 * block_half_bytes_; }
  KvDtype dtype() const { return codec_.dtype(); }
  size_t arena_bytes() const { return block_bytes() * n_blocks(); }
  const BlockPool& pool() const { return pool_; }
  // Rows of held blocks that hold a reserved position (each shared block counted once):
  // allocated_bytes() minus this, in rows, is the waste of half-full last blocks.
  int64_t held_positions() const;
  int64_t copies() const { return copies_; }  // blocks copied on write so far
  size_t peak_allocated_bytes() const { return peak_used_ * block_bytes(); }
  void reset_peak() { peak_used_ = pool_.n_used(); }
  // Every invariant of tables, reference counts and the pool; for tests.
  Status check() const;

 private:
  struct Sequence {
    std::vector<int> table;  // block ids: position p is in table[p / B] (kEvicted: gone)
    int length = 0;          // positions [0, length) reserved (written, or being written)
    int n_committed = 0;     // leading full blocks whose chain hash is computed
    BlockHash chain = 0;     // chain hash after those blocks
    int evict_cursor = 0;    // window: entries before it (past the sinks' blocks) are evicted
  };
  PagedKvCache(int n_layer, int kv_dim, int block_size, int n_blocks,
               const KvStorageOptions& storage);
  int n_slots() const { return static_cast<int>(seqs_.size()); }
  Sequence& slot(int seq);
  // Byte offset of position `pos` of `seq` in `layer`, in keys_ (and values_).
  size_t row_offset(int seq, int layer, int pos) const {
    const int block = seqs_[seq].table[pos / block_size_];
    return block_offset(block) +
           (static_cast<size_t>(layer) * block_size_ + pos % block_size_) * codec_.row_bytes();
  }
  size_t block_offset(int block) const { return static_cast<size_t>(block) * block_half_bytes_; }
  // Blocks reserve(seq, n) would take: new ones plus copies.
  int blocks_needed(int seq, int n_positions) const;
  bool must_copy(int block) const { return pool_.ref_count(block) > 1 || pool_.hash(block); }
  void commit_reserve(int seq, int n_positions);
  BlockHash hash_block(BlockHash parent, std::span<const int32_t> tokens) const;
  // The cached block holding `tokens` after `parent`, verified token by token.
  std::optional<int> find_block(BlockHash parent, std::span<const int32_t> tokens) const;
  Status out_of_memory(const std::string& who, int needed) const;

  int n_layer_;
  int kv_dim_;
  int block_size_;
  KvRowCodec codec_;
  KvWindow window_;
  size_t block_half_bytes_;  // n_layer * B * row_bytes: one block's K (or V)
  BlockPool pool_;
  std::vector<Sequence> seqs_;  // by slot; grows on first use
  // What each cached block holds, to verify a hash hit (a 64-bit hash alone could collide).
  std::vector<int32_t> block_tokens_;    // [n_blocks, B]
  std::vector<BlockHash> block_parent_;  // [n_blocks]
  int64_t copies_ = 0;
  int peak_used_ = 0;
  HugePageBuffer keys_;    // [n_blocks][n_layer][B] rows of row_bytes
  HugePageBuffer values_;  // [n_blocks][n_layer][B] rows of row_bytes
};

// Plans a batch's prefill so that a block several prompts share is computed once. `wave` holds
// the sequences (indices into `prompts`) about to be prefilled; those that need a full block
// which is not cached yet but which an earlier sequence of the wave will compute are moved out
// and returned: run them after this wave, when match_prefix() finds that block. The first
// sequence never waits, so each wave makes progress.
std::vector<int> defer_shared_prefills(const PagedKvCache& cache,
                                       const std::vector<std::vector<int32_t>>& prompts,
                                       std::vector<int>* wave);

}  // namespace kvlm
