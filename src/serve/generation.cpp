// Streamed and whole answers are built from the same events by the same Collector, so the
// streamed text is the whole text by construction: each event's text is appended as it comes.
#include "serve/generation.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <random>

#include "serve/openai_request.h"
#include "serve/openai_response.h"
#include "serve/sse.h"
#include "tokenizer/tokenizer.h"

namespace kvlm::serve {

namespace {

using Clock = std::chrono::steady_clock;

// How often a waiting handler looks at its client while no event comes.
constexpr std::chrono::milliseconds kPoll{100};

struct Prepared {
  GenerationParams params;
  std::vector<std::string> echo;  // per prompt: its text as echoed
  std::vector<Request> requests;  // prompt-major: choice i is requests[i]
  int64_t prompt_tokens = 0;
};

uint64_t random_seed() {
  static std::mutex mutex;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard<std::mutex> lock(mutex);
  return rng();
}

ApiError no_tokenizer(const std::string& param) {
  return bad_request(param, param +
                                ": this model has no tokenizer, so text cannot be encoded; "
                                "send token ids, or start kvlm serve with --tokenizer PATH");
}

// Tokenized prompts (completions: each prompt; chat: the rendered messages).
ApiResult<std::vector<std::vector<int32_t>>> tokenize(const GenerationContext& ctx,
                                                      const GenerationParams& p, bool chat,
                                                      std::vector<std::string>* echo) {
  const Tokenizer* tok = ctx.model->tokenizer();
  std::vector<std::vector<int32_t>> out;
  if (chat) {
    if (ctx.chat_template.kind == ChatTemplateKind::kNone) {
      return bad_request("messages",
                         "this model has no chat template (" + ctx.chat_template.absent +
                             "); use /v1/completions with a prompt, or start kvlm serve with "
                             "--chat-template chatml|llama2|llama3|mistral",
                         "no_chat_template");
    }
    if (tok == nullptr) return no_tokenizer("messages");
    // The template writes its own BOS as text: encode with special tokens, add nothing.
    out.push_back(tok->encode(render_chat(ctx.chat_template, p.messages), true));
    echo->push_back("");
    return out;
  }
  for (size_t i = 0; i < p.prompts.size(); ++i) {
    const PromptInput& in = p.prompts[i];
    const std::string param =
        p.prompts.size() == 1 ? "prompt" : "prompt[" + std::to_string(i) + "]";
    if (!in.is_text) {
      out.push_back(in.ids);
      std::string text;
      if (tok != nullptr) {
        Result<std::string> decoded = tok->decode(in.ids);
        if (decoded) text = decoded.value();
      }
      echo->push_back(text);
      continue;
    }
    if (tok == nullptr) return no_tokenizer(param);
    // Special-token text such as <|endoftext|> becomes that token, as vLLM and transformers do.
    Result<std::vector<int32_t>> ids = ctx.model->encode_prompt(in.text, true);
    if (!ids) return bad_request(param, param + ": " + ids.message());
    out.push_back(std::move(ids.value()));
    echo->push_back(in.text);
  }
  return out;
}

ApiResult<Prepared> prepare(const GenerationContext& ctx, const HttpRequest& http, bool chat) {
  ApiResult<GenerationParams> parsed =
      chat ? parse_chat_request(http.body) : parse_completion_request(http.body);
  if (!parsed) return parsed.error();
  Prepared out;
  out.params = std::move(parsed.value());
  GenerationParams& p = out.params;
  if (!p.model.empty() && p.model != ctx.model_name) {
    ApiError e = bad_request("model",
                             "The model '" + p.model +
                                 "' does not exist; this server "
                                 "serves '" +
                                 ctx.model_name + "' (see GET /v1/models)",
                             "model_not_found");
    e.status = 404;
    return e;
  }
  ApiResult<std::vector<std::vector<int32_t>>> prompts = tokenize(ctx, p, chat, &out.echo);
  if (!prompts) return prompts.error();
  const int n_ctx = ctx.model->n_ctx();
  if (!p.seed_given) p.sampling.seed = random_seed();
  for (size_t i = 0; i < prompts.value().size(); ++i) {
    std::vector<int32_t>& ids = prompts.value()[i];
    const std::string param = chat                    ? "messages"
                              : p.prompts.size() == 1 ? "prompt"
                                                      : "prompt[" + std::to_string(i) + "]";
    // Chat without max_tokens: the rest of the context (OpenAI: no limit but the context);
    // with a window, which lifts that limit, one context's worth.
    const bool windowed = ctx.kv_window > 0;
    const int max_tokens = p.max_tokens ? *p.max_tokens
                           : windowed   ? n_ctx
                                        : std::max(1, n_ctx - static_cast<int>(ids.size()));
    if (auto error = check_prompt(ids, max_tokens, n_ctx, ctx.model->n_vocab(), param, windowed)) {
      return *error;
    }
    out.prompt_tokens += static_cast<int64_t>(ids.size());
    for (int j = 0; j < p.n; ++j) {
      Request r;
      r.prompt_ids = ids;
      r.max_new_tokens = max_tokens;
      r.sampling = p.sampling;
      // Each prompt's choices draw from streams 0..n-1: a prompt answers the same whether it
      // is sent alone or in a list.
      r.seed_index = static_cast<uint64_t>(j);
      r.stop = p.stop;
      r.ignore_eos = p.ignore_eos;
      if (chat) {
        r.stop_ids = ctx.chat_stop_ids;
        r.stop.insert(r.stop.end(), ctx.chat_stop_text.begin(), ctx.chat_stop_text.end());
      }
      if (p.logprobs >= 0) r.logprobs = p.logprobs;  // 0: the chosen token's logprob only
      out.requests.push_back(std::move(r));
    }
  }
  return out;
}

// Gathers one API call's events into its choices, and times it for the log line.
class Collector {
 public:
  // `start`: when the requests were submitted (time to first token counts from there).
  Collector(const Prepared& prep, const Submission& sub, Clock::time_point start)
      : ids_(sub.ids), choices_(sub.ids.size()), start_(start) {
    const int n = prep.params.n;
    for (size_t i = 0; i < choices_.size(); ++i) {
      if (prep.params.echo) {
        choices_[i].text = prep.echo[i / n];
        choices_[i].echo_bytes = choices_[i].text.size();
      }
    }
  }

