#include "kv/block_pool.h"

#include <string>

namespace kvlm {

BlockPool::BlockPool(int n_blocks) : blocks_(n_blocks > 0 ? n_blocks : 0) {
  // Ids in order, so a fresh pool hands out 0, 1, 2, ...
  for (int b = 0; b < this->n_blocks(); ++b) push_back(b);
}

void BlockPool::push_front(int block) {
  Block& b = blocks_[block];
  b.prev = -1;
  b.next = head_;
  if (head_ >= 0) blocks_[head_].prev = block;
  head_ = block;
  if (tail_ < 0) tail_ = block;
  b.queued = true;
  ++n_free_;
}

void BlockPool::push_back(int block) {
  Block& b = blocks_[block];
  b.next = -1;
  b.prev = tail_;
  if (tail_ >= 0) blocks_[tail_].next = block;
  tail_ = block;
  if (head_ < 0) head_ = block;
  b.queued = true;
  ++n_free_;
}

void BlockPool::unlink(int block) {
  Block& b = blocks_[block];
  if (b.prev >= 0)
    blocks_[b.prev].next = b.next;
  else
    head_ = b.next;
  if (b.next >= 0)
    blocks_[b.next].prev = b.prev;
  else
    tail_ = b.prev;
  b.prev = b.next = -1;
  b.queued = false;
  --n_free_;
}

bool BlockPool::allocate(int n, std::vector<int>* out) {
  if (n < 0 || n > n_free_) return false;
  for (int i = 0; i < n; ++i) {
    const int id = head_;
    unlink(id);
    Block& b = blocks_[id];
    if (b.hashed) {  // eviction: the cached prefix this block held is forgotten
      by_hash_.erase(b.hash);
      b.hashed = false;
    }
    b.ref_count = 1;
    out->push_back(id);
  }
  return true;
}

void BlockPool::add_ref(int block) {
  Block& b = blocks_[block];
  if (b.queued) unlink(block);
  ++b.ref_count;
}

void BlockPool::release(int block) {
  Block& b = blocks_[block];
  if (b.ref_count <= 0) return;  // a caller bug; check() would not notice a negative count
  if (--b.ref_count > 0) return;
  if (b.hashed)
    push_back(block);
  else
    push_front(block);
}

std::optional<int> BlockPool::find(BlockHash hash) const {
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return std::nullopt;
  return it->second;
}

bool BlockPool::set_hash(int block, BlockHash hash) {
  Block& b = blocks_[block];
  if (b.hashed || b.ref_count == 0 || by_hash_.count(hash)) return false;
  b.hashed = true;
  b.hash = hash;
  by_hash_.emplace(hash, block);
  return true;
}

void BlockPool::clear_hash(int block) {
  Block& b = blocks_[block];
  if (!b.hashed) return;
  by_hash_.erase(b.hash);
  b.hashed = false;
}

std::optional<BlockHash> BlockPool::hash(int block) const {
  if (!blocks_[block].hashed) return std::nullopt;
  return blocks_[block].hash;
}

std::vector<int> BlockPool::free_queue() const {
  std::vector<int> order;
  for (int b = head_; b >= 0 && order.size() <= blocks_.size(); b = blocks_[b].next)
    order.push_back(b);
  return order;
}

Status BlockPool::check() const {
  auto fail = [](const std::string& what) { return Status::error("block pool: " + what); };
  const std::vector<int> order = free_queue();
  if (order.size() > blocks_.size()) return fail("free queue has a cycle");
  if (static_cast<int>(order.size()) != n_free_)
    return fail("free queue holds " + std::to_string(order.size()) + " blocks but n_free is " +
                std::to_string(n_free_));
  int prev = -1;
  for (int b : order) {
    if (blocks_[b].prev != prev) return fail("block " + std::to_string(b) + " has a bad prev link");
    if (!blocks_[b].queued || blocks_[b].ref_count != 0)
      return fail("block " + std::to_string(b) + " is queued with " +
                  std::to_string(blocks_[b].ref_count) + " references");
    prev = b;
  }
  if (prev != tail_) return fail("tail is not the last queued block");
  int queued = 0;
  for (int b = 0; b < n_blocks(); ++b) {
    const Block& block = blocks_[b];
    queued += block.queued;
    if (!block.queued && block.ref_count <= 0)
      return fail("block " + std::to_string(b) + " is neither free nor referenced");
    if (block.hashed) {
      auto it = by_hash_.find(block.hash);
      if (it == by_hash_.end() || it->second != b)
        return fail("block " + std::to_string(b) + "'s hash does not map back to it");
    }
  }
  if (queued != n_free_) return fail("queued flags disagree with the free queue");
  for (const auto& [h, b] : by_hash_)
    if (b < 0 || b >= n_blocks() || !blocks_[b].hashed || blocks_[b].hash != h)
      return fail("hash map names block " + std::to_string(b) + " which does not carry that hash");
  return Status::ok();
}

}  // namespace kvlm
