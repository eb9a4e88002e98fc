// Scheduler: decides what one engine step computes, vLLM v1's way. Each step has a token
// budget and a cap on running sequences. Running sequences go first, oldest admitted first
// (a decode is one token, a prompt still being prefilled takes what the budget leaves); then
// waiting requests are admitted in arrival order, each starting on the longest cached prefix of
// its tokens and prefilling in chunks. When the cache cannot hold a running sequence's next
// positions, the most recently admitted sequence is preempted: its blocks are freed (full ones
// stay cached) and it goes back to the head of the queue, to be recomputed later.
//
// The scheduler reserves what it plans (the model only computes) and never fails a step: a
// request that fits the cache on its own always makes progress, because everything admitted
// after it is preempted before it is.
#pragma once

#include <climits>
#include <deque>
#include <vector>

#include "engine/sequence.h"
#include "kv/paged_kv_cache.h"

namespace kvlm {

struct SchedulerOptions {
  int max_batch_tokens = 512;
  int max_running = 16;
  bool prefix_caching = true;
  bool recompute_every_step = false;  // the uncached baseline: all positions, every step
};

// One sequence's part of a step: positions [start, start + n) of its tokens.
struct ScheduledChunk {
  Sequence* seq = nullptr;
  int start = 0;
  int n = 0;
  bool samples() const { return start + n == static_cast<int>(seq->tokens.size()); }
};

struct StepPlan {
  std::vector<ScheduledChunk> chunks;  // running sequences first, then new admissions
  int n_preempted = 0;
  int64_t prefill_tokens = 0;  // positions computed that are not a plain decode
  int64_t prefix_queried = 0;  // prompt positions of new admissions looked up in the cache
  int64_t prefix_hits = 0;     // of those, found cached
};

class Scheduler {
 public:
  Scheduler(PagedKvCache& cache, const SchedulerOptions& options);

  void enqueue(Sequence* seq);  // at the tail of the waiting queue
  // Takes a sequence out wherever it is; an admitted one gives its slot and blocks back.
  void remove(Sequence* seq);
  // Plans and reserves the next step.
  StepPlan schedule();
  // After the forward pass: the chunks' positions are computed, and their full blocks become
  // findable by later prompts.
  void computed(const StepPlan& plan);

  int n_running() const { return static_cast<int>(running_.size()); }
  int n_waiting() const { return static_cast<int>(waiting_.size()); }

 private:
  // Makes room for positions [0, n) of `seq` by preempting from the most recent admission;
  // false when `seq` itself had to go.
  bool make_room(Sequence* seq, int n, StepPlan* plan);
  void preempt(Sequence* seq);
  // Admits the head of the queue if it fits the budget, the cap and the cache.
  bool admit_next(int* budget, std::vector<BlockHash>* claimed, StepPlan* plan);
  void release_slot(Sequence* seq);
  // Most positions of one sequence per step: a windowed cache holds W - S - 1 + the chunk's
  // positions of it at once, so chunks are cut at the window (the uncached baseline excepted).
  int chunk_cap() const {
    return cache_.window().enabled() && !options_.recompute_every_step ? cache_.window().window
                                                                       : INT_MAX;
  }

  PagedKvCache& cache_;
  SchedulerOptions options_;
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;  // in admission order
  std::vector<int> free_slots_;
};

}  // namespace kvlm
