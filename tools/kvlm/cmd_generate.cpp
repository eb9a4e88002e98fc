// kvlm generate: text or token-id prompts in, new tokens out. Prefill + decode over the KV
// cache (or --no-cache), the sampling chain of src/generate/sampler.h, stopping on end-of-text,
// --stop strings or --max-new, text streamed as it is generated when there is one prompt.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "commands.h"
#include "generate/generate.h"
#include "generate/sampler.h"
#include "generate/sampler_logprobs.h"
#include "generate/text_stream.h"
#include "paged_flags.h"
#include "tokenizer/llama2c_tokenizer.h"

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
  int logprobs = 0;
  PagedFlags paged;
};

// One sequence's bookkeeping while it generates.
struct SequenceState {
  std::vector<int32_t> prompt;
  std::vector<int32_t> generated;
  std::optional<TextStream> text;
  std::string final_text;  // the whole new text (llama2.c: what run.c prints, prompt included)
  std::string finish_reason = "length";
  std::vector<LogprobInfo> logprobs;
  Rng rng{0};
};

Result<std::vector<std::vector<int32_t>>> encode_prompts(const GenerateFlags& flags,
                                                         const Tokenizer* tokenizer,
                                                         const ModelConfig& config) {
  std::vector<std::vector<int32_t>> prompts;
  for (const std::string& text : flags.ids) {
    auto ids = parse_id_list(text, "--ids");
    if (!ids) return ids.status();
    prompts.push_back(ids.value());
  }
  for (const std::string& text : flags.prompts) {
    if (tokenizer == nullptr)
      return Status::error(
          "--prompt needs a tokenizer: the model folder has none, so pass "
          "--tokenizer PATH (or give token ids with --ids)");
    std::vector<int32_t> ids;
    if (auto* llama2c = dynamic_cast<const Llama2cTokenizer*>(tokenizer)) {
      ids = llama2c->encode(text, /*bos=*/true, /*eos=*/false);  // as run.c: BOS first
    } else {
      ids = tokenizer->encode(text, flags.special);
      // Tokenizers whose post-processor puts BOS first (Hugging Face Llama files) get it here,
      // as transformers' tokenizer(text) does.
      if (tokenizer->add_bos() && tokenizer->bos_id())
        ids.insert(ids.begin(), *tokenizer->bos_id());
      // An empty prompt starts from the beginning-of-text token (GPT-2: <|endoftext|>), as
      // OpenAI's unconditional samples do.
      if (ids.empty() && config.bos_token_id >= 0) ids.push_back(config.bos_token_id);
    }
    prompts.push_back(std::move(ids));
  }
  if (prompts.empty()) return Status::error("give at least one prompt with --prompt or --ids");
  return prompts;
}

Result<std::unique_ptr<Tokenizer>> resolve_tokenizer(const GenerateFlags& flags,
                                                     const ModelConfig& config) {
  std::unique_ptr<Tokenizer> tokenizer;
  if (!flags.tokenizer.empty()) {
    auto loaded = load_tokenizer(flags.tokenizer);
    if (!loaded) return loaded.status();
    tokenizer = std::move(loaded.value());
  } else {
    auto loaded = load_tokenizer(flags.model.model);  // the model folder's own files, if any
    if (loaded) {
      tokenizer = std::move(loaded.value());
    } else if (!flags.prompts.empty()) {
      return Status::error(loaded.message() + " (pass --tokenizer PATH)");
    }
  }
  if (tokenizer && tokenizer->vocab_size() > config.n_vocab)
    return Status::error(tokenizer->source() + ": the tokenizer has " +
                         std::to_string(tokenizer->vocab_size()) + " tokens but the model only " +
                         std::to_string(config.n_vocab));
  return tokenizer;
}

void print_progress(int done, int total) {
  const int width = 30, filled = total ? done * width / total : width;
  std::fprintf(stderr, "\r[%s%s] %d/%d tokens", std::string(filled, '#').c_str(),
               std::string(width - filled, ' ').c_str(), done, total);
  if (done == total) std::fputc('\n', stderr);
}

