// The BPE merge step: given a piece of text as a sequence of token ids (initially one per byte),
// repeatedly merge the adjacent pair with the lowest merge rank, leftmost first, until no pair
// has a rank. This gives the same result as OpenAI's bpe(), which merges every occurrence of the
// best pair in one left-to-right pass: ranks are unique per pair and a merge never recreates the
// pair it consumed, so both orders perform the same merges.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kvlm {

struct MergeRule {
  int32_t left;
  int32_t right;
  int32_t merged;  // the id of left's bytes followed by right's
};

// Pair -> (rank, merged id), as an open-addressing hash table: looking pairs up is most of the
// cost of encoding text the merge cache has not seen.
class MergeTable {
 public:
  struct Hit {
    int32_t rank;  // kNoRank when the pair never merges
    int32_t merged;
  };
  static constexpr int32_t kNoRank = INT32_MAX;

  MergeTable() = default;
  // rules[r] has rank r. A pair listed twice keeps its last rank, as OpenAI's dict and Hugging
  // Face's HashMap both do.
  explicit MergeTable(std::span<const MergeRule> rules);

  Hit find(int32_t left, int32_t right) const {
    const uint64_t key = pack(left, right);
    for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return {s.rank, s.merged};
      if (s.key == kEmpty) return {kNoRank, -1};
    }
  }
  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t key;
    int32_t rank;
    int32_t merged;
  };
  static constexpr uint64_t kEmpty =
      ~uint64_t{0};  // ids are non-negative, so no pair packs to this
  static uint64_t pack(int32_t l, int32_t r) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
  }
  size_t slot_of(uint64_t key) const { return (key * 0x9E3779B97F4A7C15ull) >> shift_; }

  std::vector<Slot> slots_ = std::vector<Slot>(1, Slot{kEmpty, 0, 0});  // [capacity], power of 2
  size_t mask_ = 0;
  int shift_ = 63;
  size_t size_ = 0;
};

// Merges ids in place. Picks the algorithm by length: a rescan of a small array for short pieces
// (almost all words), a heap over a linked list for long ones so a 100 KB run of symbols stays
// O(n log n).
void bpe_merge(const MergeTable& table, std::vector<int32_t>* ids);

// The two algorithms, exposed so tests can check they agree.
void bpe_merge_rescan(const MergeTable& table, std::vector<int32_t>* ids);
void bpe_merge_heap(const MergeTable& table, std::vector<int32_t>* ids);

}  // namespace kvlm
