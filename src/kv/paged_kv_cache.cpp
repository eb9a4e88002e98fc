#include "kv/paged_kv_cache.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <new>
#include <string>
#include <unordered_set>

#include "util/splitmix64.h"

namespace kvlm {

namespace {

constexpr BlockHash kRootHash = 0xcbf29ce484222325ull;  // the "parent" of a prompt's first block

int div_up(int64_t a, int b) {
  return static_cast<int>((a + b - 1) / b);
}

}  // namespace

Result<std::unique_ptr<PagedKvCache>> PagedKvCache::create(int n_layer, int kv_dim,
                                                           const PagedKvCacheOptions& options) {
  const int B = options.block_size;
  if (B < 1 || B > (1 << 16))
    return Status::error("paged KV cache: --block-size must be in [1, 65536], found " +
                         std::to_string(B));
  if (n_layer < 1 || kv_dim < 1)
    return Status::error("paged KV cache: n_layer and kv_dim must be positive");
  KVLM_RETURN_IF_ERROR(validate_kv_storage(options.storage, n_layer, kv_dim));
  const size_t block_bytes =
      2 * static_cast<size_t>(n_layer) * B * kv_row_bytes(options.storage.dtype, kv_dim);
  int64_t n_blocks = 0;
  if (options.kv_memory_bytes > 0) {
    n_blocks = static_cast<int64_t>(options.kv_memory_bytes / block_bytes);
    if (n_blocks < 1)
      return Status::error("paged KV cache: --kv-memory " +
                           std::to_string(options.kv_memory_bytes) +
                           " bytes holds no block: one block of " + std::to_string(B) +
                           " positions takes " + std::to_string(block_bytes) + " bytes");
    if (options.token_budget > 0)
      n_blocks = std::min<int64_t>(n_blocks, div_up(options.token_budget, B));
  } else if (options.token_budget > 0) {
    n_blocks = div_up(options.token_budget, B);
  } else {
    return Status::error("paged KV cache: give a memory size in bytes or a token budget");
  }
  if (n_blocks > (1 << 30))
    return Status::error("paged KV cache: " + std::to_string(n_blocks) +
                         " blocks is more than this cache can index (2^30)");
  std::unique_ptr<PagedKvCache> cache(
      new PagedKvCache(n_layer, kv_dim, B, static_cast<int>(n_blocks), options.storage));
  // Zero-filled: zeros make any bug reproducible (as in the contiguous cache), and the system
  // hands out the pages of a large arena only as blocks are first touched (2 MiB at a time
  // where it gives huge pages: attention streams the blocks).
  const size_t n_bytes = cache->block_half_bytes_ * n_blocks;
  try {
    cache->keys_ = HugePageBuffer(n_bytes);
    cache->values_ = HugePageBuffer(n_bytes);
  } catch (const std::bad_alloc&) {
    return Status::error("paged KV cache: could not allocate an arena of " +
                         std::to_string(2 * n_bytes) + " bytes");
  }
  return cache;
}

PagedKvCache::PagedKvCache(int n_layer, int kv_dim, int block_size, int n_blocks,
                           const KvStorageOptions& storage)
    : n_layer_(n_layer),
      kv_dim_(kv_dim),
      block_size_(block_size),
      codec_(storage, n_layer, kv_dim),
      window_(storage.window),
      block_half_bytes_(static_cast<size_t>(n_layer) * block_size * codec_.row_bytes()),
      pool_(n_blocks),
      block_tokens_(static_cast<size_t>(n_blocks) * block_size),
      block_parent_(n_blocks) {}

PagedKvCache::Sequence& PagedKvCache::slot(int seq) {
  if (seq >= n_slots()) seqs_.resize(seq + 1);
  return seqs_[seq];
}

void PagedKvCache::write_row(int seq, int layer, int pos, const float* k, const float* v) {
  const size_t offset = row_offset(seq, layer, pos);
  codec_.encode_key(keys_.data() + offset, layer, k);
  codec_.encode_value(values_.data() + offset, layer, v);
}

void PagedKvCache::runs(int seq, int layer, int n_positions, std::vector<KvRun>* out) const {
  const Sequence& s = seqs_[seq];
  const size_t layer_offset = static_cast<size_t>(layer) * block_size_ * codec_.row_bytes();
  for (int first = 0, i = 0; first < n_positions; first += block_size_, ++i) {
    const size_t offset = block_offset(s.table[i]) + layer_offset;
    out->push_back(
        {keys_.data() + offset, values_.data() + offset, std::min(block_size_, n_positions - first)});
  }
}

void PagedKvCache::range_runs(int seq, int layer, int begin, int end,
                              std::vector<KvRun>* out) const {
  const Sequence& s = seqs_[seq];
  const size_t row_bytes = codec_.row_bytes();
  const size_t layer_offset = static_cast<size_t>(layer) * block_size_ * row_bytes;
  for (int pos = begin; pos < end;) {
    const int row = pos % block_size_;
    const int n = std::min(block_size_ - row, end - pos);
    const size_t offset = block_offset(s.table[pos / block_size_]) + layer_offset + row * row_bytes;
    out->push_back({keys_.data() + offset, values_.data() + offset, n});
    pos += n;
  }
}

void PagedKvCache::evict_outside_window(int seq) {
  if (!window_.enabled() || !holds(seq)) return;
  Sequence& s = seqs_[seq];
  const int64_t keep_from = window_.recent_begin(s.length);
  // Blocks holding a sink are never evicted; past them, evict while a block ends before the
  // window's recent part, oldest first.
  int i = std::max(s.evict_cursor, div_up(window_.sinks, block_size_));
  for (; i < static_cast<int>(s.table.size()) &&
         static_cast<int64_t>(i + 1) * block_size_ <= keep_from;
       ++i) {
    if (s.table[i] == kEvicted) continue;
    pool_.release(s.table[i]);
    s.table[i] = kEvicted;
  }
  s.evict_cursor = i;
}

int64_t PagedKvCache::window_blocks_bound(int64_t n_positions, int chunk_tokens) const {
  const int64_t all = div_up(n_positions, block_size_);
  if (!window_.enabled()) return all;
  // Sinks' blocks, plus the recent part of the first row's view and the chunk after it, which
  // may straddle one more block boundary.
  const int64_t recent = static_cast<int64_t>(window_.window - window_.sinks - 1) + chunk_tokens;
  return std::min<int64_t>(all,
                           div_up(window_.sinks, block_size_) + div_up(recent, block_size_) + 1);
}

int PagedKvCache::blocks_needed(int seq, int n_positions) const {
  if (seq >= n_slots()) return div_up(n_positions, block_size_);
  const Sequence& s = seqs_[seq];
  if (n_positions <= s.length) return 0;
  const int have = static_cast<int>(s.table.size());
  const int want = div_up(n_positions, block_size_);
  int needed = std::max(0, want - have);
  // Existing blocks that positions [length, n) fall into must be private before the write.
  for (int i = s.length / block_size_; i < std::min(have, want); ++i)
    needed += must_copy(s.table[i]);
  return needed;
}

void PagedKvCache::commit_reserve(int seq, int n_positions) {
  Sequence& s = slot(seq);
  if (n_positions <= s.length) return;
  const int have = static_cast<int>(s.table.size());
  const int want = div_up(n_positions, block_size_);
  for (int i = s.length / block_size_; i < std::min(have, want); ++i) {
    const int shared = s.table[i];
    if (!must_copy(shared)) continue;
    std::vector<int> fresh;
    pool_.allocate(1, &fresh);  // cannot fail: blocks_needed() counted it
    std::memcpy(keys_.data() + block_offset(fresh[0]), keys_.data() + block_offset(shared),
                block_half_bytes_);
    std::memcpy(values_.data() + block_offset(fresh[0]), values_.data() + block_offset(shared),
                block_half_bytes_);
    pool_.release(shared);
    s.table[i] = fresh[0];
    ++copies_;
  }
  if (want > have) pool_.allocate(want - have, &s.table);
  s.length = n_positions;
  peak_used_ = std::max(peak_used_, pool_.n_used());
}

Status PagedKvCache::out_of_memory(const std::string& who, int needed) const {
  return Status::error("KV cache out of memory: " + who + " needs " + std::to_string(needed) +
                       " more blocks of " + std::to_string(block_size_) + " positions but " +
                       std::to_string(pool_.n_free()) + " of " + std::to_string(n_blocks()) +
                       " are free (arena " + std::to_string(arena_bytes()) +
                       " bytes); raise --kv-memory or run fewer or shorter sequences");
}

Status PagedKvCache::reserve(int seq, int n_positions) {
  PositionsRequest request{seq, n_positions};
  return reserve_all({&request, 1});
}

Status PagedKvCache::check_reserved(int seq, int n_positions) const {
  if (length(seq) < n_positions)
    return Status::error("KV cache: sequence " + std::to_string(seq) + " has " +
                         std::to_string(length(seq)) +
                         " positions reserved, the step writes up to " +
                         std::to_string(n_positions) + " (reserve before the forward pass)");
  return Status::ok();
}

Status PagedKvCache::reserve_all(std::span<const PositionsRequest> requests) {
  // A sequence named twice needs only its larger request.
  std::map<int, int> wanted;
  for (const PositionsRequest& r : requests) {
    if (r.seq < 0) return Status::error("KV cache: no sequence " + std::to_string(r.seq));
    if (r.n_positions < 0)
      return Status::error("KV cache: negative position count " + std::to_string(r.n_positions));
    wanted[r.seq] = std::max(wanted[r.seq], r.n_positions);
  }
  // Blocks no future row reads go first (changing no result, so also when the plan fails).
  for (const auto& [seq, n] : wanted) evict_outside_window(seq);
  // Counted per sequence, a block two sequences share is counted twice though only the first
  // to write copies it: the plan may refuse at the very edge of memory, never overcommit.
  int needed = 0;
  for (const auto& [seq, n] : wanted) needed += blocks_needed(seq, n);
  if (needed > pool_.n_free()) {
    const std::string who = wanted.size() == 1
                                ? "sequence " + std::to_string(wanted.begin()->first)
                                : "a step of " + std::to_string(wanted.size()) + " sequences";
    return out_of_memory(who, needed);
  }
  for (const auto& [seq, n] : wanted) commit_reserve(seq, n);
  return Status::ok();
}

BlockHash PagedKvCache::hash_block(BlockHash parent, std::span<const int32_t> tokens) const {
  uint64_t h = splitmix64_mix(parent ^ kSplitmixGamma);
  for (int32_t t : tokens)
    h = splitmix64_mix(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(t)) + 1));
  return h;
}

