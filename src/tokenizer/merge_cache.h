// MergeCache: the ids of recently encoded pieces, so a word seen before skips BPE. In prose most
// pieces are repeats (" the", " of", ...), so this is where encoding time goes.
//
// A direct-mapped table of fixed 64-byte slots, like a CPU cache: a piece hashes to one slot
// and a newer piece evicts an older one. Memory is fixed (4 MiB at the default size), nothing
// is allocated per word, and frequent words stay because they come back before being evicted.
// Long pieces and pieces of many tokens are not cached (rare, and cheap to skip).
// Not thread-safe; the tokenizer guards it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace kvlm {

class MergeCache {
 public:
  static constexpr size_t kMaxPieceBytes = 22;
  static constexpr size_t kMaxIds = 7;

  explicit MergeCache(int log2_slots = 16)
      : slots_(size_t{1} << log2_slots), mask_(slots_.size() - 1) {}

  static uint64_t hash(std::string_view piece) {
    // Eight bytes at a time; quality only has to spread words over slots.
    uint64_t h = 0x9E3779B97F4A7C15ull ^ piece.size();
    size_t i = 0;
    for (; i + 8 <= piece.size(); i += 8) {
      uint64_t chunk;
      std::memcpy(&chunk, piece.data() + i, 8);
      h = (h ^ chunk) * 0xBF58476D1CE4E5B9ull;
      h ^= h >> 31;
    }
    uint64_t tail = 0;
    std::memcpy(&tail, piece.data() + i, piece.size() - i);
    h = (h ^ tail) * 0x94D049BB133111EBull;
    return h ^ (h >> 29);
  }

  // Appends the ids of `piece` to `out` and returns true when cached.
  bool lookup(std::string_view piece, uint64_t h, std::vector<int32_t>* out) const {
    const Slot& s = slots_[h & mask_];
    if (s.hash != h || s.length != piece.size() || s.length == 0 ||
        std::memcmp(s.bytes, piece.data(), piece.size()) != 0) {
      return false;
    }
    out->insert(out->end(), s.ids, s.ids + s.n_ids);
    return true;
  }

  void insert(std::string_view piece, uint64_t h, const int32_t* ids, size_t n_ids) {
    if (piece.empty() || piece.size() > kMaxPieceBytes || n_ids > kMaxIds) return;
    Slot& s = slots_[h & mask_];
    s.hash = h;
    s.length = static_cast<uint8_t>(piece.size());
    s.n_ids = static_cast<uint8_t>(n_ids);
    std::memcpy(s.bytes, piece.data(), piece.size());
    std::memcpy(s.ids, ids, n_ids * sizeof(int32_t));
  }

  void clear() { std::fill(slots_.begin(), slots_.end(), Slot{}); }

 private:
  struct alignas(64) Slot {
    uint64_t hash = 0;
    uint8_t length = 0;  // 0: empty
    uint8_t n_ids = 0;
    char bytes[kMaxPieceBytes];
    int32_t ids[kMaxIds];
  };
  static_assert(sizeof(Slot) == 64);

  std::vector<Slot> slots_;
  size_t mask_;
};

}  // namespace kvlm