  // The choice an event belongs to (-1: not ours).
  int choice_of(RequestId id) const {
    for (size_t i = 0; i < ids_.size(); ++i) {
      if (ids_[i] == id) return static_cast<int>(i);
    }
    return -1;
  }

  // Records the event; returns its choice index.
  int add(const Event& event) {
    const int i = choice_of(event.id);
    if (i < 0) return i;
    ChoiceOutput& c = choices_[i];
    if (event.token >= 0) {
      if (first_token_ == Clock::time_point{}) first_token_ = Clock::now();
      ++c.completion_tokens;
      ++completion_tokens_;
    }
    c.text += event.text;
    if (event.logprobs) c.logprobs.push_back(*event.logprobs);
    if (event.finish != FinishReason::kNone) {
      c.finish = event.finish;
      ++finished_;
      if (event.finish == FinishReason::kError && error_.empty()) error_ = event.error;
    }
    return i;
  }

  bool done() const { return finished_ == choices_.size(); }
  const std::vector<ChoiceOutput>& choices() const { return choices_; }
  const ChoiceOutput& choice(int i) const { return choices_[i]; }
  const std::string& error() const { return error_; }
  const std::vector<RequestId>& ids() const { return ids_; }

  Usage usage(int64_t prompt_tokens) const { return {prompt_tokens, completion_tokens_}; }

  // "cmpl-...: 12 prompt + 16 new tokens, ttft 35.2 ms, 41.3 tok/s, finish length"
  std::string log_line(const std::string& id, int64_t prompt_tokens) const {
    const Clock::time_point end = Clock::now();
    auto ms = [](Clock::duration d) {
      return std::chrono::duration<double, std::milli>(d).count();
    };
    const double ttft = first_token_ == Clock::time_point{} ? 0 : ms(first_token_ - start_);
    const double decode_ms = first_token_ == Clock::time_point{} ? 0 : ms(end - first_token_);
    const double rate =
        completion_tokens_ > 1 && decode_ms > 0 ? (completion_tokens_ - 1) * 1000.0 / decode_ms : 0;
    std::string finish;
    for (const ChoiceOutput& c : choices_) {
      const char* name = openai_finish_reason(c.finish);
      if (!finish.empty()) finish += ',';
      finish += name ? name : "none";
    }
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "%s: %lld prompt + %lld new tokens, ttft %.1f ms, %.1f tok/s, finish %s",
                  id.c_str(), static_cast<long long>(prompt_tokens),
                  static_cast<long long>(completion_tokens_), ttft, rate, finish.c_str());
    return buf;
  }

