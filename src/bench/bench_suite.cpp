#include "bench/bench_suite.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "bench/machine_limits.h"
#include "ops/dispatch.h"
#include "util/huge_pages.h"

namespace kvlm {

namespace {

void report_progress(const BenchOptions& o, const std::string& line) {
  if (o.progress) o.progress(line);
}

std::string printf_string(const char* format, ...) {
  char buffer[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof buffer, format, args);
  va_end(args);
  return buffer;
}

double mb(double bytes) {
  return bytes / 1e6;
}

// The resident figures less the bandwidth probe's array, resident throughout the model runs.
ResidentMemory without_probe(ResidentMemory m, size_t probe_bytes) {
  m.peak_bytes -= std::min(m.peak_bytes, probe_bytes);
  m.current_bytes -= std::min(m.current_bytes, probe_bytes);
  return m;
}

// Shortens a run that would not fit the model's context, keeping it meaningful.
int fit(int wanted, int limit) {
  return std::max(1, std::min(wanted, limit));
}

}  // namespace

std::vector<std::vector<int32_t>> seed_prompts() {
  return {{7, 3, 19, 1, 25, 8, 11, 4, 2, 15}, {9, 2}, {1, 6, 4, 22}};
}

namespace {

// Each timed run's share of its roofline: decode against the bandwidth measured beside it,
// prefill (and batched decode's arithmetic) against the fma peak; and the batched decode's
// speedup over batch 1 that the two decode rooflines allow.
void fill_roofline_fractions(const MachineRates& rates, BenchReport* r) {
  auto decode_frac = [&](const TimedRun& run) {
    return run.cost.bytes / run.seconds / run.bandwidth;
  };
  auto fma_frac = [&](const TimedRun& run) {
    return run.seconds > 0 ? run.cost.flops / run.seconds / rates.flops_per_second : 0.0;
  };
  r->decode_roofline_frac = decode_frac(r->decode_short);
  r->decode_long_roofline_frac = decode_frac(r->decode_long);
  r->decode_batch_roofline_frac = decode_frac(r->decode_batch);
  r->decode_batch_fma_frac = fma_frac(r->decode_batch);
  auto roofline_tps = [&](const TimedRun& run) {
    return roofline_tokens_per_second(run.cost, static_cast<double>(run.tokens),
                                      {run.bandwidth, rates.flops_per_second});
  };
  r->decode_batch_speedup_bound = roofline_tps(r->decode_batch) / roofline_tps(r->decode_short);
  r->prefill_fma_frac = fma_frac(r->prefill_long);
  r->prefill_short_fma_frac = fma_frac(r->prefill_short);
}

// The cache experiments: the seed's three prompts, then one prompt of up to 64 tokens.
Status run_cache_experiments(Model& model, const BenchOptions& o, const Parallel& par,
                             const MachineRates& rates, BenchReport* r) {
  const ModelConfig& c = model.config();
  report_progress(o, "the seed's experiment: 3 prompts, 20 new tokens, uncached then cached");
  KVLM_ASSIGN_OR_RETURN(auto seed,
                        run_cache_experiment(model, seed_prompts(), 20, rates, par, o.kv));
  r->seed = seed;
  const int n64 = std::min(64, (c.n_ctx + 1) / 2);
  report_progress(
      o, printf_string("a %d-token prompt, %d new tokens, uncached then cached", n64, n64));
  std::vector<int32_t> prompt(n64);
  for (int i = 0; i < n64; ++i) prompt[i] = static_cast<int32_t>((i * 7919 + 5) % c.n_vocab);
  KVLM_ASSIGN_OR_RETURN(auto run_64, run_cache_experiment(model, {prompt}, n64, rates, par, o.kv));
  r->run_64 = run_64;
  return Status::ok();
}

}  // namespace

Result<BenchReport> run_bench(Model& model, const BenchOptions& o, const Parallel& par) {
  const ModelConfig& c = model.config();
  BenchReport r;
  r.simd_target = active_simd_target();
  r.n_threads = par.n_threads;
  r.decode_only = o.decode_only;
  r.weights = model.weight_dtype();
  r.weight_bytes = model.weight_bytes();

  report_progress(o, "machine limits: read bandwidth and fma throughput");
  KVLM_ASSIGN_OR_RETURN(auto bandwidth,
                        measure_read_bandwidth(o.bandwidth_bytes, o.bandwidth_repeats, par));
  r.bandwidth_gbs = bandwidth / 1e9;
  r.fma_gflops = measure_fma_throughput(o.limit_repeats, o.fma_seconds, par) / 1e9;
  const MachineRates rates{r.bandwidth_gbs * 1e9, r.fma_gflops * 1e9};
  // The probe's array stays resident (and touched) from here to the memory reading at the end,
  // so the model runs' own peak is the peak less its bytes. The first bandwidth array is freed.
  KVLM_ASSIGN_OR_RETURN(auto probe, ReadBandwidthProbe::create(o.probe_bytes, par));
  KVLM_RETURN_IF_ERROR(reset_peak_resident_memory());
  const auto read_bandwidth = [&] { return probe.measure_sustained(o.probe_seconds); };

  const int decode_positions = 1 + o.decode_steps * std::max(o.decode_repeats, 1);
  r.short_prompt = fit(o.short_prompt, c.n_ctx);
  r.long_prompt = fit(o.long_prompt, c.n_ctx);
  r.short_context = fit(o.short_context, c.n_ctx - decode_positions);
  r.long_context = fit(o.long_context, c.n_ctx - decode_positions);
  r.batch = std::max(o.batch, 1);
  auto prefill = [&](int n, TimedRun* out) -> Status {
    report_progress(o, printf_string("prefill of %d tokens", n));
    KVLM_ASSIGN_OR_RETURN(auto run, time_prefill(model, n, o.prefill_repeats, par, o.kv));
    *out = run;
    r.kv_bytes_peak = std::max(r.kv_bytes_peak, out->kv_bytes);
    return Status::ok();
  };
  auto decode = [&](int batch, int context, TimedRun* out) -> Status {
    report_progress(o, printf_string("decode, batch %d, %d positions cached", batch, context));
    KVLM_ASSIGN_OR_RETURN(auto run, time_decode(model, batch, context, o.decode_steps,
                                                o.decode_repeats, par, o.kv, read_bandwidth));
    *out = run;
    r.kv_bytes_peak = std::max(r.kv_bytes_peak, out->kv_bytes);
    return Status::ok();
  };
  if (!o.decode_only) {
    KVLM_RETURN_IF_ERROR(prefill(r.short_prompt, &r.prefill_short));
    KVLM_RETURN_IF_ERROR(prefill(r.long_prompt, &r.prefill_long));
  }
  KVLM_RETURN_IF_ERROR(decode(1, r.short_context, &r.decode_short));
  KVLM_RETURN_IF_ERROR(decode(1, r.long_context, &r.decode_long));
  KVLM_RETURN_IF_ERROR(decode(r.batch, r.short_context, &r.decode_batch));
  r.huge_page_bytes = process_huge_page_bytes();

  fill_roofline_fractions(rates, &r);
  if (o.decode_only) {
    KVLM_ASSIGN_OR_RETURN(auto memory, read_resident_memory());
    r.memory = without_probe(memory, probe.bytes());
    return r;
  }

  KVLM_RETURN_IF_ERROR(run_cache_experiments(model, o, par, rates, &r));

  KVLM_ASSIGN_OR_RETURN(auto memory, read_resident_memory());
  r.memory = without_probe(memory, probe.bytes());
  return r;
}

std::string bench_report_json(const BenchReport& r) {
  const auto& s = r.seed;
  const auto& e = r.run_64;
  nlohmann::ordered_json j = {
      {"bandwidth_gbs", r.bandwidth_gbs},
      {"fma_gflops", r.fma_gflops},
      {"prefill_tps_128", r.prefill_short.tokens_per_second()},
      {"prefill_tps_512", r.prefill_long.tokens_per_second()},
      {"decode_tps_b1_ctx128", r.decode_short.tokens_per_second()},
      {"decode_tps_b1_ctx900", r.decode_long.tokens_per_second()},
      {"decode_tps_b8", r.decode_batch.tokens_per_second()},
      {"decode_roofline_frac", r.decode_roofline_frac},
      {"prefill_fma_frac", r.prefill_fma_frac},
      {"seed_speedup", s.speedup},
      {"seed_work_ratio", s.position_ratio},
      {"weights", r.weights},
      // Beyond the required keys.
      {"simd_target", r.simd_target},
      {"threads", r.n_threads},
      {"weight_bytes", r.weight_bytes},
      {"huge_page_bytes", r.huge_page_bytes},
      {"decode_roofline_frac_ctx900", r.decode_long_roofline_frac},
      {"decode_roofline_frac_b8", r.decode_batch_roofline_frac},
      // The bandwidth each decode fraction is against, read beside its window.
      {"decode_bandwidth_gbs_ctx128", r.decode_short.bandwidth / 1e9},
      {"decode_bandwidth_gbs_ctx900", r.decode_long.bandwidth / 1e9},
      {"decode_bandwidth_gbs_b8", r.decode_batch.bandwidth / 1e9},
      {"prefill_fma_frac_128", r.prefill_short_fma_frac},
      {"decode_b8_over_b1",
       r.decode_batch.tokens_per_second() / r.decode_short.tokens_per_second()},
      {"decode_b8_over_b1_roofline", r.decode_batch_speedup_bound},
      {"decode_fma_frac_b8", r.decode_batch_fma_frac},
      {"seed_uncached_s", s.uncached_seconds},
      {"seed_cached_s", s.cached_seconds},
      {"seed_roofline_ratio", s.roofline_ratio},
      {"seed_tokens_identical", s.identical},
      {"run64_uncached_s", e.uncached_seconds},
      {"run64_cached_s", e.cached_seconds},
      {"run64_speedup", e.speedup},
      {"run64_work_ratio", e.position_ratio},
      {"run64_roofline_ratio", e.roofline_ratio},
      {"run64_tokens_identical", e.identical},
      {"peak_resident_bytes", r.memory.peak_bytes},
      {"kv_bytes_peak", r.kv_bytes_peak},
      {"resident_overhead_bytes", static_cast<double>(r.memory.peak_bytes) -
                                      static_cast<double>(r.weight_bytes) -
                                      static_cast<double>(r.kv_bytes_peak)},
      {"prompt_lengths", {r.short_prompt, r.long_prompt}},
      {"decode_contexts", {r.short_context, r.long_context}},
      {"decode_batch", r.batch},
  };
  return j.dump(2);
}

namespace {

std::string experiment_line(const char* name, const CacheExperiment& e) {
  return printf_string("  %-26s %9.3f %9.3f %8.2fx %8.1fx %8.2fx   %s\n", name, e.uncached_seconds,
                       e.cached_seconds, e.speedup, e.position_ratio, e.roofline_ratio,
                       e.identical ? "yes" : "NO");
}

// The measured speeds, each against its roofline.
std::string speed_section(const BenchReport& r) {
  std::string t;
  t += "Speed                                     tokens/s   achieved        roofline fraction\n";
  t += "  (each decode run against the read bandwidth measured just before and after it)\n";
  auto prefill = [&](const TimedRun& run, int n, double frac) {
    t += printf_string(
        "  prefill, %4d-token prompt           %10.1f   %6.1f GFLOP/s  %5.1f%% of fma peak\n", n,
        run.tokens_per_second(), run.cost.flops / run.seconds / 1e9, 100 * frac);
  };
  auto decode = [&](const TimedRun& run, int batch, int ctx) {
    t += printf_string(
        "  decode, batch %d, %4d cached        %10.1f   %6.1f GB/s     %5.1f%% of bandwidth (%.1f "
        "GB/s "
        "beside it)\n",
        batch, ctx, run.tokens_per_second(), run.cost.bytes / run.seconds / 1e9,
        100 * run.cost.bytes / run.seconds / run.bandwidth, run.bandwidth / 1e9);
  };
  if (!r.decode_only) {
    prefill(r.prefill_short, r.short_prompt, r.prefill_short_fma_frac);
    prefill(r.prefill_long, r.long_prompt, r.prefill_fma_frac);
  }
  decode(r.decode_short, 1, r.short_context);
  decode(r.decode_long, 1, r.long_context);
  decode(r.decode_batch, r.batch, r.short_context);
  t += printf_string(
      "  batch %d decode gives %.2fx the tokens/s of batch 1 (sum over sequences); the rooflines\n"
      "  allow %.2fx here (batch %d at %.1f%% of the fma peak)\n\n",
      r.batch, r.decode_batch.tokens_per_second() / r.decode_short.tokens_per_second(),
      r.decode_batch_speedup_bound, r.batch, 100 * r.decode_batch_fma_frac);
  return t;
}

// The cache experiments, and why the seed's speedup is not its position ratio.
std::string cache_section(const BenchReport& r) {
  const double bw = r.bandwidth_gbs * 1e9, peak = r.fma_gflops * 1e9;
  std::string t;
  t += "The KV cache (greedy generation; roofline = sum over steps of max(bytes/bandwidth, "
       "flops/peak))\n";
  t += "                              uncached    cached  measured  position  roofline  same\n";
  t += "                                     s         s   speedup     ratio prediction tokens\n";
  t += experiment_line("seed: 3 prompts, 20 new", r.seed);
  t += experiment_line(
      printf_string("%d-token prompt, %d new", r.run_64.prompt_lengths[0], r.run_64.max_new_tokens)
          .c_str(),
      r.run_64);
  const CacheExperiment& s = r.seed;
  const double steps = s.max_new_tokens;
  t += printf_string(
      "\n  Why not %.1fx: the position ratio counts rows, but a step's time is set by the larger "
      "of\n"
      "  its bytes and its arithmetic. A cached decode step reads all %.0f MB of weights whatever\n"
      "  its row count: >= %.1f ms at %.1f GB/s. The uncached run's steps are prefills of %d..%d\n"
      "  rows, %.2f GFLOP per step on average: %.1f ms at the fma peak. So the rooflines predict\n"
      "  %.1f ms / %.1f ms = %.2fx per step, not %.1fx; measured: %.1f ms vs %.1f ms.\n\n",
      s.position_ratio, mb(r.weight_bytes), 1e3 * r.weight_bytes / bw, r.bandwidth_gbs,
      [&] {
        int n = 0;
        for (int l : s.prompt_lengths) n += l;
        return n;
      }(),
      [&] {
        int n = 0;
        for (int l : s.prompt_lengths) n += l + s.max_new_tokens - 1;
        return n;
      }(),
      s.uncached_cost.flops / steps / 1e9, 1e3 * s.uncached_cost.flops / steps / peak,
      1e3 * s.roofline_uncached_seconds / steps, 1e3 * s.roofline_cached_seconds / steps,
      s.roofline_ratio, s.position_ratio, 1e3 * s.uncached_seconds / steps,
      1e3 * s.cached_seconds / steps);
  return t;
}

// The resident set at its peak, split into weights, KV cache and the rest.
std::string memory_section(const BenchReport& r) {
  std::string t;
  const double overhead = static_cast<double>(r.memory.peak_bytes) -
                          static_cast<double>(r.weight_bytes) -
                          static_cast<double>(r.kv_bytes_peak);
  t += "Memory (resident set, /proc/self/status)\n";
  t += printf_string(
      "  peak during the model runs %.1f MB = weights %.1f MB + largest KV cache %.1f MB + %.1f MB "
      "other\n  (activations, logits, code and libraries); resident now %.1f MB\n",
      mb(r.memory.peak_bytes), mb(r.weight_bytes), mb(r.kv_bytes_peak), mb(overhead),
      mb(r.memory.current_bytes));
  return t;
}

}  // namespace

std::string bench_report_text(const BenchReport& r) {
  std::string t;
  t += printf_string(
      "kvlm bench: %s weights (%.1f MB read per decode step), %d threads, SIMD %s\n"
      "  %.1f MB of the process's memory in huge pages%s\n\n",
      r.weights.c_str(), mb(r.weight_bytes), r.n_threads, r.simd_target.c_str(),
      mb(r.huge_page_bytes),
      r.huge_page_bytes == 0 ? " (none: 4 KiB pages cost decode speed; see KVLM_HUGE_PAGES)" : "");
  const double bw = r.bandwidth_gbs * 1e9;
  t += "Machine limits, measured in this run\n";
  t += printf_string("  memory read bandwidth (all threads):  %7.1f GB/s\n", r.bandwidth_gbs);
  t += printf_string("  fp32 fma throughput (all threads):    %7.1f GFLOP/s\n", r.fma_gflops);
  t += printf_string("  batch-1 decode roofline at this weight size: %.1f tokens/s\n\n",
                     bw / static_cast<double>(r.weight_bytes));

  t += speed_section(r);
  if (r.decode_only) return t;
  t += cache_section(r);
  t += memory_section(r);
  return t;
}

}  // namespace kvlm
