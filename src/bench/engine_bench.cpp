#include "bench/engine_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "eval/kv_calibration.h"
#include "generate/generate.h"
#include "model/model.h"

namespace kvlm {

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

LatencySummary summarize(std::vector<double> values) {
  LatencySummary s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  auto at = [&](double q) { return values[static_cast<size_t>(q * (values.size() - 1) + 0.5)]; };
  s.p50 = at(0.50);
  s.p99 = at(0.99);
  return s;
}

std::vector<std::vector<int32_t>> make_prompts(const EngineBenchOptions& o, int n_vocab,
                                               int longest) {
  std::mt19937_64 rng(o.seed);
  auto token = [&] { return static_cast<int32_t>(rng() % static_cast<uint64_t>(n_vocab)); };
  // The prefix fits every prompt the workload allows (so a small --max-prompt shrinks it).
  std::vector<int32_t> prefix(std::max(0, std::min({o.shared_prefix, longest, o.max_prompt}) - 1));
  for (int32_t& t : prefix) t = token();
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < o.n_requests; ++i) {
    int length = o.min_prompt + static_cast<int>(rng() % (o.max_prompt - o.min_prompt + 1));
    std::vector<int32_t> p;
    if (i % 4 == 0) {  // a chat-style system prompt shared by a quarter of the requests
      p = prefix;
      length = std::max(length, static_cast<int>(prefix.size()) + 1);
    }
    length = std::min(length, longest);
    while (static_cast<int>(p.size()) < length) p.push_back(token());
    p.resize(length);
    prompts.push_back(std::move(p));
  }
  return prompts;
}

Request greedy_request(std::vector<int32_t> prompt, int new_tokens) {
  Request r;
  r.prompt_ids = std::move(prompt);
  r.max_new_tokens = new_tokens;
  r.sampling.temperature = 0.0f;
  r.ignore_eos = true;
  return r;
}

// The decode speed of one request alone: a 128-token prompt, then new_tokens decode steps.
Result<double> single_decode_speed(std::shared_ptr<LoadedModel> model, const EngineBenchOptions& o,
                                   const std::vector<int32_t>& prompt) {
  EngineOptions eo;
  eo.max_running = 1;
  eo.threads = o.threads;
  eo.kv_dtype = o.kv_dtype;
  eo.kv_window = o.kv_window;
  eo.sink_tokens = o.sink_tokens;
  eo.kv_tokens = static_cast<int64_t>(prompt.size()) + o.new_tokens;
  KVLM_ASSIGN_OR_RETURN(auto engine, Engine::create(model, eo));
  std::vector<Request> one;
  one.push_back(greedy_request(prompt, o.new_tokens));
  KVLM_ASSIGN_OR_RETURN(auto done, run_to_completion(*engine, std::move(one)));
  const EngineStats st = engine->stats();
  return st.decode_seconds > 0 ? st.decode_step_tokens / st.decode_seconds : 0.0;
}

}  // namespace

