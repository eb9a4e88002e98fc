// engine_bench: the engine under load (`kvlm bench --engine`). Many requests arrive together
// (prompt lengths spread over a range, some sharing a long prefix, a fixed number of new
// tokens each) and run by continuous batching; the same requests are also run as one static
// generate() batch, and one request alone. Reported: output tokens/s, time to first token and
// inter-token latency percentiles, preemptions, prefix hit rate, and decode throughput with
// many sequences running against one sequence alone.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kvlm/engine.h"

namespace kvlm {

struct EngineBenchOptions {
  int n_requests = 64;
  int min_prompt = 16, max_prompt = 512;  // prompt lengths, uniform
  int new_tokens = 64;
  int shared_prefix = 256;  // every fourth request starts with the same prefix
  int max_running = 16;
  int max_batch_tokens = 512;
  int threads = 0;
  bool static_baseline = true;  // also run the requests as one static generate() batch
  uint64_t seed = 1;
  std::string kv_dtype = "f32";  // EngineOptions::kv_dtype
  int kv_window = 0;             // EngineOptions::kv_window (0: off) and sink_tokens; the
  int sink_tokens = 0;           // static baseline gets the same window
};

struct LatencySummary {
  double p50 = 0, p99 = 0;  // seconds
};

struct EngineBenchResult {
  int n_requests = 0;
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double wall_seconds = 0;
  double output_tokens_per_second = 0;  // generated / wall
  LatencySummary ttft;                  // submit -> first token
  LatencySummary itl;                   // between a request's consecutive tokens
  int64_t preemptions = 0;
  double prefix_hit_rate = 0;                  // prompt positions found cached / looked up
  double decode_tokens_per_second = 0;         // in steps that only decoded, many running
  double single_decode_tokens_per_second = 0;  // one request alone
  double decode_scaling = 0;                   // the ratio of the two
  double static_wall_seconds = 0;              // one static generate() batch, same requests
  double static_output_tokens_per_second = 0;
  bool static_identical = false;  // the static batch gave the same tokens as the engine
};

Result<EngineBenchResult> run_engine_bench(std::shared_ptr<LoadedModel> model,
                                           const EngineBenchOptions& options);
std::string engine_bench_json(const EngineBenchResult& result);
std::string engine_bench_text(const EngineBenchResult& result);

}  // namespace kvlm
