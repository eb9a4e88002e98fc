// The whole `kvlm bench` run: the machine's limits, then prefill and decode speeds of a model
// and the seed's cached-vs-uncached experiment, each held against the roofline those limits
// draw, and the resident memory beside the weights and the KV cache. The command only parses
// flags and prints; everything measured is here.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "bench/model_bench.h"
#include "bench/resident_memory.h"
#include "kv/kv_cache.h"
#include "kvlm/status.h"
#include "model/model.h"
#include "ops/parallel.h"

namespace kvlm {

struct BenchOptions {
  size_t bandwidth_bytes = size_t{512} << 20;  // far beyond any last-level cache
  int limit_repeats = 3;
  // Bandwidth passes (the best counts): on a shared or virtual machine other tenants take a
  // varying share of the memory bus, and a pass costs only about 20 ms.
  int bandwidth_repeats = 10;
  double fma_seconds = 0.3;  // per fma-throughput repeat
  int prefill_repeats = 2;
  int decode_steps = 16;  // timed decode steps per round
  int decode_repeats = 4;
  // Beside every decode round (before it and after the last) the read bandwidth is measured
  // again on an array of probe_bytes, sustained over probe_seconds, and each decode fraction is
  // taken against the readings around its round, not against the peak of the run's start.
  size_t probe_bytes = size_t{256} << 20;  // 8x a 32 MB last-level cache
  double probe_seconds = 0.1;              // about as long as a round of 16 decode steps
  bool decode_only = false;  // skip the prefills and the cache experiments (quick comparisons)
  int short_prompt = 128, long_prompt = 512;    // prefill lengths
  int short_context = 128, long_context = 900;  // decode: positions already cached
  int batch = 8;                                // batched decode (short context)
  // Called with a line before each measurement, for a progress display (may be empty).
  std::function<void(const std::string&)> progress;
  KvStorageOptions kv;  // the KV cache's storage type in every run
};

struct BenchReport {
  std::string simd_target;
  int n_threads = 0;
  bool decode_only = false;  // no prefill or cache-experiment figures
  std::string weights;       // storage type of the matrices: "F32", "F16", "BF16"
  size_t weight_bytes = 0;   // read per decode step
  // Memory behind huge pages after the decode runs (weights, caches, the probe): with 4 KiB
  // pages decode loses a fifth of its speed to the TLB (util/huge_pages.h).
  size_t huge_page_bytes = 0;
  double bandwidth_gbs = 0, fma_gflops = 0;
  int short_prompt = 0, long_prompt = 0, short_context = 0, long_context = 0, batch = 0;
  TimedRun prefill_short, prefill_long, decode_short, decode_long, decode_batch;
  // Roofline fractions: decode bytes/s over bandwidth, prefill FLOP/s over fma throughput.
  // Decode fractions are against TimedRun::bandwidth, read beside each run's window.
  double decode_roofline_frac = 0;       // batch 1, short context
  double decode_long_roofline_frac = 0;  // batch 1, long context
  double decode_batch_roofline_frac = 0;
  double decode_batch_fma_frac = 0;  // batched decode's FLOP/s over the fma throughput
  // The batch-over-batch-1 tokens/s ratio the two decode windows' rooflines allow (each with
  // the bandwidth beside it): what the measured ratio is to be judged against.
  double decode_batch_speedup_bound = 0;
  double prefill_fma_frac = 0;  // long prompt
  double prefill_short_fma_frac = 0;
  CacheExperiment seed;      // three prompts (10, 2, 4 tokens), 20 new tokens
  CacheExperiment run_64;    // one 64-token prompt, 64 new tokens
  ResidentMemory memory;     // after the model runs, less the bandwidth probe's array
  size_t kv_bytes_peak = 0;  // the largest cache any run allocated
};

// The seed's prompts (the `kvlm demo` experiment).
std::vector<std::vector<int32_t>> seed_prompts();

Result<BenchReport> run_bench(Model& model, const BenchOptions& options, const Parallel& par);

// One JSON object with the keys the issue names (bandwidth_gbs, fma_gflops, prefill_tps_128,
// prefill_tps_512, decode_tps_b1_ctx128, decode_tps_b1_ctx900, decode_tps_b8,
// decode_roofline_frac, prefill_fma_frac, seed_speedup, seed_work_ratio, weights) and the rest.
std::string bench_report_json(const BenchReport& report);

// The human-readable report: tables of speeds and fractions, and the cache's measured speedup
// next to its token-position ratio and the rooflines' prediction.
std::string bench_report_text(const BenchReport& report);

}  // namespace kvlm
