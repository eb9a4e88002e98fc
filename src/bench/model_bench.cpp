#include "bench/model_bench.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "generate/generate.h"
#include "kv/contiguous_kv_cache.h"

namespace kvlm {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Token ids the runs feed: spread over the vocabulary, fixed for reproducibility.
std::vector<int32_t> bench_tokens(int n, int salt, int n_vocab) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i)
    t[i] = static_cast<int32_t>((static_cast<int64_t>(i) * 7919 + salt * 104729 + 13) % n_vocab);
  return t;
}

Status check_positions(const ModelConfig& c, int needed, const char* what) {
  if (needed > c.n_ctx)
    return Status::error(std::string("bench: ") + what + " needs " + std::to_string(needed) +
                         " positions, beyond the model's context length " +
                         std::to_string(c.n_ctx));
  return Status::ok();
}

}  // namespace

Result<TimedRun> time_prefill(Model& model, int n_tokens, int repeats, const Parallel& par,
                              const KvStorageOptions& kv) {
  const ModelConfig& c = model.config();
  KVLM_RETURN_IF_ERROR(check_positions(c, n_tokens, "the prefill"));
  const std::vector<int32_t> tokens = bench_tokens(n_tokens, 1, c.n_vocab);
  const SequenceChunk chunk{0, 0, tokens};
  std::vector<float> logits(c.n_vocab);
  TimedRun run;
  run.tokens = n_tokens;
  run.seconds = std::numeric_limits<double>::infinity();
  for (int rep = 0; rep <= std::max(repeats, 1); ++rep) {  // rep 0 warms up
    ContiguousKvCache cache(c.n_layer, c.kv_dim(), {n_tokens}, kv);
    const auto start = Clock::now();
    KVLM_RETURN_IF_ERROR(model.forward(logits.data(), {&chunk, 1}, cache, par));
    if (rep > 0) run.seconds = std::min(run.seconds, seconds_since(start));
    run.kv_bytes = cache.allocated_bytes();
  }
  const ChunkShape shape{0, n_tokens};
  run.cost = forward_step_cost(c, model.weight_bytes(), {&shape, 1}, kv);
  return run;
}

Result<TimedRun> time_decode(Model& model, int batch, int context, int n_steps, int repeats,
                             const Parallel& par, const KvStorageOptions& kv,
                             const std::function<double()>& read_bandwidth) {
  const ModelConfig& c = model.config();
  repeats = std::max(repeats, 1);
  const int capacity = context + 1 + n_steps * repeats;  // +1: one untimed warm-up step
  KVLM_RETURN_IF_ERROR(check_positions(c, capacity, "the decode run"));
  ContiguousKvCache cache(c.n_layer, c.kv_dim(), std::vector<int>(batch, capacity), kv);
  std::vector<std::vector<int32_t>> tokens;
  for (int s = 0; s < batch; ++s) tokens.push_back(bench_tokens(capacity, s + 2, c.n_vocab));
  std::vector<SequenceChunk> chunks(batch);
  std::vector<float> logits(static_cast<size_t>(batch) * c.n_vocab);
  // Fill the cache with `context` positions per sequence (one prefill, not timed).
  for (int s = 0; s < batch; ++s)
    chunks[s] = {s, 0, std::span<const int32_t>(tokens[s]).first(context)};
  if (context > 0) KVLM_RETURN_IF_ERROR(model.forward(logits.data(), chunks, cache, par));
  int pos = context;
  auto step = [&]() -> Status {
    for (int s = 0; s < batch; ++s)
      chunks[s] = {s, pos, std::span<const int32_t>(tokens[s]).subspan(pos, 1)};
    ++pos;
    return model.forward(logits.data(), chunks, cache, par);
  };
  KVLM_RETURN_IF_ERROR(step());  // warm-up
  TimedRun run;
  run.tokens = static_cast<int64_t>(batch) * n_steps;
  run.seconds = std::numeric_limits<double>::infinity();
  int first_timed_pos = pos;
  double bandwidth_before = read_bandwidth ? read_bandwidth() : 0.0;
  for (int rep = 0; rep < repeats; ++rep) {
    const int start_pos = pos;
    const auto start = Clock::now();
    for (int k = 0; k < n_steps; ++k) KVLM_RETURN_IF_ERROR(step());
    const double seconds = seconds_since(start);
    const double bandwidth_after = read_bandwidth ? read_bandwidth() : 0.0;
    if (seconds < run.seconds) {
      run.seconds = seconds;
      first_timed_pos = start_pos;
      run.bandwidth = (bandwidth_before + bandwidth_after) / 2;
    }
    bandwidth_before = bandwidth_after;
  }
  for (int k = 0; k < n_steps; ++k) {
    const std::vector<ChunkShape> shapes(batch, ChunkShape{first_timed_pos + k, 1});
    const StepCost cost = forward_step_cost(c, model.weight_bytes(), shapes, kv);
    run.cost.flops += cost.flops;
    run.cost.bytes += cost.bytes;
  }
  run.kv_bytes = cache.allocated_bytes();
  return run;
}

Result<CacheExperiment> run_cache_experiment(Model& model,
                                             const std::vector<std::vector<int32_t>>& prompts,
                                             int max_new_tokens, const MachineRates& rates,
                                             const Parallel& par, const KvStorageOptions& kv) {
  CacheExperiment e;
  e.max_new_tokens = max_new_tokens;
  size_t max_len = 0;
  for (const auto& p : prompts) {
    e.prompt_lengths.push_back(static_cast<int>(p.size()));
    max_len = std::max(max_len, p.size());
  }
  GenerateOptions options;
  options.max_new_tokens = max_new_tokens;
  options.use_cache = false;
  options.kv_storage = kv;
  KVLM_ASSIGN_OR_RETURN(auto uncached, generate(model, prompts, options, par));
  options.use_cache = true;
  KVLM_ASSIGN_OR_RETURN(auto cached, generate(model, prompts, options, par));
  e.uncached_seconds = uncached.stats.prefill_seconds + uncached.stats.decode_seconds;
  e.cached_seconds = cached.stats.prefill_seconds + cached.stats.decode_seconds;
  e.speedup = e.uncached_seconds / e.cached_seconds;
  e.identical = uncached.tokens == cached.tokens;
  for (int s = 0; s < max_new_tokens; ++s)
    e.positions_uncached += static_cast<int64_t>(max_len) + s;
  e.positions_cached = static_cast<int64_t>(max_len) + max_new_tokens - 1;
  e.position_ratio = static_cast<double>(e.positions_uncached) / e.positions_cached;
  const ModelConfig& c = model.config();
  for (bool use_cache : {false, true}) {
    StepCost& total = use_cache ? e.cached_cost : e.uncached_cost;
    double& roofline = use_cache ? e.roofline_cached_seconds : e.roofline_uncached_seconds;
    for (const auto& step : generation_steps(e.prompt_lengths, max_new_tokens, use_cache)) {
      const StepCost cost = forward_step_cost(c, model.weight_bytes(), step, kv);
      total.flops += cost.flops;
      total.bytes += cost.bytes;
      roofline += roofline_seconds(cost, rates);
    }
  }
  e.roofline_ratio = e.roofline_uncached_seconds / e.roofline_cached_seconds;
  return e;
}

}  // namespace kvlm