std::optional<int> PagedKvCache::find_block(BlockHash parent,
                                            std::span<const int32_t> tokens) const {
  auto block = pool_.find(hash_block(parent, tokens));
  if (!block || block_parent_[*block] != parent) return std::nullopt;
  const int32_t* stored = block_tokens_.data() + static_cast<size_t>(*block) * block_size_;
  if (!std::equal(tokens.begin(), tokens.end(), stored)) return std::nullopt;
  return block;
}

std::vector<BlockHash> PagedKvCache::block_hashes(std::span<const int32_t> tokens) const {
  std::vector<BlockHash> hashes;
  BlockHash h = kRootHash;
  for (size_t first = 0; first + block_size_ <= tokens.size(); first += block_size_) {
    h = hash_block(h, tokens.subspan(first, block_size_));
    hashes.push_back(h);
  }
  return hashes;
}

int PagedKvCache::cached_prefix_length(std::span<const int32_t> tokens) const {
  BlockHash parent = kRootHash;
  size_t matched = 0;
  for (; matched + block_size_ <= tokens.size(); matched += block_size_) {
    auto block = tokens.subspan(matched, block_size_);
    if (!find_block(parent, block)) break;
    parent = hash_block(parent, block);
  }
  return static_cast<int>(std::min(matched, tokens.empty() ? 0 : tokens.size() - 1));
}