 private:
  std::vector<RequestId> ids_;
  std::vector<ChoiceOutput> choices_;
  size_t finished_ = 0;
  int64_t completion_tokens_ = 0;
  std::string error_;
  Clock::time_point start_;
  Clock::time_point first_token_;
};

TokenText token_text_of(const std::shared_ptr<LoadedModel>& model) {
  return [model](int32_t id) -> std::string {
    const Tokenizer* tok = model->tokenizer();
    if (tok == nullptr) return "token:" + std::to_string(id);
    Result<std::string_view> bytes = tok->token_bytes(id);
    return bytes ? std::string(bytes.value()) : std::string();
  };
}

void cancel_all(EngineLoop& loop, const Collector& collector) {
  for (RequestId id : collector.ids()) loop.cancel(id);
}

// Everything a stream needs after the handler has returned.
struct StreamJob {
  GenerationContext ctx;
  Prepared prep;
  Submission sub;
  ResponseMeta meta;
  bool chat = false;
  Clock::time_point submitted;
};

void run_stream(const StreamJob& job, ChunkWriter& out) {
  Collector collector(job.prep, job.sub, job.submitted);
  const TokenText token_text = token_text_of(job.ctx.model);
  const int top_n = job.prep.params.logprobs;
  const size_t n_choices = job.sub.ids.size();
  bool alive = true;
  auto send = [&](const Json& chunk) { alive = alive && out.write(sse_event(chunk)); };
  // Opening chunks: chat announces the role; completions with echo send the prompt text.
  for (size_t i = 0; i < n_choices; ++i) {
    if (job.chat) {
      send(chat_chunk(job.meta, static_cast<int>(i), "assistant", "", nullptr, -1,
                      FinishReason::kNone, token_text));
    } else if (job.prep.params.echo && !collector.choice(i).text.empty()) {
      send(completion_chunk(job.meta, static_cast<int>(i), collector.choice(i).text, nullptr, -1, 0,
                            FinishReason::kNone, token_text));
    }
  }
  while (alive && !collector.done()) {
    std::vector<Event> events = job.sub.events->wait_pop(kPoll);
    if (events.empty()) {
      alive = out.connected();
      continue;
    }
    for (const Event& event : events) {
      const int i = collector.choice_of(event.id);
      if (i < 0) continue;
      const size_t offset = collector.choice(i).text.size();
      collector.add(event);
      const LogprobInfo* lp = event.logprobs ? &*event.logprobs : nullptr;
      // One chunk per token, even when the token completes no character yet (its text is
      // ""): clients count tokens and time them by chunks.
      if (event.token >= 0 || !event.text.empty()) {
        send(job.chat ? chat_chunk(job.meta, i, "", event.text, lp, top_n, FinishReason::kNone,
                                   token_text)
                      : completion_chunk(job.meta, i, event.text, lp, top_n, offset,
                                         FinishReason::kNone, token_text));
      }
      if (event.finish == FinishReason::kError) {
        ApiError e;
        e.status = 500;
        e.type = "server_error";
        e.message = event.error;
        alive = alive && out.write("data: " + error_body(e) + "\n\n");
      } else if (event.finish != FinishReason::kNone) {
        send(job.chat
                 ? chat_chunk(job.meta, i, "", "", nullptr, -1, event.finish, token_text)
                 : completion_chunk(job.meta, i, "", nullptr, -1, 0, event.finish, token_text));
      }
    }
  }
  if (!alive) {
    // The client left: free its sequences now rather than after max_tokens.
    cancel_all(*job.ctx.loop, collector);
    if (job.ctx.log) job.ctx.log(job.meta.id + ": client disconnected, cancelled");
    return;
  }
  const Usage usage = collector.usage(job.prep.prompt_tokens);
  if (job.prep.params.include_usage) send(usage_chunk(job.meta, job.chat, usage));
  if (alive) out.write(sse_done());
  if (job.ctx.log) job.ctx.log(collector.log_line(job.meta.id, job.prep.prompt_tokens));
}

HttpResponse json_response(const Json& body) {
  HttpResponse r;
  r.body = json_text(body);
  return r;
}

}  // namespace

HttpResponse error_response(const ApiError& error) {
  HttpResponse r;
  r.status = error.status;
  r.body = error_body(error);
  if (error.retry_after > 0)
    r.headers.emplace_back("Retry-After", std::to_string(error.retry_after));
  return r;
}

HttpResponse handle_generation(const GenerationContext& ctx, const HttpRequest& request,
                               bool chat) {
  ApiResult<Prepared> prepared = prepare(ctx, request, chat);
  if (!prepared) return error_response(prepared.error());
  Prepared& prep = prepared.value();
  const Clock::time_point submitted = Clock::now();
  ApiResult<Submission> sub = ctx.loop->submit(prep.requests);
  if (!sub) return error_response(sub.error());

  ResponseMeta meta;
  char id[40];
  std::snprintf(id, sizeof id, "%s-%016llx", chat ? "chatcmpl" : "cmpl",
                static_cast<unsigned long long>(ctx.next_id->fetch_add(1)));
  meta.id = id;
  meta.created = static_cast<int64_t>(std::time(nullptr));
  meta.model = ctx.model_name;

  if (prep.params.stream) {
    auto job = std::make_shared<StreamJob>(
        StreamJob{ctx, std::move(prep), std::move(sub.value()), std::move(meta), chat, submitted});
    HttpResponse r;
    r.content_type = "text/event-stream";
    r.stream = [job](ChunkWriter& out) { run_stream(*job, out); };
    return r;
  }

  // Whole answer: wait for every choice (bounded by max_tokens; a shutdown cancels them).
  Collector collector(prep, sub.value(), submitted);
  while (!collector.done()) {
    for (const Event& event : sub.value().events->wait_pop(kPoll)) collector.add(event);
  }
  if (!collector.error().empty()) {
    ApiError e;
    e.status = 500;
    e.type = "server_error";
    e.message = collector.error();
    return error_response(e);
  }
  if (ctx.log) ctx.log(collector.log_line(meta.id, prep.prompt_tokens));
  const Usage usage = collector.usage(prep.prompt_tokens);
  const TokenText token_text = token_text_of(ctx.model);
  const int top_n = prep.params.logprobs;
  return json_response(chat ? chat_body(meta, collector.choices(), usage, top_n, token_text)
                            : completion_body(meta, collector.choices(), usage, top_n, token_text));
}

}  // namespace kvlm::serve
