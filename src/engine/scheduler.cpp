#include "engine/scheduler.h"

#include <algorithm>
#include <climits>

namespace kvlm {

Scheduler::Scheduler(PagedKvCache& cache, const SchedulerOptions& options)
    : cache_(cache), options_(options) {
  for (int slot = options.max_running - 1; slot >= 0; --slot) free_slots_.push_back(slot);
}

void Scheduler::enqueue(Sequence* seq) {
  waiting_.push_back(seq);
}

void Scheduler::release_slot(Sequence* seq) {
  cache_.free_sequence(seq->slot);  // its full blocks stay cached for later prompts
  free_slots_.push_back(seq->slot);
  seq->slot = -1;
}

void Scheduler::remove(Sequence* seq) {
  auto waiting = std::find(waiting_.begin(), waiting_.end(), seq);
  if (waiting != waiting_.end()) waiting_.erase(waiting);
  auto running = std::find(running_.begin(), running_.end(), seq);
  if (running != running_.end()) {
    running_.erase(running);
    release_slot(seq);
  }
}

void Scheduler::preempt(Sequence* seq) {
  // Only the most recently admitted is ever preempted, so it is running_'s last.
  running_.pop_back();
  release_slot(seq);
  seq->n_computed = 0;  // recomputed on readmission (a prefix hit may spare most of it)
  waiting_.push_front(seq);
}

bool Scheduler::make_room(Sequence* seq, int n_positions, StepPlan* plan) {
  while (cache_.blocks_to_reserve(seq->slot, n_positions) > cache_.n_free_blocks()) {
    Sequence* victim = running_.back();
    preempt(victim);
    ++plan->n_preempted;
    if (victim == seq) return false;
  }
  return true;
}

bool Scheduler::admit_next(int* budget, std::vector<BlockHash>* claimed, StepPlan* plan) {
  Sequence* seq = waiting_.front();
  const int slot = free_slots_.back();
  const int B = cache_.block_size();
  int cached = 0;
  std::vector<BlockHash> hashes;
  if (options_.prefix_caching) {
    cached = cache_.match_prefix(slot, seq->tokens).value();  // slot is free: cannot fail
    hashes = cache_.block_hashes(seq->tokens);
    // A block that a request admitted this step is about to compute: wait one step and find
    // it cached, instead of computing it twice.
    for (size_t k = cached / B; k < hashes.size(); ++k)
      if (std::find(claimed->begin(), claimed->end(), hashes[k]) != claimed->end()) {
        cache_.free_sequence(slot);
        return false;
      }
  }
  int n = std::min({static_cast<int>(seq->tokens.size()) - cached, *budget, chunk_cap()});
  if (cache_.blocks_to_reserve(slot, cached + n) > cache_.n_free_blocks()) {
    cache_.free_sequence(slot);
    // Alone, a request always fits without its prefix hit (a whole-prompt hit needs one more
    // block, to copy the block it recomputes its last position in).
    if (!running_.empty() || cached == 0) return false;
    cached = 0;
    n = std::min({static_cast<int>(seq->tokens.size()), *budget, chunk_cap()});
    if (cache_.blocks_to_reserve(slot, n) > cache_.n_free_blocks()) return false;
  }
  (void)cache_.reserve(slot, cached + n);  // planned above: cannot fail
  free_slots_.pop_back();
  waiting_.pop_front();
  seq->slot = slot;
  seq->n_computed = cached;
  running_.push_back(seq);
  plan->chunks.push_back({seq, cached, n});
  plan->prefill_tokens += n;
  plan->prefix_queried += static_cast<int64_t>(seq->tokens.size());
  plan->prefix_hits += cached;
  *budget -= n;
  for (size_t k = cached / B; k < hashes.size() && (k + 1) * B <= static_cast<size_t>(cached + n);
       ++k)
    if (!cache_.pool().find(hashes[k])) claimed->push_back(hashes[k]);
  return true;
}

StepPlan Scheduler::schedule() {
  StepPlan plan;
  int budget = options_.recompute_every_step ? INT_MAX : options_.max_batch_tokens;
  // Running sequences first, oldest admission first: decodes, then unfinished prefills.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* seq = running_[i];
    if (options_.recompute_every_step) {  // forget everything: the uncached baseline
      cache_.free_sequence(seq->slot);
      seq->n_computed = 0;
    }
    const int n = std::min({seq->remaining(), budget, chunk_cap()});
    if (n <= 0) {
      ++i;
      continue;
    }
    if (!make_room(seq, seq->n_computed + n, &plan)) continue;  // it was the last one
    (void)cache_.reserve(seq->slot, seq->n_computed + n);       // room was made
    plan.chunks.push_back({seq, seq->n_computed, n});
    if (n > 1 || seq->n_computed < static_cast<int>(seq->n_prompt)) plan.prefill_tokens += n;
    budget -= n;
    ++i;
  }
  // Then new admissions, in arrival order; none in a step that had to preempt (memory is short).
  std::vector<BlockHash> claimed;
  while (plan.n_preempted == 0 && !waiting_.empty() && budget > 0 &&
         n_running() < options_.max_running && admit_next(&budget, &claimed, &plan)) {
  }
  return plan;
}

void Scheduler::computed(const StepPlan& plan) {
  for (const ScheduledChunk& chunk : plan.chunks) {
    chunk.seq->n_computed = chunk.start + chunk.n;
    if (options_.prefix_caching) cache_.register_full_blocks(chunk.seq->slot, chunk.seq->tokens);
    cache_.evict_outside_window(chunk.seq->slot);  // sinks + window: blocks no row reads again
  }
}

}  // namespace kvlm