nlohmann::ordered_json sequence_json(const SequenceState& s, bool with_text) {
  nlohmann::ordered_json j = {{"prompt_ids", s.prompt}, {"ids", s.generated}};
  if (with_text) j["text"] = s.final_text;
  j["finish_reason"] = s.finish_reason;
  if (!s.logprobs.empty()) {
    auto& list = j["logprobs"] = nlohmann::json::array();
    for (const LogprobInfo& info : s.logprobs) {
      nlohmann::ordered_json top = nlohmann::json::array();
      for (const TokenLogprob& t : info.top) top.push_back({{"id", t.id}, {"logprob", t.logprob}});
      list.push_back({{"id", info.chosen.id}, {"logprob", info.chosen.logprob}, {"top", top}});
    }
  }
  return j;
}

int run_generate(const GenerateFlags& flags) {
  KVLM_CLI_RETURN_IF_ERROR(flags.sampling.validate());
  if (flags.logprobs < 0 || flags.logprobs > 20)
    return fail(Status::error("--logprobs must be between 0 and 20, found " +
                              std::to_string(flags.logprobs)));
  auto model = load_model_from_flags(flags.model);
  if (!model) return fail(model.status());
  const ModelConfig& config = model.value()->config();
  auto tokenizer = resolve_tokenizer(flags, config);
  if (!tokenizer) return fail(tokenizer.status());
  const Tokenizer* tok = tokenizer.value().get();
  if (!flags.stops.empty() && tok == nullptr)
    return fail(Status::error("--stop needs a tokenizer to decode text (pass --tokenizer PATH)"));
  auto prompts = encode_prompts(flags, tok, config);
  if (!prompts) return fail(prompts.status());
  auto chain = SamplerChain::from_params(flags.sampling);
  if (!chain) return fail(chain.status());
  auto paged = paged_options_from_flags(flags.paged);
  if (!paged) return fail(paged.status());

  const int n_seq = static_cast<int>(prompts->size());
  int max_new = flags.max_new;
  if (flags.steps > 0) {
    // run.c runs `steps` forward passes (positions 0..steps-1) and prints the token chosen at
    // the last one, so a prompt of P tokens (BOS included) gets steps - P + 1 new tokens.
    size_t longest = 0;
    for (const auto& p : prompts.value()) longest = std::max(longest, p.size());
    if (static_cast<size_t>(flags.steps) < longest)
      return fail(Status::error("--steps " + std::to_string(flags.steps) +
                                " is shorter than the prompt (" + std::to_string(longest) +
                                " tokens)"));
    max_new = flags.steps - static_cast<int>(longest) + 1;
  }
  const auto* llama2c = dynamic_cast<const Llama2cTokenizer*>(tok);
  // run.c's convention for llama2.c models: the model producing BOS ends the text.
  int32_t stop_id = llama2c ? Llama2cTokenizer::kBos : config.eos_token_id;
  if (flags.ignore_eos) stop_id = -1;
  const bool stream = n_seq == 1 && !flags.json && tok != nullptr && llama2c == nullptr;
  const bool progress = !stream && isatty(STDERR_FILENO) && !flags.json;
  std::vector<SequenceState> seqs(n_seq);
  for (int s = 0; s < n_seq; ++s) {
    seqs[s].prompt = (*prompts)[s];
    seqs[s].rng = Rng(sequence_seed(flags.sampling.seed, s));
    if (tok) {
      auto text = TextStream::create(*tok, flags.stops);
      if (!text) return fail(text.status());
      seqs[s].text.emplace(std::move(text.value()));
    }
  }

  Status failure;
  int tokens_done = 0;
  GenerateOptions options;
  options.max_new_tokens = max_new;
  options.use_cache = !flags.no_cache;
  options.paged = paged.value();
  options.select = [&](int s, std::span<const float> logits) -> int32_t {
    SequenceState& seq = seqs[s];
    auto next = chain->sample(logits, {seq.prompt, seq.generated}, seq.rng);
    if (!next) {
      if (failure.is_ok()) failure = next.status();
      return 0;
    }
    if (flags.logprobs > 0) {
      auto info = token_logprobs(logits, next.value(), flags.logprobs);
      if (info) seq.logprobs.push_back(info.value());
    }
    return next.value();
  };
  options.on_token = [&](int s, int32_t token) {
    SequenceState& seq = seqs[s];
    seq.generated.push_back(token);
    if (progress) print_progress(++tokens_done, n_seq * max_new);
    if (!failure.is_ok()) return true;
    if (token == stop_id) {
      seq.finish_reason = "eos";
      if (llama2c) seq.generated.pop_back();  // run.c neither prints nor keeps that BOS
      return true;
    }
    if (!seq.text || llama2c) return false;
    auto step = seq.text->push(token);
    if (!step) {
      failure = step.status();
      return true;
    }
    if (stream && !step->emit.empty()) {
      std::fwrite(step->emit.data(), 1, step->emit.size(), stdout);
      std::fflush(stdout);
    }
    if (step->stopped) seq.finish_reason = "stop";
    return step->stopped;
  };
  auto result =
      generate(*model.value(), prompts.value(), options, parallel_from_flags(flags.model));
  if (!result) return fail(result.status());
  if (!failure.is_ok()) return fail(failure);
  if (progress && tokens_done < n_seq * max_new) std::fputc('\n', stderr);

  for (SequenceState& seq : seqs) {
    if (!seq.text) continue;
    if (llama2c) {  // run.c prints the prompt and the new text together, then "\n"
      std::vector<int32_t> all = seq.prompt;
      all.insert(all.end(), seq.generated.begin(), seq.generated.end());
      auto out = llama2c->run_c_output(all);
      if (!out) return fail(out.status());
      seq.final_text = std::move(out.value());
      if (!flags.json) std::fwrite(seq.final_text.data(), 1, seq.final_text.size(), stdout);
      continue;
    }
    const std::string rest = seq.text->finish();
    if (stream) std::fwrite(rest.data(), 1, rest.size(), stdout);
    seq.final_text = seq.text->text();
  }
  const GenerateStats& st = result->stats;
  if (flags.json) {
    nlohmann::ordered_json out;
    out["sequences"] = nlohmann::json::array();
    for (const SequenceState& seq : seqs)
      out["sequences"].push_back(sequence_json(seq, tok != nullptr));
    out["stats"] = {
        {"cached", options.use_cache},
        {"prompt_tokens", st.prompt_tokens},
        {"generated_tokens", st.generated_tokens},
        {"rows_computed", st.rows_computed},
        {"prefill_seconds", st.prefill_seconds},
        {"decode_seconds", st.decode_seconds},
        {"prefill_tokens_per_second",
         st.prefill_seconds > 0 ? st.prompt_tokens / st.prefill_seconds : 0.0},
        {"decode_tokens_per_second",
         st.decode_seconds > 0 ? (st.generated_tokens - n_seq) / st.decode_seconds : 0.0},
        {"kv_cache_bytes", st.kv_bytes_allocated},
        {"prompt_tokens_cached", st.prompt_tokens_cached}};
    // Text cut mid-character (a stop at --max-new inside a multi-byte token) is not valid
    // UTF-8, which JSON cannot carry: such bytes become U+FFFD here; "ids" stay exact.
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  if (stream) {
    std::fputc('\n', stdout);
  } else if (!llama2c) {
    for (const SequenceState& seq : seqs) {
      if (seq.text)
        std::printf("%s\n", seq.final_text.c_str());
      else
        std::printf("%s\n", join_ids(seq.generated, " ").c_str());
    }
  }
  std::fflush(stdout);
  std::fprintf(
      stderr,
      "prompt tokens %lld, generated %lld, prefill %.1f tok/s, decode %.1f tok/s, KV "
      "cache %lld bytes%s\n",
      static_cast<long long>(st.prompt_tokens), static_cast<long long>(st.generated_tokens),
      st.prefill_seconds > 0 ? st.prompt_tokens / st.prefill_seconds : 0.0,
      st.decode_seconds > 0 ? (st.generated_tokens - n_seq) / st.decode_seconds : 0.0,
      static_cast<long long>(st.kv_bytes_allocated), options.use_cache ? "" : " (uncached)");
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
                  "(new tokens = steps - prompt tokens + 1)");
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
  cmd->add_option("--seed", p.seed, "Random seed; sequence i draws from its own stream");
  cmd->add_option("--stop", flags->stops, "Stop when this text is generated (repeatable)");
  add_paged_flags(cmd, &flags->paged);
  cmd->add_option("--logprobs", flags->logprobs,
                  "With --json: each token's log-probability and the top N alternatives");
  cmd->callback([flags, exit_code] { *exit_code = run_generate(*flags); });
}

}  // namespace kvlm::cli