Result<int> PagedKvCache::match_prefix(int seq, std::span<const int32_t> tokens) {
  if (seq < 0) return Status::error("KV cache: no sequence " + std::to_string(seq));
  if (holds(seq))
    return Status::error("KV cache: match_prefix starts a sequence, but sequence " +
                         std::to_string(seq) + " already holds " + std::to_string(length(seq)) +
                         " positions");
  Sequence& s = slot(seq);
  s = Sequence{};
  s.chain = kRootHash;
  for (size_t first = 0; first + block_size_ <= tokens.size(); first += block_size_) {
    auto block_tokens = tokens.subspan(first, block_size_);
    auto block = find_block(s.chain, block_tokens);
    if (!block) break;
    pool_.add_ref(*block);
    s.table.push_back(*block);
    s.chain = hash_block(s.chain, block_tokens);
    ++s.n_committed;
  }
  const int64_t matched = static_cast<int64_t>(s.table.size()) * block_size_;
  s.length = static_cast<int>(std::min<int64_t>(matched, static_cast<int64_t>(tokens.size()) - 1));
  s.length = std::max(s.length, 0);
  peak_used_ = std::max(peak_used_, pool_.n_used());
  evict_outside_window(seq);
  return s.length;
}

void PagedKvCache::register_full_blocks(int seq, std::span<const int32_t> tokens) {
  if (!holds(seq)) return;
  Sequence& s = seqs_[seq];
  const size_t written = std::min<size_t>(tokens.size(), s.length);
  if (s.n_committed == 0) s.chain = kRootHash;
  for (size_t first = static_cast<size_t>(s.n_committed) * block_size_;
       first + block_size_ <= written; first += block_size_) {
    auto block_tokens = tokens.subspan(first, block_size_);
    const BlockHash parent = s.chain;
    s.chain = hash_block(parent, block_tokens);
    const int block = s.table[s.n_committed++];
    if (block == kEvicted) continue;  // the window released it (it was registered before)
    // A block already cached (a prefix hit) or whose prefix another block already caches
    // (computed twice in one batch) stays as it is; the chain goes on either way.
    if (!pool_.set_hash(block, s.chain)) continue;
    block_parent_[block] = parent;
    std::copy(block_tokens.begin(), block_tokens.end(),
              block_tokens_.begin() + static_cast<size_t>(block) * block_size_);
  }
}

