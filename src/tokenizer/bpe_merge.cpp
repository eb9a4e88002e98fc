#include "tokenizer/bpe_merge.h"

#include <bit>
#include <queue>

namespace kvlm {
namespace {

// Below this many ids, rescanning for the best pair beats maintaining a heap.
constexpr size_t kRescanMax = 64;

}  // namespace

MergeTable::MergeTable(std::span<const MergeRule> rules) {
  const size_t capacity = std::bit_ceil(std::max<size_t>(16, rules.size() * 2));
  slots_.assign(capacity, Slot{kEmpty, 0, 0});
  mask_ = capacity - 1;
  shift_ = 64 - std::countr_zero(capacity);
  for (size_t rank = 0; rank < rules.size(); ++rank) {
    const MergeRule& r = rules[rank];
    const uint64_t key = pack(r.left, r.right);
    size_t i = slot_of(key);
    while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & mask_;
    if (slots_[i].key == kEmpty) ++size_;
    slots_[i] = Slot{key, static_cast<int32_t>(rank), r.merged};
  }
}

void bpe_merge_rescan(const MergeTable& table, std::vector<int32_t>* ids) {
  std::vector<int32_t>& v = *ids;
  size_t n = v.size();
  if (n < 2) return;
  // pairs[i] is the merge of v[i] and v[i + 1]. Short pieces keep it on the stack: this runs
  // once per word the merge cache has not seen.
  MergeTable::Hit local[kRescanMax];
  std::vector<MergeTable::Hit> spill;
  MergeTable::Hit* pairs = local;
  if (n - 1 > kRescanMax) {
    spill.resize(n - 1);
    pairs = spill.data();
  }
  for (size_t i = 0; i + 1 < n; ++i) pairs[i] = table.find(v[i], v[i + 1]);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i) {
      if (pairs[i].rank < pairs[best].rank) best = i;
    }
    if (pairs[best].rank == MergeTable::kNoRank) break;
    v[best] = pairs[best].merged;
    for (size_t i = best + 1; i + 1 < n; ++i) v[i] = v[i + 1];
    for (size_t i = best; i + 2 < n; ++i) pairs[i] = pairs[i + 1];
    --n;
    if (best > 0) pairs[best - 1] = table.find(v[best - 1], v[best]);
    if (best + 1 < n) pairs[best] = table.find(v[best], v[best + 1]);
  }
  v.resize(n);
}

void bpe_merge_heap(const MergeTable& table, std::vector<int32_t>* ids) {
  std::vector<int32_t>& v = *ids;
  const int32_t n = static_cast<int32_t>(v.size());
  if (n < 2) return;
  // A doubly linked list over positions; a merge keeps the left node and unlinks the right.
  std::vector<int32_t> prev(n), next(n);
  for (int32_t i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  // Candidates ordered by (rank, position): position order is text order, so ties go leftmost.
  // Entries are not removed when a merge invalidates them; a popped entry is checked instead.
  struct Candidate {
    int32_t rank, pos, left, right, merged;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto push = [&](int32_t pos) {
    if (pos < 0 || next[pos] < 0) return;
    const MergeTable::Hit hit = table.find(v[pos], v[next[pos]]);
    if (hit.rank != MergeTable::kNoRank)
      heap.push({hit.rank, pos, v[pos], v[next[pos]], hit.merged});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  std::vector<bool> alive(n, true);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    const int32_t right = next[c.pos];
    if (!alive[c.pos] || right < 0 || v[c.pos] != c.left || v[right] != c.right) continue;
    v[c.pos] = c.merged;
    alive[right] = false;
    next[c.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = c.pos;
    push(prev[c.pos]);
    push(c.pos);
  }
  size_t out = 0;
  for (int32_t i = 0; i >= 0; i = next[i]) v[out++] = v[i];
  v.resize(out);
}

void bpe_merge(const MergeTable& table, std::vector<int32_t>* ids) {
  if (ids->size() <= kRescanMax) {
    bpe_merge_rescan(table, ids);
  } else {
    bpe_merge_heap(table, ids);
  }
}

}  // namespace kvlm
