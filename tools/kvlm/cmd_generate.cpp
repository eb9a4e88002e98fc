// kvlm generate: text or token-id prompts in, new tokens out. A thin client of the engine
// (include/kvlm/engine.h): each prompt is a request, all running at once; the generation
// policy (BOS, end ids, sampling, stops, logprobs, run.c's conventions) is the library's.
// --no-cache runs the engine's uncached baseline. One text prompt streams its new text.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "commands.h"
#include "generate/generate.h"
#include "kv_flags.h"
#include "kvlm/engine.h"
#include "paged_flags.h"

namespace kvlm::cli {

namespace {

struct GenerateFlags {
  ModelFlags model;
  std::string tokenizer;
  std::vector<std::string> prompts;
  std::vector<std::string> ids;
  bool special = false;
  int max_new = 20;
  int steps = 0;  // run.c's -n: total positions, prompt included (0: use max_new)
  bool no_cache = false;
  bool json = false;
  bool ignore_eos = false;
  SamplingParams sampling{.temperature = 0.0f};  // greedy unless asked: scripts expect ids
  std::vector<std::string> stops;
  std::optional<int> logprobs;  // unset: none; 0: each token's own; N: and the top N
  PagedFlags paged;
  std::string kv_dtype;  // --kv-dtype
  WindowFlags window;    // --kv-window, --sink-tokens
};

Result<std::vector<std::vector<int32_t>>> parse_prompts(const GenerateFlags& flags,
                                                        const LoadedModel& model) {
  std::vector<std::vector<int32_t>> prompts;
  for (const std::string& text : flags.ids) {
    auto ids = parse_id_list(text, "--ids");
    if (!ids) return ids.status();
    prompts.push_back(ids.value());
  }
  for (const std::string& text : flags.prompts) {
    if (model.tokenizer() == nullptr)
      return Status::error(
          "--prompt needs a tokenizer: the model folder has none, so pass "
          "--tokenizer PATH (or give token ids with --ids)");
    auto ids = model.encode_prompt(text, flags.special);
    if (!ids) return ids.status();
    prompts.push_back(std::move(ids.value()));
  }
  if (prompts.empty()) return Status::error("give at least one prompt with --prompt or --ids");
  return prompts;
}

void print_progress(int done, int total) {
  const int width = 30, filled = total ? done * width / total : width;
  std::fprintf(stderr, "\r[%s%s] %d/%d tokens", std::string(filled, '#').c_str(),
               std::string(width - filled, ' ').c_str(), done, total);
  if (done == total) std::fputc('\n', stderr);
}

nlohmann::ordered_json completion_json(const Completion& c, const std::string* text) {
  nlohmann::ordered_json j = {{"prompt_ids", c.prompt_ids}, {"ids", c.ids}};
  if (text) j["text"] = *text;
  j["finish_reason"] = finish_reason_name(c.finish);
  if (!c.logprobs.empty()) {
    auto& list = j["logprobs"] = nlohmann::json::array();
    for (const LogprobInfo& info : c.logprobs) {
      nlohmann::ordered_json top = nlohmann::json::array();
      for (const TokenLogprob& t : info.top) top.push_back({{"id", t.id}, {"logprob", t.logprob}});
      list.push_back({{"id", info.chosen.id}, {"logprob", info.chosen.logprob}, {"top", top}});
    }
  }
  return j;
}

// --steps is run.c's -n: run.c runs `steps` forward passes (positions 0..steps-1) and prints the
// token chosen at the last one, so a prompt of P tokens (BOS included) gets steps - P + 1.
Result<int> new_tokens_wanted(const GenerateFlags& flags,
                              const std::vector<std::vector<int32_t>>& prompts) {
  if (flags.steps == 0) return flags.max_new;
  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  if (flags.steps < 0 || static_cast<size_t>(flags.steps) < longest)
    return Status::error("--steps " + std::to_string(flags.steps) +
                         " is shorter than the prompt (" + std::to_string(longest) + " tokens)");
  return flags.steps - static_cast<int>(longest) + 1;
}

// The engine sized as the static batch was: every prompt running at once, the cache holding
// each one's whole run, or the paged flags' arena.
EngineOptions engine_options(const GenerateFlags& flags, const PagedGenerateOptions* paged,
                             const std::vector<std::vector<int32_t>>& prompts, int max_new) {
  EngineOptions options;
  options.max_running = static_cast<int>(prompts.size());
  options.threads = flags.model.threads;
  options.recompute_every_step = flags.no_cache;
  options.block_size = paged ? paged->block_size : 16;
  options.prefix_caching = paged ? paged->share_prefixes : true;
  options.kv_memory_bytes = paged ? paged->kv_memory_bytes : 0;
  if (!flags.kv_dtype.empty()) options.kv_dtype = flags.kv_dtype;
  options.kv_window = flags.window.window;
  options.sink_tokens = flags.window.sinks;
  // Also with --kv-memory: the cache never makes more blocks than the runs can fill, so a huge
  // --kv-memory costs no more than they need (PagedKvCacheOptions::token_budget).
  const int64_t B = options.block_size;
  for (const auto& p : prompts) {
    const int64_t run = static_cast<int64_t>(p.size()) + max_new - 1;
    int64_t blocks = (run + B - 1) / B;
    if (options.kv_window > 0 && !flags.no_cache)  // a window holds at most its blocks + a chunk
      blocks =
          std::min(blocks, (options.sink_tokens + B - 1) / B +
                               (options.kv_window - options.sink_tokens - 1 +
                                std::min(options.max_batch_tokens, options.kv_window) + B - 1) /
                                   B +
                               1);
    options.kv_tokens += blocks * B;
  }
  return options;
}

void print_json(const GenerateFlags& flags, const std::vector<Completion>& done,
                const std::vector<std::string>* texts, const EngineStats& st) {
  nlohmann::ordered_json out;
  out["sequences"] = nlohmann::json::array();
  for (size_t i = 0; i < done.size(); ++i)
    out["sequences"].push_back(completion_json(done[i], texts ? &(*texts)[i] : nullptr));
  const int64_t n_seq = static_cast<int64_t>(done.size());
  out["stats"] = {{"cached", !flags.no_cache},
                  {"prompt_tokens", st.prompt_tokens},
                  {"generated_tokens", st.generated_tokens},
                  {"rows_computed", st.rows_computed},
                  {"prefill_seconds", st.prefill_seconds},
                  {"decode_seconds", st.decode_seconds},
                  {"prefill_tokens_per_second",
                   st.prefill_seconds > 0 ? st.prompt_tokens / st.prefill_seconds : 0.0},
                  {"decode_tokens_per_second",
                   st.decode_seconds > 0 ? (st.generated_tokens - n_seq) / st.decode_seconds : 0.0},
                  {"kv_cache_bytes", flags.no_cache ? 0 : static_cast<int64_t>(st.kv_bytes_peak)},
                  {"prompt_tokens_cached", st.prefix_hits}};
  // Text cut mid-character (a stop at --max-new inside a multi-byte token) is not valid
  // UTF-8, which JSON cannot carry: such bytes become U+FFFD here; "ids" stay exact.
  std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
}

std::vector<Request> make_requests(const GenerateFlags& flags,
                                   const std::vector<std::vector<int32_t>>& prompts, int max_new) {
  std::vector<Request> requests;
  for (size_t s = 0; s < prompts.size(); ++s) {
    Request r;
    r.prompt_ids = prompts[s];
    r.max_new_tokens = max_new;
    r.sampling = flags.sampling;
    r.seed_index = s;  // prompt s draws from its own stream
    r.stop = flags.stops;
    r.ignore_eos = flags.ignore_eos;
    r.logprobs = flags.logprobs;
    requests.push_back(std::move(r));
  }
  return requests;
}

int run_generate(const GenerateFlags& flags) {
  KVLM_CLI_RETURN_IF_ERROR(flags.sampling.validate());
  if (flags.logprobs && (*flags.logprobs < 0 || *flags.logprobs > 20))
    return fail(Status::error("--logprobs must be between 0 and 20, found " +
                              std::to_string(*flags.logprobs)));
  auto paged = paged_options_from_flags(flags.paged);
  if (!paged) return fail(paged.status());
  KVLM_CLI_RETURN_IF_ERROR(kv_storage_from_flag(flags.kv_dtype).status());
  auto model = LoadedModel::load(
      {flags.model.model, flags.tokenizer, flags.model.weights, flags.model.threads});
  if (!model) return fail(model.status());
  const LoadedModel& lm = *model.value();
  report_weight_types(lm.model(), flags.model);
  if (!flags.stops.empty() && lm.tokenizer() == nullptr)
    return fail(Status::error("--stop needs a tokenizer to decode text (pass --tokenizer PATH)"));
  auto prompts = parse_prompts(flags, lm);
  if (!prompts) return fail(prompts.status());
  auto max_new = new_tokens_wanted(flags, prompts.value());
  if (!max_new) return fail(max_new.status());
  auto window = window_from_flags(flags.window);
  if (!window) return fail(window.status());
  KVLM_CLI_RETURN_IF_ERROR(
      validate_request(lm.model(), prompts.value(), max_new.value(), window->enabled()));
  const int n_seq = static_cast<int>(prompts->size());
  const PagedGenerateOptions* paged_options = paged->has_value() ? &paged->value() : nullptr;
  auto engine = Engine::create(
      model.value(), engine_options(flags, paged_options, prompts.value(), max_new.value()));
  if (!engine) return fail(engine.status());

  // One text prompt streams its new text as it comes (run.c's output is printed whole).
  const bool stream = n_seq == 1 && !flags.json && lm.tokenizer() && !lm.run_c_conventions();
  const bool progress = !stream && isatty(STDERR_FILENO) && !flags.json;
  const int total = n_seq * max_new.value();
  int tokens_done = 0;
  auto done = run_to_completion(*engine.value(), make_requests(flags, *prompts, *max_new),
                                [&](const Event& event) {
                                  if (progress && event.token >= 0)
                                    print_progress(++tokens_done, total);
                                  if (stream && !event.text.empty()) {
                                    std::fwrite(event.text.data(), 1, event.text.size(), stdout);
                                    std::fflush(stdout);
                                  }
                                });
  if (!done) return fail(done.status());
  if (progress && tokens_done < total) std::fputc('\n', stderr);

  std::vector<std::string> texts;
  for (const Completion& c : done.value()) {
    auto text = lm.display_text(c);
    if (!text) return fail(text.status());
    texts.push_back(std::move(text.value()));
  }
  const EngineStats st = engine.value()->stats();
  if (flags.json) {
    print_json(flags, done.value(), lm.tokenizer() ? &texts : nullptr, st);
    return 0;
  }
  if (stream) {
    std::fputc('\n', stdout);
  } else {
    for (size_t i = 0; i < texts.size(); ++i) {
      if (lm.run_c_conventions())
        std::fwrite(texts[i].data(), 1, texts[i].size(), stdout);  // run.c's "\n" included
      else if (lm.tokenizer())
        std::printf("%s\n", texts[i].c_str());
      else
        std::printf("%s\n", join_ids(done.value()[i].ids, " ").c_str());
    }
  }
  std::fflush(stdout);
  std::fprintf(stderr,
               "prompt tokens %lld, generated %lld, prefill %.1f tok/s, decode %.1f tok/s, KV "
               "cache %lld bytes%s\n",
               static_cast<long long>(st.prompt_tokens),
               static_cast<long long>(st.generated_tokens),
               st.prefill_seconds > 0 ? st.prompt_tokens / st.prefill_seconds : 0.0,
               st.decode_seconds > 0 ? (st.generated_tokens - n_seq) / st.decode_seconds : 0.0,
               flags.no_cache ? 0LL : static_cast<long long>(st.kv_bytes_peak),
               flags.no_cache ? " (uncached)" : "");
  return 0;
}

}  // namespace

void add_generate_command(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<GenerateFlags>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate text or tokens for one or more prompts");
  add_model_flags(cmd, &flags->model, true);
  cmd->add_option("--tokenizer", flags->tokenizer,
                  "Tokenizer folder or file (default: the model folder's own files)");
  cmd->add_option("--prompt", flags->prompts, "A text prompt; repeat for a batch");
  cmd->add_option("--ids", flags->ids,
                  "A prompt as comma-separated token ids; repeat for a batch (e.g. --ids 7,3,19 "
                  "--ids 9,2)");
  cmd->add_flag("--special", flags->special,
                "Encode special-token text such as <|endoftext|> as that token");
  cmd->add_option("--max-new", flags->max_new, "New tokens per prompt (default 20)");
  cmd->add_option("--steps", flags->steps,
                  "Instead of --max-new: total positions, prompt included, as llama2.c's run.c -n "
                  "(new tokens = steps - prompt tokens + 1)")
      ->check(CLI::Range(1, INT32_MAX));
  cmd->add_flag("--no-cache", flags->no_cache,
                "Recompute the whole sequence at every step instead of using the KV cache");
  cmd->add_flag("--json", flags->json,
                "Print one JSON object: per sequence prompt_ids, ids (new tokens), text, "
                "finish_reason, logprobs; and stats");
  cmd->add_flag("--ignore-eos", flags->ignore_eos, "Keep generating past the end-of-text token");
  SamplingParams& p = flags->sampling;
  cmd->add_option("--temperature", p.temperature, "Sampling temperature; 0 = greedy (default 0)");
  cmd->add_option("--top-k", p.top_k, "Keep the k most likely tokens; 0 = off");
  cmd->add_option("--top-p", p.top_p, "Nucleus sampling mass in (0, 1]; 1 = off");
  cmd->add_option("--min-p", p.min_p, "Drop tokens below min-p times the top probability");
  cmd->add_option("--repeat-penalty", p.repetition_penalty,
                  "Repetition penalty over the sequence's tokens (Hugging Face); 1 = off");
  cmd->add_option("--presence-penalty", p.presence_penalty, "OpenAI presence penalty; 0 = off");
  cmd->add_option("--frequency-penalty", p.frequency_penalty, "OpenAI frequency penalty; 0 = off");
  cmd->add_option("--seed", p.seed, "Random seed; sequence i draws from its own stream")
      ->check(CLI::NonNegativeNumber);  // "-1" would otherwise wrap around to 2^64 - 1
  cmd->add_option("--stop", flags->stops, "Stop when this text is generated (repeatable)");
  add_paged_flags(cmd, &flags->paged);
  add_kv_dtype_flag(cmd, &flags->kv_dtype);
  add_window_flags(cmd, &flags->window);
  cmd->add_option(
      "--logprobs", flags->logprobs,
      "With --json: each token's log-probability and the top N alternatives (0: its own only)");
  cmd->callback([flags, exit_code] { *exit_code = run_generate(*flags); });
}

}  // namespace kvlm::cli