Status PagedKvCache::fork_sequence(int src, int dst) {
  if (!holds(src))
    return Status::error("KV cache: cannot fork sequence " + std::to_string(src) +
                         ": it holds nothing");
  if (dst < 0 || holds(dst))
    return Status::error("KV cache: cannot fork into sequence " + std::to_string(dst) +
                         ": it is in use");
  Sequence copy = seqs_[src];
  for (int block : copy.table)
    if (block != kEvicted) pool_.add_ref(block);
  slot(dst) = std::move(copy);
  return Status::ok();
}

void PagedKvCache::free_sequence(int seq) {
  if (seq < 0 || seq >= n_slots()) return;
  Sequence& s = seqs_[seq];
  // Last block first: the cached blocks of a prefix's tail are then evicted before its head,
  // which more prompts share.
  for (auto it = s.table.rbegin(); it != s.table.rend(); ++it)
    if (*it != kEvicted) pool_.release(*it);
  s = Sequence{};
}

int64_t PagedKvCache::held_positions() const {
  std::vector<int> fill(n_blocks(), 0);
  for (const Sequence& s : seqs_)
    for (size_t i = 0; i < s.table.size(); ++i) {
      if (s.table[i] == kEvicted) continue;
      const int rows = std::clamp(s.length - static_cast<int>(i) * block_size_, 0, block_size_);
      fill[s.table[i]] = std::max(fill[s.table[i]], rows);
    }
  int64_t total = 0;
  for (int rows : fill) total += rows;
  return total;
}

Status PagedKvCache::check() const {
  KVLM_RETURN_IF_ERROR(pool_.check());
  std::vector<int> refs(n_blocks(), 0);
  for (int seq = 0; seq < n_slots(); ++seq) {
    const Sequence& s = seqs_[seq];
    const std::string which = "KV cache: sequence " + std::to_string(seq);
    // A whole-prompt prefix hit holds the block of the position it is about to recompute.
    const int n_blocks_held = static_cast<int>(s.table.size());
    if (n_blocks_held < div_up(s.length, block_size_) ||
        n_blocks_held > div_up(s.length + 1, block_size_))
      return Status::error(which + " has " + std::to_string(n_blocks_held) + " blocks for " +
                           std::to_string(s.length) + " positions");
    if (s.n_committed > static_cast<int>(s.table.size()))
      return Status::error(which + " committed more blocks than it holds");
    for (size_t i = 0; i < s.table.size(); ++i) {
      const int b = s.table[i];
      if (b == kEvicted) {
        // Only a block no row at or after the sequence's length reads may be gone.
        const int64_t last = static_cast<int64_t>(i + 1) * block_size_ - 1;
        if (!window_.evicted(static_cast<int64_t>(i) * block_size_, s.length) ||
            !window_.evicted(last, s.length))
          return Status::error(which + " evicted block " + std::to_string(i) +
                               ", which its window still reads");
        continue;
      }
      if (b < 0 || b >= n_blocks())
        return Status::error(which + " names no block " + std::to_string(b));
      ++refs[b];
    }
  }
  for (int b = 0; b < n_blocks(); ++b)
    if (refs[b] != pool_.ref_count(b))
      return Status::error("KV cache: block " + std::to_string(b) + " is in " +
                           std::to_string(refs[b]) + " tables but has " +
                           std::to_string(pool_.ref_count(b)) + " references");
  return Status::ok();
}

std::vector<int> defer_shared_prefills(const PagedKvCache& cache,
                                       const std::vector<std::vector<int32_t>>& prompts,
                                       std::vector<int>* wave) {
  std::unordered_set<BlockHash> claimed;  // uncached blocks this wave will compute
  std::vector<int> now, later;
  for (int s : *wave) {
    const std::vector<BlockHash> hashes = cache.block_hashes(prompts[s]);
    const bool waits = std::any_of(hashes.begin(), hashes.end(),
                                   [&](BlockHash h) { return claimed.count(h) > 0; });
    (waits ? later : now).push_back(s);
    if (waits) continue;
    // Planning only: a hash hit that fails verification merely costs a missed deferral.
    for (BlockHash h : hashes)
      if (!cache.pool().find(h)) claimed.insert(h);
  }
  *wave = std::move(now);
  return later;
}

}  // namespace kvlm
