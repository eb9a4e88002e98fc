// kvlm bench: speed measured against this machine's own limits (see src/bench/bench_suite.h).
// Without --model it runs the embedded GPT-2 124M-shaped model with seeded random weights,
// made in memory in the storage type --weights names (so no conversion copy is held).
#include <chrono>
#include <cstdio>

#include "bench/bench_suite.h"
#include "bench/engine_bench.h"
#include "bench/paged_bench.h"
#include "cli_common.h"
#include "commands.h"
#include "kv_flags.h"
#include "kvlm/engine.h"
#include "model/gguf_model.h"
#include "model/random_gpt2.h"
#include "ops/dispatch.h"

namespace kvlm::cli {

namespace {

// Flags of `kvlm bench`; later modes (e.g. a paged cache) add their fields here.
struct BenchFlags {
  ModelFlags model;
  bool json = false;
  bool paged = false;   // --paged: the paged KV cache's memory figures instead
  bool engine = false;  // --engine: continuous batching under load instead
  EngineBenchOptions engine_options;
  std::string kv_dtype;      // --kv-dtype
  bool decode_only = false;  // --decode-only: the three decode runs and the limits alone
  std::string simd;          // --simd: run every kernel on this Highway target
  WindowFlags window;        // --kv-window, --sink-tokens: --engine only
};

// --simd NAME: pins the kernels (and the limits' loops) to one of the targets this CPU runs,
// so one machine measures the other kind's path too (AVX2 on an AVX-512 machine).
Status pin_simd_from_flag(const std::string& name) {
  if (name.empty()) return Status::ok();
  std::string names;
  for (const SimdTarget& t : available_simd_targets()) {
    if (t.name == name) {
      pin_simd_target(t.id);
      return Status::ok();
    }
    names += (names.empty() ? "" : ", ") + t.name;
  }
  return Status::error("--simd: this CPU runs " + names + "; not '" + name + "'");
}

Result<std::unique_ptr<Model>> bench_model(const ModelFlags& flags) {
  if (!flags.model.empty()) return load_model_from_flags(flags);
  return make_random_gpt2_from_flags(flags);
}

// --paged: without --model, a model with GPT-2 124M's KV shape but a thin MLP, so it runs in
// about a minute (see paged_bench_model_config()).
int run_paged_bench_command(const BenchFlags& flags) {
  std::fprintf(stderr, "kvlm bench --paged: %s\n",
               flags.model.model.empty() ? "making a model with GPT-2 124M's KV shape (random)"
                                         : ("loading " + flags.model.model).c_str());
  std::unique_ptr<Model> model;
  if (flags.model.model.empty()) {
    auto made = make_random_gpt2(paged_bench_model_config(), RandomGpt2Options{});
    if (!made) return fail(made.status());
    model = std::move(made.value());
  } else {
    auto loaded = load_model_from_flags(flags.model);
    if (!loaded) return fail(loaded.status());
    model = std::move(loaded.value());
  }
  auto r = run_paged_bench(*model, PagedBenchOptions{}, parallel_from_flags(flags.model));
  if (!r) return fail(r.status());
  const std::string out = flags.json ? paged_bench_json(r.value()) : paged_bench_text(r.value());
  std::printf("%s\n", out.c_str());
  return r->prefix_exact ? 0 : 2;
}

// --engine: many requests arriving together on the engine (src/bench/engine_bench.h).
int run_engine_bench_command(const BenchFlags& flags) {
  std::fprintf(stderr, "kvlm bench --engine: %s\n",
               flags.model.model.empty()
                   ? "making the embedded GPT-2 124M-shaped model (random weights, seed 1234)"
                   : ("loading " + flags.model.model).c_str());
  auto model = bench_model(flags.model);
  if (!model) return fail(model.status());
  auto loaded = LoadedModel::from_parts(std::shared_ptr<Model>(std::move(model.value())), nullptr);
  if (!loaded) return fail(loaded.status());
  EngineBenchOptions options = flags.engine_options;
  options.threads = flags.model.threads;
  if (!flags.kv_dtype.empty()) options.kv_dtype = flags.kv_dtype;
  options.kv_window = flags.window.window;
  options.sink_tokens = flags.window.sinks;
  auto r = run_engine_bench(loaded.value(), options);
  if (!r) return fail(r.status());
  const std::string out = flags.json ? engine_bench_json(r.value()) : engine_bench_text(r.value());
  std::printf("%s\n", out.c_str());
  return !options.static_baseline || r->static_identical ? 0 : 2;
}

int run_bench_command(const BenchFlags& flags) {
  if (flags.paged && flags.engine)
    return fail(Status::error("--paged and --engine are separate benchmarks: give one"));
  KVLM_CLI_RETURN_IF_ERROR(kv_storage_from_flag(flags.kv_dtype).status());
  if (flags.paged && !flags.kv_dtype.empty())
    return fail(
        Status::error("--paged measures the f32 cache's memory; --kv-dtype is not used there"));
  if (flags.decode_only && (flags.paged || flags.engine))
    return fail(
        Status::error("--decode-only applies to the default benchmark, not --paged or --engine"));
  KVLM_CLI_RETURN_IF_ERROR(window_from_flags(flags.window).status());
  // The default run times fixed cache depths (128 and 900 positions) that a window would
  // change, on the GPT-2 shape that cannot take one; the engine's load test is where a window
  // runs as served.
  if (flags.window.window > 0 && !flags.engine)
    return fail(Status::error(
        "--kv-window applies to kvlm bench --engine (requests on the engine's paged cache)"));
  KVLM_CLI_RETURN_IF_ERROR(pin_simd_from_flag(flags.simd));
  if (flags.paged) return run_paged_bench_command(flags);
  if (flags.engine) return run_engine_bench_command(flags);
  const auto start = std::chrono::steady_clock::now();
  std::fprintf(stderr, "kvlm bench: %s\n",
               flags.model.model.empty()
                   ? "making the embedded GPT-2 124M-shaped model (random weights, seed 1234)"
                   : ("loading " + flags.model.model).c_str());
  auto model = bench_model(flags.model);
  if (!model) return fail(model.status());
  BenchOptions options;
  options.progress = [](const std::string& line) {
    std::fprintf(stderr, "kvlm bench: %s\n", line.c_str());
  };
  auto kv = kv_storage_for_model(flags.kv_dtype, *model.value(), parallel_from_flags(flags.model));
  if (!kv) return fail(kv.status());
  options.kv = kv.value();
  options.decode_only = flags.decode_only;
  auto report = run_bench(*model.value(), options, parallel_from_flags(flags.model));
  if (!report) return fail(report.status());
  if (flags.json) {
    std::printf("%s\n", bench_report_json(report.value()).c_str());
  } else {
    const ModelConfig& c = model.value()->config();
    std::printf("model: %s, %d layers, %d heads of %d, %d wide, vocab %d\n",
                flags.model.model.empty() ? "embedded GPT-2 124M shape" : flags.model.model.c_str(),
                c.n_layer, c.n_head, c.head_dim, c.n_embd, c.n_vocab);
    std::printf("%s", bench_report_text(report.value()).c_str());
  }
  std::fprintf(stderr, "kvlm bench: done in %.1f s\n",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return flags.decode_only || (report->seed.identical && report->run_64.identical) ? 0 : 2;
}

}  // namespace

void add_bench_command(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<BenchFlags>();
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Prefill and decode speed against this machine's measured bandwidth and fma peak, and the "
      "seed's cached-vs-uncached experiment against the roofline's prediction");
  add_model_flags(cmd, &flags->model, false);
  cmd->add_flag("--json", flags->json, "Print one JSON object instead of the tables");
  cmd->add_flag("--paged", flags->paged,
                "Measure the paged KV cache instead: bytes held vs a contiguous cache, waste, "
                "shared-prefix tokens saved and prefill speedup");
  cmd->add_flag("--engine", flags->engine,
                "Measure the engine under load instead: requests arriving together, continuous "
                "batching, time to first token, inter-token latency, against a static batch");
  cmd->add_flag("--decode-only", flags->decode_only,
                "Only the decode runs (batch 1 at 128 and 900 cached, batch 8) and the machine's "
                "limits, for quick back-to-back comparisons (about 6 s)");
  cmd->add_option(
      "--simd", flags->simd,
      "Run the kernels on this SIMD target instead of the best one (a name from the "
      "report's 'SIMD' line: AVX3, AVX2, SSE4, ...), to measure another machine's path");
  EngineBenchOptions& e = flags->engine_options;
  cmd->add_option("--requests", e.n_requests, "With --engine: requests (default 64)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--new-tokens", e.new_tokens, "With --engine: new tokens each (default 64)")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--min-prompt", e.min_prompt, "With --engine: shortest prompt (default 16)")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--max-prompt", e.max_prompt, "With --engine: longest prompt (default 512)")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--max-seqs", e.max_running,
                  "With --engine: sequences running at once (default 16)")
      ->check(CLI::Range(1, 4096));
  add_kv_dtype_flag(cmd, &flags->kv_dtype);
  add_window_flags(cmd, &flags->window);
  cmd->callback([flags, exit_code] { *exit_code = run_bench_command(*flags); });
}

}  // namespace kvlm::cli
