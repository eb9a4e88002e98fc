// Items [0, n) shared out to a team's members as static_share does, except that a member whose
// share is done takes half of what is left of the fullest other share and goes on with that.
//
// Why: a decode step's matrices are split in halves over 2 threads, and the two cores of the
// shared machines here rarely run at one speed (one waits on the bus more, or serves an
// interrupt): GPT-2's F16 shape at batch 8, Zen 5, perf samples of whole steps, the threads
// waited at the end of a matrix's job 3% (caller) and 6% (worker) of their time. A member
// claims its own share from the front, `grain` items at a time and in order, so a kernel reading
// a share of weights front to back still reads one stream; what it hands over is the far end,
// which it would have reached last. Which member computes an item never changes the item's
// result (every kernel's order is per output), so balancing keeps every bit.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "ops/thread_team.h"

namespace kvlm {

class StealableShares {
 public:
  // n_items below 2^32 (a share packs its front and back into one word).
  StealableShares(size_t n_items, int n_members)
      : n_members_(std::max(n_members, 1)), shares_(new Share[n_members_]) {
    for (int t = 0; t < n_members_; ++t) {
      const auto [begin, end] = static_share(n_items, t, n_members_);
      shares_[t].bounds.store(pack(begin, end), std::memory_order_relaxed);
    }
  }

  // Member t's next piece [begin, end): up to `grain` items from the front of its share, or,
  // once its share is empty, from the half it takes over from another. Empty (begin == end)
  // once every item has been claimed.
  std::pair<size_t, size_t> claim(int t, size_t grain) {
    grain = std::max<size_t>(grain, 1);
    for (;;) {
      Share& own = shares_[t];
      uint64_t b = own.bounds.load(std::memory_order_acquire);
      while (front(b) < back(b)) {
        const uint64_t end = std::min<uint64_t>(front(b) + grain, back(b));
        if (own.bounds.compare_exchange_weak(b, pack(end, back(b)), std::memory_order_acq_rel))
          return {front(b), end};
      }
      if (!take_over(t, grain)) return {0, 0};
    }
  }

  // Where member t's unclaimed share ends now: the items it will most likely claim next run up to
  // here (a kernel may fetch ahead into them), unless another member takes them over first.
  size_t share_end(int t) const { return back(shares_[t].bounds.load(std::memory_order_relaxed)); }

 private:
  // front << 32 | back of a share's unclaimed items: one word, so the owner's claims from the
  // front and another member's from the back never overlap.
  struct alignas(64) Share {
    std::atomic<uint64_t> bounds{0};
  };
  static uint64_t pack(uint64_t front, uint64_t back) { return front << 32 | back; }
  static uint64_t front(uint64_t b) { return b >> 32; }
  static uint64_t back(uint64_t b) { return b & 0xffffffffu; }

  // Moves the back half of the fullest other share (all of it when no more than `grain` is
  // left) into member t's empty share. False when every share is empty.
  bool take_over(int t, size_t grain) {
    for (;;) {
      int victim = -1;
      uint64_t most = 0;
      for (int m = 0; m < n_members_; ++m) {
        const uint64_t b = shares_[m].bounds.load(std::memory_order_acquire);
        if (m != t && back(b) - front(b) > most) most = back(b) - front(b), victim = m;
      }
      if (victim < 0) return false;
      uint64_t b = shares_[victim].bounds.load(std::memory_order_acquire);
      const uint64_t left = back(b) - front(b);
      if (left == 0) continue;  // claimed meanwhile: look again
      const uint64_t take =
          left <= grain ? left : std::max<uint64_t>(grain, left / 2 / grain * grain);
      const uint64_t split = back(b) - take;
      if (shares_[victim].bounds.compare_exchange_strong(b, pack(front(b), split),
                                                         std::memory_order_acq_rel)) {
        shares_[t].bounds.store(pack(split, split + take), std::memory_order_release);
        return true;
      }
    }
  }

  int n_members_;
  std::unique_ptr<Share[]> shares_;
};

}  // namespace kvlm
