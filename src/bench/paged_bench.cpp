#include "bench/paged_bench.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "generate/generate.h"
#include "kv/paged_kv_cache.h"
#include "model/random_gpt2.h"
#include "util/splitmix64.h"

namespace kvlm {

namespace {

// splitmix64: a small explicit RNG, so the workload depends only on the seed.
struct Draw {
  uint64_t state;
  uint64_t next() { return splitmix64_next(&state); }
  int uniform(int lo, int hi) { return lo + static_cast<int>(next() % (hi - lo + 1)); }  // [lo, hi]
  std::vector<int32_t> tokens(int n, int n_vocab) {
    std::vector<int32_t> t(n);
    for (auto& id : t) id = static_cast<int32_t>(next() % n_vocab);
    return t;
  }
};

Status check_range(const char* what, int lo, int hi, int at_least) {
  if (lo < at_least || hi < lo)
    return Status::error(std::string("paged bench: ") + what + " range [" + std::to_string(lo) +
                         ", " + std::to_string(hi) + "] must satisfy " + std::to_string(at_least) +
                         " <= min <= max");
  return Status::ok();
}

Status validate(const PagedBenchOptions& o, const ModelConfig& c) {
  if (o.block_size < 1)
    return Status::error("paged bench: --block-size must be at least 1, found " +
                         std::to_string(o.block_size));
  KVLM_RETURN_IF_ERROR(check_range("prompt length", o.min_prompt, o.max_prompt, 1));
  KVLM_RETURN_IF_ERROR(check_range("output length", o.min_output, o.max_output, 1));
  KVLM_RETURN_IF_ERROR(check_range("suffix length", o.min_suffix, o.max_suffix, 1));
  if (o.n_sequences < 1 || o.n_prefix_sequences < 1 || o.prefix_tokens < 0 ||
      o.prefix_new_tokens < 1)
    return Status::error("paged bench: sequence counts and new tokens must be at least 1");
  const int64_t longest = std::max<int64_t>(
      o.max_prompt + o.max_output - 1, o.prefix_tokens + o.max_suffix + o.prefix_new_tokens - 1);
  if (longest > c.n_ctx)
    return Status::error("paged bench: the longest sequence needs " + std::to_string(longest) +
                         " positions, beyond the model's context length " +
                         std::to_string(c.n_ctx));
  return Status::ok();
}

// Workload 1: mixed lengths, peak bytes held and the waste at that peak.
Status measure_memory(Model& model, const PagedBenchOptions& o, const Parallel& par, Draw& draw,
                      PagedBenchResult* r) {
  const ModelConfig& c = model.config();
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int> outputs;
  int64_t budget = 0;
  for (int s = 0; s < o.n_sequences; ++s) {
    prompts.push_back(draw.tokens(draw.uniform(o.min_prompt, o.max_prompt), c.n_vocab));
    outputs.push_back(draw.uniform(o.min_output, o.max_output));
    budget += (static_cast<int64_t>(prompts.back().size()) + outputs.back() + o.block_size) /
              o.block_size * o.block_size;
    r->prompt_tokens += static_cast<int64_t>(prompts.back().size());
  }
  KVLM_ASSIGN_OR_RETURN(auto cache,
                        PagedKvCache::create(c.n_layer, c.kv_dim(), {o.block_size, 0, budget, {}}));
  PagedKvCache& kv = *cache;
  GenerateOptions options;
  options.max_new_tokens = *std::max_element(outputs.begin(), outputs.end());
  options.paged_cache = &kv;
  options.paged = PagedGenerateOptions{o.block_size, 0, false};  // random prompts share nothing
  std::vector<int> produced(o.n_sequences, 0);
  int peak_blocks = -1;
  int64_t positions_at_peak = 0;
  options.on_token = [&](int seq, int32_t) {
    // Every sequence of the step has its K/V written when its token comes out: sample here.
    if (kv.pool().n_used() > peak_blocks) {
      peak_blocks = kv.pool().n_used();
      positions_at_peak = kv.held_positions();
    }
    return ++produced[seq] >= outputs[seq];
  };
  KVLM_ASSIGN_OR_RETURN(auto result, generate(model, prompts, options, par));
  const int64_t per_token = c.kv_bytes_per_token(sizeof(float));
  r->generated_tokens = result.stats.generated_tokens;
  r->kv_bytes_paged = static_cast<int64_t>(peak_blocks) * kv.block_bytes();
  r->kv_bytes_used = positions_at_peak * per_token;
  r->kv_bytes_contiguous = static_cast<int64_t>(o.n_sequences) * c.n_ctx * per_token;
  const int64_t waste = r->kv_bytes_paged - r->kv_bytes_used;
  r->kv_waste_frac = r->kv_bytes_paged > 0 ? static_cast<double>(waste) / r->kv_bytes_paged : 0;
  r->kv_waste_blocks_per_sequence =
      static_cast<double>(waste) / static_cast<double>(kv.block_bytes()) / o.n_sequences;
  r->memory_seconds = result.stats.prefill_seconds + result.stats.decode_seconds;
  return Status::ok();
}

// Workload 2: a common system prompt, prefilled with and without sharing.
Status measure_prefix(Model& model, const PagedBenchOptions& o, const Parallel& par, Draw& draw,
                      PagedBenchResult* r) {
  const ModelConfig& c = model.config();
  const std::vector<int32_t> system = draw.tokens(o.prefix_tokens, c.n_vocab);
  std::vector<std::vector<int32_t>> prompts;
  for (int s = 0; s < o.n_prefix_sequences; ++s) {
    prompts.push_back(system);
    const auto suffix = draw.tokens(draw.uniform(o.min_suffix, o.max_suffix), c.n_vocab);
    prompts.back().insert(prompts.back().end(), suffix.begin(), suffix.end());
    r->prefix_prompt_tokens += static_cast<int64_t>(prompts.back().size());
  }
  std::vector<float> logits[2];  // every step's logits of every sequence, appended in order
  GenerateStats stats[2];
  for (int shared = 0; shared < 2; ++shared) {
    GenerateOptions options;
    options.max_new_tokens = o.prefix_new_tokens;
    options.paged = PagedGenerateOptions{o.block_size, 0, shared == 1};
    std::vector<std::vector<float>> rows(o.n_prefix_sequences);
    options.observe = [&](int, int seq, std::span<const float> row) {
      rows[seq].insert(rows[seq].end(), row.begin(), row.end());
    };
    KVLM_ASSIGN_OR_RETURN(auto result, generate(model, prompts, options, par));
    stats[shared] = result.stats;
    for (const auto& seq_rows : rows)
      logits[shared].insert(logits[shared].end(), seq_rows.begin(), seq_rows.end());
  }
  r->prefix_tokens_saved = stats[1].prompt_tokens_cached;
  r->prefill_seconds_unshared = stats[0].prefill_seconds;
  r->prefill_seconds_shared = stats[1].prefill_seconds;
  r->prefix_speedup =
      stats[1].prefill_seconds > 0 ? stats[0].prefill_seconds / stats[1].prefill_seconds : 0;
  r->prefix_exact =
      logits[0].size() == logits[1].size() &&
      std::memcmp(logits[0].data(), logits[1].data(), logits[0].size() * sizeof(float)) == 0;
  return Status::ok();
}

}  // namespace

ModelConfig paged_bench_model_config() {
  ModelConfig c = gpt2_small_config();
  c.n_ff = 768;
  c.n_vocab = 8192;
  c.eos_token_id = -1;
  c.bos_token_id = -1;
  return c;
}

Result<PagedBenchResult> run_paged_bench(Model& model, const PagedBenchOptions& options,
                                         const Parallel& par) {
  const ModelConfig& c = model.config();
  KVLM_RETURN_IF_ERROR(validate(options, c));
  PagedBenchResult r;
  r.block_size = options.block_size;
  r.n_ctx = c.n_ctx;
  r.kv_bytes_per_token = c.kv_bytes_per_token(sizeof(float));
  r.n_sequences = options.n_sequences;
  r.n_prefix_sequences = options.n_prefix_sequences;
  Draw draw{options.seed};
  KVLM_RETURN_IF_ERROR(measure_memory(model, options, par, draw, &r));
  KVLM_RETURN_IF_ERROR(measure_prefix(model, options, par, draw, &r));
  return r;
}

std::string paged_bench_json(const PagedBenchResult& r) {
  nlohmann::ordered_json j = {
      {"kv_bytes_paged", r.kv_bytes_paged},
      {"kv_bytes_contiguous", r.kv_bytes_contiguous},
      {"kv_waste_frac", r.kv_waste_frac},
      {"prefix_tokens_saved", r.prefix_tokens_saved},
      {"prefix_speedup", r.prefix_speedup},
      // Beyond the required keys.
      {"block_size", r.block_size},
      {"n_ctx", r.n_ctx},
      {"kv_bytes_per_token", r.kv_bytes_per_token},
      {"n_sequences", r.n_sequences},
      {"prompt_tokens", r.prompt_tokens},
      {"generated_tokens", r.generated_tokens},
      {"kv_bytes_used", r.kv_bytes_used},
      {"kv_paged_over_contiguous",
       r.kv_bytes_contiguous > 0
           ? static_cast<double>(r.kv_bytes_paged) / static_cast<double>(r.kv_bytes_contiguous)
           : 0.0},
      {"kv_waste_blocks_per_sequence", r.kv_waste_blocks_per_sequence},
      {"memory_run_s", r.memory_seconds},
      {"prefix_sequences", r.n_prefix_sequences},
      {"prefix_prompt_tokens", r.prefix_prompt_tokens},
      {"prefill_s_unshared", r.prefill_seconds_unshared},
      {"prefill_s_shared", r.prefill_seconds_shared},
      {"prefix_logits_identical", r.prefix_exact},
  };
  return j.dump(2);
}

std::string paged_bench_text(const PagedBenchResult& r) {
  char buf[2048];
  const double mb = 1e6;
  std::snprintf(buf, sizeof(buf),
                "paged KV cache, blocks of %d positions, %lld bytes per token\n"
                "  mixed lengths: %d sequences, %lld prompt + %lld generated tokens\n"
                "    contiguous at n_ctx %d   %12lld bytes (%.1f MB)\n"
                "    paged, peak held        %12lld bytes (%.1f MB, %.1f%% of contiguous)\n"
                "    positions cached        %12lld bytes\n"
                "    waste                   %.2f%% (%.2f blocks per sequence)\n"
                "  shared prefix: %d prompts, %lld tokens, %lld served from the cache\n"
                "    prefill unshared %.3f s, shared %.3f s: %.2fx; logits %s\n",
                r.block_size, static_cast<long long>(r.kv_bytes_per_token), r.n_sequences,
                static_cast<long long>(r.prompt_tokens), static_cast<long long>(r.generated_tokens),
                r.n_ctx, static_cast<long long>(r.kv_bytes_contiguous), r.kv_bytes_contiguous / mb,
                static_cast<long long>(r.kv_bytes_paged), r.kv_bytes_paged / mb,
                r.kv_bytes_contiguous > 0 ? 100.0 * r.kv_bytes_paged / r.kv_bytes_contiguous : 0.0,
                static_cast<long long>(r.kv_bytes_used), 100.0 * r.kv_waste_frac,
                r.kv_waste_blocks_per_sequence, r.n_prefix_sequences,
                static_cast<long long>(r.prefix_prompt_tokens),
                static_cast<long long>(r.prefix_tokens_saved), r.prefill_seconds_unshared,
                r.prefill_seconds_shared, r.prefix_speedup,
                r.prefix_exact ? "bitwise identical" : "DIFFER");
  return buf;
}

}  // namespace kvlm