Result<EngineBenchResult> run_engine_bench(std::shared_ptr<LoadedModel> model,
                                           const EngineBenchOptions& o) {
  if (o.n_requests < 1 || o.min_prompt < 1 || o.max_prompt < o.min_prompt || o.new_tokens < 1)
    return Status::error("engine bench: bad workload sizes");
  // A window renumbers positions within itself: prompts and new tokens may pass the context.
  const int longest = o.kv_window > 0 ? o.max_prompt : model->n_ctx() - o.new_tokens + 1;
  if (longest < 1) return Status::error("engine bench: new tokens beyond the context");
  const auto prompts = make_prompts(o, model->n_vocab(), longest);
  EngineBenchResult r;
  r.n_requests = o.n_requests;

  EngineOptions eo;
  eo.max_running = o.max_running;
  eo.max_batch_tokens = o.max_batch_tokens;
  eo.threads = o.threads;
  eo.kv_dtype = o.kv_dtype;
  eo.kv_window = o.kv_window;
  eo.sink_tokens = o.sink_tokens;
  eo.kv_tokens =
      static_cast<int64_t>(o.max_running) * std::min(model->n_ctx(), o.max_prompt + o.new_tokens);
  KVLM_ASSIGN_OR_RETURN(auto engine, Engine::create(model, eo));
  std::map<RequestId, size_t> index;
  const auto start = Clock::now();
  for (size_t i = 0; i < prompts.size(); ++i) {
    KVLM_ASSIGN_OR_RETURN(auto id, engine->submit(greedy_request(prompts[i], o.new_tokens)));
    index[id] = i;
  }
  std::vector<Clock::time_point> last(prompts.size());
  std::vector<bool> started(prompts.size(), false);
  std::vector<std::vector<int32_t>> tokens(prompts.size());
  std::vector<double> ttft, itl;
  while (engine->has_unfinished()) {
    const auto events = engine->step();
    const auto now = Clock::now();
    for (const Event& e : events) {
      const size_t i = index.at(e.id);
      if (e.token < 0) continue;
      tokens[i].push_back(e.token);
      (started[i] ? itl : ttft).push_back(seconds(now - (started[i] ? last[i] : start)));
      started[i] = true;
      last[i] = now;
    }
  }
  r.wall_seconds = seconds(Clock::now() - start);
  const EngineStats st = engine->stats();
  r.prompt_tokens = st.prompt_tokens;
  r.generated_tokens = st.generated_tokens;
  r.output_tokens_per_second = r.generated_tokens / r.wall_seconds;
  r.ttft = summarize(ttft);
  r.itl = summarize(itl);
  r.preemptions = st.preemptions;
  r.prefix_hit_rate =
      st.prefix_queries > 0 ? static_cast<double>(st.prefix_hits) / st.prefix_queries : 0.0;
  r.decode_tokens_per_second =
      st.decode_seconds > 0 ? st.decode_step_tokens / st.decode_seconds : 0.0;
  std::vector<int32_t> single(std::min(128, longest));
  std::copy_n(prompts.back().begin(), std::min(single.size(), prompts.back().size()),
              single.begin());
  KVLM_ASSIGN_OR_RETURN(auto alone, single_decode_speed(model, o, single));
  r.single_decode_tokens_per_second = alone;
  r.decode_scaling = r.single_decode_tokens_per_second > 0
                         ? r.decode_tokens_per_second / r.single_decode_tokens_per_second
                         : 0.0;

  if (o.static_baseline) {  // every prompt in one static batch on a contiguous cache
    GenerateOptions go;
    go.max_new_tokens = o.new_tokens;
    Parallel par{o.threads > 0
                     ? o.threads
                     : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))};
    // The engine's calibrated scales (fp8, q8_0_kc), to compare bits.
    KVLM_ASSIGN_OR_RETURN(
        go.kv_storage, calibrated_kv_storage(parse_cache_dtype(o.kv_dtype).value_or(KvDtype::f32),
                                             model->model(), par));
    go.kv_storage.window = {o.kv_window, o.sink_tokens};
    const auto static_start = Clock::now();
    KVLM_ASSIGN_OR_RETURN(auto result, generate(model->model(), prompts, go, par));
    r.static_wall_seconds = seconds(Clock::now() - static_start);
    r.static_output_tokens_per_second = result.stats.generated_tokens / r.static_wall_seconds;
    r.static_identical = result.tokens == tokens;
  }
  return r;
}

std::string engine_bench_json(const EngineBenchResult& r) {
  nlohmann::ordered_json j = {
      {"requests", r.n_requests},
      {"prompt_tokens", r.prompt_tokens},
      {"generated_tokens", r.generated_tokens},
      {"wall_seconds", r.wall_seconds},
      {"output_tokens_per_second", r.output_tokens_per_second},
      {"ttft_p50_seconds", r.ttft.p50},
      {"ttft_p99_seconds", r.ttft.p99},
      {"itl_p50_seconds", r.itl.p50},
      {"itl_p99_seconds", r.itl.p99},
      {"preemptions", r.preemptions},
      {"prefix_hit_rate", r.prefix_hit_rate},
      {"decode_tokens_per_second", r.decode_tokens_per_second},
      {"single_decode_tokens_per_second", r.single_decode_tokens_per_second},
      {"decode_scaling", r.decode_scaling},
      {"static_wall_seconds", r.static_wall_seconds},
      {"static_output_tokens_per_second", r.static_output_tokens_per_second},
      {"static_identical", r.static_identical}};
  return j.dump();
}

std::string engine_bench_text(const EngineBenchResult& r) {
  char buf[2048];
  std::snprintf(buf, sizeof buf,
                "engine, %d requests (%lld prompt tokens, %lld generated)\n"
                "  output                %8.1f tok/s over %.2f s\n"
                "  time to first token   p50 %.3f s, p99 %.3f s\n"
                "  inter-token latency   p50 %.4f s, p99 %.4f s\n"
                "  preemptions           %lld\n"
                "  prefix hit rate       %.1f%%\n"
                "  decode, many running  %8.1f tok/s = %.2fx one request alone (%.1f tok/s)\n"
                "static generate() batch %8.1f tok/s over %.2f s (same tokens: %s)\n",
                r.n_requests, static_cast<long long>(r.prompt_tokens),
                static_cast<long long>(r.generated_tokens), r.output_tokens_per_second,
                r.wall_seconds, r.ttft.p50, r.ttft.p99, r.itl.p50, r.itl.p99,
                static_cast<long long>(r.preemptions), 100.0 * r.prefix_hit_rate,
                r.decode_tokens_per_second, r.decode_scaling, r.single_decode_tokens_per_second,
                r.static_output_tokens_per_second, r.static_wall_seconds,
                r.static_identical ? "yes" : "NO");
  return buf;
}

}  // namespace kvlm
