// paged_bench: the paged KV cache's memory figures, measured on a real generation run
// (`kvlm bench --paged`).
//
// Two workloads on one model:
//  1. Memory: a batch of sequences with mixed prompt and output lengths (a sequence stops at
//     its own length and returns its blocks). Reported: the most bytes the cache's blocks held
//     at any step, against a contiguous cache preallocated at the context length for every
//     sequence, and the waste at that peak (bytes of held blocks minus bytes of positions
//     cached: only each sequence's half-full last block, so under one block per sequence).
//  2. Shared prefix: a batch of prompts that begin with the same system prompt, prefilled with
//     and without prefix sharing. Reported: prompt tokens served from the cache instead of
//     computed, the prefill speedup, and whether both runs gave bitwise identical logits.
#pragma once

#include <cstdint>
#include <string>

#include "kvlm/status.h"
#include "model/config.h"
#include "model/model.h"
#include "ops/parallel.h"

namespace kvlm {

struct PagedBenchOptions {
  int block_size = 16;
  uint64_t seed = 1;  // token ids and lengths are drawn from it, so runs are reproducible
  // Memory workload: prompt and output lengths drawn uniformly from these ranges.
  int n_sequences = 8;
  int min_prompt = 128, max_prompt = 512;
  int min_output = 4, max_output = 24;
  // Shared-prefix workload.
  int n_prefix_sequences = 6;
  int prefix_tokens = 256;  // the common system prompt
  int min_suffix = 8, max_suffix = 32;
  int prefix_new_tokens = 2;
};

struct PagedBenchResult {
  int block_size = 0;
  int n_ctx = 0;
  int64_t kv_bytes_per_token = 0;  // 2 * n_layer * kv_dim * 4
  // Memory workload.
  int n_sequences = 0;
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  int64_t kv_bytes_paged = 0;       // peak bytes of blocks held by the batch
  int64_t kv_bytes_used = 0;        // bytes of cached positions at that peak
  int64_t kv_bytes_contiguous = 0;  // n_sequences * n_ctx * kv_bytes_per_token
  double kv_waste_frac = 0;         // (paged - used) / paged at the peak
  double kv_waste_blocks_per_sequence = 0;
  double memory_seconds = 0;
  // Shared-prefix workload.
  int n_prefix_sequences = 0;
  int64_t prefix_prompt_tokens = 0;  // all prompts' tokens
  int64_t prefix_tokens_saved = 0;   // of those, served from the cache
  double prefill_seconds_unshared = 0;
  double prefill_seconds_shared = 0;
  double prefix_speedup = 0;  // unshared / shared prefill time
  bool prefix_exact = false;  // shared and unshared logits bitwise identical at every step
};

// The default bench model's shape: GPT-2 124M's KV geometry (12 layers, 12 heads of 64, 1024
// positions: 73,728 cache bytes per token, so eight sequences preallocated at the context
// length take the seed's 603,979,776 bytes) with a thin MLP (n_ff 768) and an 8192-token
// vocabulary, so the whole bench runs in about a minute on two cores. The memory figures
// depend only on the KV geometry; the prefix speedup on the ratio of prefix to suffix work.
ModelConfig paged_bench_model_config();

Result<PagedBenchResult> run_paged_bench(Model& model, const PagedBenchOptions& options,
                                         const Parallel& par);

// One JSON object (keys kv_bytes_paged, kv_bytes_contiguous, kv_waste_frac,
// prefix_tokens_saved, prefix_speedup first, then the rest) and a human-readable table.
std::string paged_bench_json(const PagedBenchResult& result);
std::string paged_bench_text(const PagedBenchResult& result);

}  // namespace kvlm
