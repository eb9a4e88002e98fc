// kvlm demo: the seed's experiment. Three prompts of different lengths, 20 new tokens each,
// generated once without the cache and once with it; shows that tokens and logits are
// identical, how much work the cache saves and what it costs in memory. A client of the
// engine: the uncached run is its recompute baseline, the cached run its normal mode.
#include <cmath>
#include <cstdio>
#include <map>

#include "cli_common.h"
#include "commands.h"
#include "kv/kv_cache.h"
#include "kv_flags.h"
#include "kvlm/engine.h"
#include "model/random_gpt2.h"

namespace kvlm::cli {

namespace {

struct DemoFlags {
  ModelFlags model;
  int max_new = 20;
  std::string kv_dtype;  // --kv-dtype
  WindowFlags window;    // --kv-window, --sink-tokens
};

// Token positions a padded batch pushes through the model (the seed's count, per row):
// uncached, step s runs max_len + s positions; cached, prefill runs max_len, then 1 a step.
int64_t padded_positions(size_t max_len, int n_new, bool cached) {
  if (cached) return static_cast<int64_t>(max_len) + n_new - 1;
  int64_t total = 0;
  for (int s = 0; s < n_new; ++s) total += static_cast<int64_t>(max_len) + s;
  return total;
}

struct DemoRun {
  std::vector<std::vector<int32_t>> tokens;  // new tokens of each prompt
  EngineStats stats;
};

// The prompts as one batch on the engine, every prompt running at once, greedy, max_new tokens
// each (end ids do not stop them: the seed's loop had none). Blocks of one position, so the
// cache holds exactly the positions the formula counts. `observe(seq, step, logits)` sees every
// logits row sampled from.
Result<DemoRun> run_batch(
    std::shared_ptr<LoadedModel> model, const std::vector<std::vector<int32_t>>& prompts,
    const DemoFlags& flags, bool cached,
    const std::function<void(size_t seq, int step, std::span<const float>)>& observe) {
  std::map<RequestId, size_t> seq_of;
  EngineOptions options;
  options.block_size = 1;
  options.max_running = static_cast<int>(prompts.size());
  options.threads = flags.model.threads;
  options.prefix_caching = false;  // a static batch: nothing to share
  options.recompute_every_step = !cached;
  if (!flags.kv_dtype.empty()) options.kv_dtype = flags.kv_dtype;
  options.kv_window = flags.window.window;
  options.sink_tokens = flags.window.sinks;
  for (const auto& p : prompts)
    options.kv_tokens += static_cast<int64_t>(p.size()) + flags.max_new - 1;
  options.max_batch_tokens = static_cast<int>(options.kv_tokens);
  options.on_logits = [&](RequestId id, int step, std::span<const float> logits) {
    observe(seq_of.at(id), step, logits);
  };
  KVLM_ASSIGN_OR_RETURN(auto engine, Engine::create(std::move(model), options));
  DemoRun run;
  run.tokens.resize(prompts.size());
  for (size_t s = 0; s < prompts.size(); ++s) {
    Request r;
    r.prompt_ids = prompts[s];
    r.max_new_tokens = flags.max_new;
    r.sampling.temperature = 0.0f;
    r.ignore_eos = true;
    KVLM_ASSIGN_OR_RETURN(const RequestId id, engine->submit(std::move(r)));
    seq_of[id] = s;
  }
  while (engine->has_unfinished())
    for (const Event& event : engine->step()) {
      if (event.finish == FinishReason::kError) return Status::error(event.error);
      if (event.token >= 0) run.tokens[seq_of.at(event.id)].push_back(event.token);
    }
  run.stats = engine->stats();
  return run;
}

// How much work the cache saved: the seed's count of padded positions, the positions kvlm
// really computed (ragged), and the wall times.
void print_work(const std::vector<std::vector<int32_t>>& prompts, int max_new,
                const EngineStats& uncached, const EngineStats& cached) {
  size_t max_len = 0;
  for (const auto& p : prompts) max_len = std::max(max_len, p.size());
  const int64_t padded_uncached = padded_positions(max_len, max_new, false);
  const int64_t padded_cached = padded_positions(max_len, max_new, true);
  std::printf(
      "token positions per padded row (the seed's count): uncached %lld, cached %lld "
      "(%.1fx less work)\n",
      static_cast<long long>(padded_uncached), static_cast<long long>(padded_cached),
      static_cast<double>(padded_uncached) / padded_cached);
  std::printf("token positions kvlm computed (ragged, all sequences): uncached %lld, cached %lld\n",
              static_cast<long long>(uncached.rows_computed),
              static_cast<long long>(cached.rows_computed));
  const double t_uncached = uncached.prefill_seconds + uncached.decode_seconds;
  const double t_cached = cached.prefill_seconds + cached.decode_seconds;
  std::printf("wall time: uncached %.3f s, cached %.3f s: measured speedup %.2fx\n\n", t_uncached,
              t_cached, t_uncached / t_cached);
}

// What the cache costs: bytes per token for the dtype, for this run by formula and as held
// (blocks of one position: the same), with full multi-head K/V, and at the full context.
void print_cache_costs(const ModelConfig& c, KvDtype dtype, const KvWindow& window,
                       const std::vector<std::vector<int32_t>>& prompts, int max_new,
                       const EngineStats& cached) {
  const int64_t per_token = c.kv_bytes_per_token(sizeof(float));
  const int64_t stored_per_token =
      static_cast<int64_t>(2 * c.n_layer * kv_row_bytes(dtype, c.kv_dim()));
  int64_t positions = 0;  // the last new token is never fed back
  for (const auto& p : prompts) positions += static_cast<int64_t>(p.size()) + max_new - 1;
  const int64_t formula_bytes = stored_per_token * positions;
  if (dtype == KvDtype::f32) {
    std::printf(
        "KV cache, fp32: 2 x %d layers x %d KV heads x %d head_dim x 4 bytes = %lld bytes "
        "per token\n",
        c.n_layer, c.n_kv_head, c.head_dim, static_cast<long long>(per_token));
  } else {
    std::printf(
        "KV cache, %s: 2 x %d layers x %zu bytes per row of %d KV heads x %d head_dim = "
        "%lld bytes per token (fp32: %lld)\n",
        kv_dtype_name(dtype), c.n_layer, kv_row_bytes(dtype, c.kv_dim()), c.n_kv_head, c.head_dim,
        static_cast<long long>(stored_per_token), static_cast<long long>(per_token));
  }
  std::printf("  by formula for this run (prompt + new - 1 positions per sequence): %lld bytes\n",
              static_cast<long long>(formula_bytes));
  std::printf("  as allocated by the cache:                                      %lld bytes\n",
              static_cast<long long>(cached.kv_bytes_peak));
  if (window.enabled())
    std::printf(
        "  (--kv-window %d --sink-tokens %d: each row attends over at most %d positions and the\n"
        "   cache evicts the rest, so its peak stays near %lld bytes however long the run)\n",
        window.window, window.sinks, window.window,
        static_cast<long long>(stored_per_token * window.window *
                               static_cast<int64_t>(prompts.size())));
  if (c.n_kv_head != c.n_head)
    std::printf(
        "  with full multi-head K/V (%d heads) it would be:                %lld bytes "
        "(grouped-query attention saves %.1fx)\n",
        c.n_head, static_cast<long long>(formula_bytes / c.n_kv_head * c.n_head),
        static_cast<double>(c.n_head) / c.n_kv_head);
  std::printf("  at the full context (%d tokens), batch 1: %lld bytes; batch 8: %lld bytes\n",
              c.n_ctx, static_cast<long long>(stored_per_token * c.n_ctx),
              static_cast<long long>(stored_per_token * c.n_ctx * 8));
}

int run_demo(const DemoFlags& flags) {
  auto kv = kv_storage_from_flag(flags.kv_dtype);
  if (!kv) return fail(kv.status());
  auto window = window_from_flags(flags.window);
  if (!window) return fail(window.status());
  std::shared_ptr<Model> model;
  if (flags.model.model.empty()) {
    std::printf(
        "No --model given: using a GPT-2 124M-shaped model with seeded random weights, made in\n"
        "memory (seed 1234). Its tokens are meaningless; the cache's behaviour is real.\n\n");
    auto random = make_random_gpt2(gpt2_small_config(), RandomGpt2Options{});
    if (!random) return fail(random.status());
    model = std::move(random.value());
  } else {
    auto loaded = load_model_from_flags(flags.model);
    if (!loaded) return fail(loaded.status());
    model = std::move(loaded.value());
  }
  KVLM_CLI_RETURN_IF_ERROR(model->check_kv_window(window.value()));  // GPT-2 cannot
  const ModelConfig& c = model->config();
  const Parallel par = parallel_from_flags(flags.model);
  auto loaded = LoadedModel::from_parts(model, nullptr);  // ids only
  if (!loaded) return fail(loaded.status());
  const std::vector<std::vector<int32_t>> prompts = {
      {7, 3, 19, 1, 25, 8, 11, 4, 2, 15}, {9, 2}, {1, 6, 4, 22}};
  std::printf(
      "model: %d layers, %d heads (%d KV heads), head_dim %d, %d wide, vocab %d, %s "
      "weights; %d threads\n",
      c.n_layer, c.n_head, c.n_kv_head, c.head_dim, c.n_embd, c.n_vocab,
      model->weight_dtype().c_str(), par.n_threads);
  std::printf("prompts: [7,3,19,1,25,8,11,4,2,15] [9,2] [1,6,4,22], %d new tokens each\n\n",
              flags.max_new);

  // Uncached first, keeping every step's logits to compare the cached run against.
  // Both runs store K/V as --kv-dtype: the uncached one writes and reads the same cache type.
  std::vector<std::vector<float>> reference;  // [step * n_seq + seq][n_vocab]
  const size_t n_seq = prompts.size();
  auto uncached = run_batch(loaded.value(), prompts, flags, false,
                            [&](size_t seq, int step, std::span<const float> logits) {
                              const size_t index = static_cast<size_t>(step) * n_seq + seq;
                              if (reference.size() <= index) reference.resize(index + 1);
                              reference[index].assign(logits.begin(), logits.end());
                            });
  if (!uncached) return fail(uncached.status());

  float max_diff = 0.0f;
  bool compared_all = true;
  auto cached = run_batch(loaded.value(), prompts, flags, true,
                          [&](size_t seq, int step, std::span<const float> logits) {
                            const size_t index = static_cast<size_t>(step) * n_seq + seq;
                            if (index >= reference.size() || reference[index].empty()) {
                              compared_all = false;
                              return;
                            }
                            const auto& ref = reference[index];
                            for (size_t i = 0; i < logits.size(); ++i)
                              max_diff = std::max(max_diff, std::fabs(logits[i] - ref[i]));
                          });
  if (!cached) return fail(cached.status());

  for (size_t s = 0; s < n_seq; ++s)
    std::printf("sequence %zu: %s\n", s + 1, join_ids(cached->tokens[s], " ").c_str());
  const bool same = uncached->tokens == cached->tokens && compared_all;
  std::printf("\ntokens identical (cached vs uncached): %s\n", same ? "yes" : "NO");
  std::printf("max |logit difference| over all steps: %s\n\n", format_float(max_diff).c_str());

  print_work(prompts, flags.max_new, uncached->stats, cached->stats);
  print_cache_costs(c, kv->dtype, window.value(), prompts, flags.max_new, cached->stats);
  return same && max_diff == 0.0f ? 0 : 2;
}

}  // namespace

void add_demo_command(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<DemoFlags>();
  CLI::App* cmd = app.add_subcommand(
      "demo", "The seed's experiment: cached vs uncached generation, identical results, less work");
  add_model_flags(cmd, &flags->model, false);
  cmd->add_option("--max-new", flags->max_new, "New tokens per prompt (default 20)")
      ->check(CLI::Range(1, 1000));
  add_kv_dtype_flag(cmd, &flags->kv_dtype);
  add_window_flags(cmd, &flags->window);
  cmd->callback([flags, exit_code] { *exit_code = run_demo(*flags); });
}

}  // namespace kvlm::cli
