// The generation loop: prefill fills the cache with each prompt's keys and values and yields
// the first new token; decode then feeds one token per sequence and attends over the cache.
// The uncached mode recomputes every sequence from its first token at every step (the
// baseline the cache is checked and measured against).
//
// Sequences are ragged: each keeps its own positions 0..n-1 in the cache, which is what left
// padding with an attention mask and position ids max(cumsum(mask) - 1, 0) compute, without
// storing or attending to pad positions at all.
//
// This static loop is not how kvlm's front ends generate (they run on the engine,
// include/kvlm/engine.h). It stays for two jobs: the benchmarks' fixed batches (kvlm bench's
// seed experiment and --paged, the engine bench's static baseline), and, in its uncached mode,
// the independent reference of the exactness suites: every step recomputes each sequence from
// position 0 on a cache made for the call, sharing no scheduling code with the engine.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "kv/kv_cache.h"
#include "kvlm/status.h"
#include "model/model.h"

namespace kvlm {

class PagedKvCache;  // kv/paged_kv_cache.h

// Paged mode (kv/paged_kv_cache.h): the cache is a pool of blocks, and prompts that begin
// alike share the blocks of their common prefix instead of recomputing it.
struct PagedGenerateOptions {
  int block_size = 16;
  size_t kv_memory_bytes = 0;  // arena size; 0: room for every prompt + its new tokens
  bool share_prefixes = true;  // reuse cached prefixes, this batch's own included
};

// Sees each sequence's logits at each step (step 0 = after prefill). For tests and --logprobs.
using LogitsObserver = std::function<void(int step, int seq, std::span<const float> logits)>;
// Called with each new token as soon as it is chosen (stream it here); returns true when the
// sequence should stop (the token is kept).
using TokenSink = std::function<bool(int seq, int32_t token)>;

struct GenerateOptions {
  int max_new_tokens = 20;
  bool use_cache = true;
  LogitsObserver observe;  // optional; the next token is always greedy (argmax below)
  TokenSink on_token;      // optional; default: only max_new_tokens stops
  // Paged cache made for this call (ignored when use_cache is false or paged_cache is set).
  std::optional<PagedGenerateOptions> paged;
  // A caller-owned paged cache, so prefixes cached by one call serve the next (sharing as
  // paged->share_prefixes says, default on). The call uses slots 0..n_prompts-1, which must
  // hold nothing, and frees them before returning. Running out of blocks fails the whole
  // request with an error naming the need; the cache stays consistent.
  PagedKvCache* paged_cache = nullptr;
  // How the cache made for this call stores K/V (f32, f16, bf16, q8_0, fp8); uncached
  // generation writes and reads a cache of the same dtype, so it stays the exact baseline.
  KvStorageOptions kv_storage;
};

struct GenerateStats {
  double prefill_seconds = 0;  // cached mode: the prompt pass (uncached: the first step)
  double decode_seconds = 0;   // all later steps
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  int64_t rows_computed = 0;         // token positions run through the model, all sequences
  int64_t prompt_tokens_cached = 0;  // paged: prompt positions found cached, not recomputed
};

struct GenerateResult {
  std::vector<std::vector<int32_t>> tokens;  // new tokens of each sequence
  GenerateStats stats;
};

// Index of the largest logit; ties go to the lowest id.
int32_t argmax(std::span<const float> logits);

// Checks prompts before any work: non-empty, ids in the vocabulary, prompt + new tokens within
// the context length, max_new_tokens >= 1.
// `windowed`: a cache window (sinks + sliding window) lets sequences run past the context.
Status validate_request(const Model& model, const std::vector<std::vector<int32_t>>& prompts,
                        int max_new_tokens, bool windowed = false);

Result<GenerateResult> generate(Model& model, const std::vector<std::vector<int32_t>>& prompts,
                                const GenerateOptions& options, const Parallel& par);

}  // namespace kvlm
