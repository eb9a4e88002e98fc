// Engine: the loop that turns submitted requests into events, one step at a time. Other
// threads reach it only through the inbox (submissions and cancellations under a mutex); the
// thread calling step() owns the scheduler, the cache and every running sequence.
#include "kvlm/engine.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <map>
#include <mutex>
#include <thread>

#include "engine/scheduler.h"
#include "eval/kv_calibration.h"
#include "model/model.h"

namespace kvlm {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

struct Engine::Impl {
  std::shared_ptr<LoadedModel> model;
  EngineOptions options;
  Parallel par;
  std::unique_ptr<PagedKvCache> cache;
  std::unique_ptr<Scheduler> scheduler;
  std::map<RequestId, std::unique_ptr<Sequence>> sequences;  // admitted to the loop

  // The inbox: what other threads hand to the loop.
  mutable std::mutex inbox_mutex;
  std::vector<std::unique_ptr<Sequence>> submitted;
  std::vector<RequestId> cancelled;
  RequestId next_id = 1;
  std::atomic<int64_t> unfinished{0};
  EngineStats published;  // a copy of `stats` for other threads, under inbox_mutex

  EngineStats stats;  // the loop's own
  std::vector<float> logits;

  Status check_request(const Request& request, const std::vector<int32_t>& prompt) const;
  void drain_inbox(std::vector<Event>* events);
  void finish(Sequence* seq);
  void update_cache_gauges();
};

void Engine::Impl::update_cache_gauges() {
  const int total = cache->n_blocks();
  stats.kv_blocks_used = cache->pool().n_used();
  stats.kv_blocks_free = total - stats.kv_blocks_used;
  stats.kv_usage = total > 0 ? static_cast<double>(stats.kv_blocks_used) / total : 0.0;
  stats.kv_bytes_peak = cache->peak_allocated_bytes();
}

Result<std::unique_ptr<Engine>> Engine::create(std::shared_ptr<LoadedModel> model,
                                               const EngineOptions& options) {
  if (!model) return Status::error("engine: no model");
  if (options.max_batch_tokens < 1)
    return Status::error("engine: max batch tokens must be at least 1, found " +
                         std::to_string(options.max_batch_tokens));
  if (options.max_running < 1 || options.max_running > 65536)
    return Status::error("engine: max running sequences must be in [1, 65536], found " +
                         std::to_string(options.max_running));
  if (options.threads < 0 || options.threads > 1024)
    return Status::error("engine: threads must be in [0, 1024], found " +
                         std::to_string(options.threads));
  auto kv_dtype = parse_cache_dtype(options.kv_dtype);
  if (!kv_dtype)
    return Status::error("engine: unknown KV cache dtype '" + options.kv_dtype +
                         "'; accepted: f32, f16, bf16, q8_0, fp8, q8_0_kc");
  auto impl = std::make_unique<Impl>();
  const ModelConfig& c = model->model().config();
  impl->par.n_threads = options.threads > 0
                            ? options.threads
                            : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  PagedKvCacheOptions po;
  // fp8 and q8_0_kc scales are fixed before any request: see eval/kv_calibration.h
  KVLM_ASSIGN_OR_RETURN(po.storage, calibrated_kv_storage(*kv_dtype, model->model(), impl->par));
  po.storage.window = {options.kv_window, options.sink_tokens};
  if (options.kv_window != 0 || options.sink_tokens != 0) {
    KVLM_RETURN_IF_ERROR(validate_kv_storage(po.storage, c.n_layer, c.kv_dim()));
    KVLM_RETURN_IF_ERROR(model->model().check_kv_window(po.storage.window));
    if (options.kv_window < options.block_size)
      return Status::error("--kv-window " + std::to_string(options.kv_window) +
                           " is smaller than one cache block (--block-size " +
                           std::to_string(options.block_size) +
                           "): whole blocks are evicted, so the window must hold at least one");
  }
  po.block_size = options.block_size;
  po.kv_memory_bytes = options.kv_memory_bytes;
  po.token_budget = options.kv_tokens;
  if (po.kv_memory_bytes == 0 && po.token_budget == 0)
    po.token_budget = static_cast<int64_t>(options.max_running) * c.n_ctx;
  KVLM_ASSIGN_OR_RETURN(impl->cache, PagedKvCache::create(c.n_layer, c.kv_dim(), po));
  SchedulerOptions so;
  so.max_batch_tokens = options.max_batch_tokens;
  so.max_running = options.max_running;
  so.prefix_caching = options.prefix_caching && !options.recompute_every_step;
  so.recompute_every_step = options.recompute_every_step;
  impl->scheduler = std::make_unique<Scheduler>(*impl->cache, so);
  impl->model = std::move(model);
  impl->options = options;
  impl->stats.kv_block_size = impl->cache->block_size();
  impl->stats.kv_blocks_total = impl->cache->n_blocks();
  impl->stats.kv_bytes_total = impl->cache->arena_bytes();
  impl->update_cache_gauges();
  impl->published = impl->stats;
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

const LoadedModel& Engine::model() const {
  return *impl_->model;
}

Status Engine::Impl::check_request(const Request& request,
                                   const std::vector<int32_t>& prompt) const {
  const ModelConfig& c = model->model().config();
  if (prompt.empty()) return Status::error("the prompt is empty: give at least one token");
  for (int32_t id : prompt)
    if (id < 0 || id >= c.n_vocab)
      return Status::error("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                           std::to_string(c.n_vocab) + ")");
  // The last new token is never fed back, so the model sees prompt + max_new - 1 positions.
  const int64_t needed = static_cast<int64_t>(prompt.size()) + request.max_new_tokens - 1;
  // A window renumbers positions within itself: the context bounds it, not the sequence.
  const bool windowed = options.kv_window > 0;
  if (!windowed && needed > c.n_ctx)
    return Status::error("the prompt's " + std::to_string(prompt.size()) + " tokens + " +
                         std::to_string(request.max_new_tokens) + " new tokens need " +
                         std::to_string(needed) + " positions, beyond the context length " +
                         std::to_string(c.n_ctx));
  const int64_t room = static_cast<int64_t>(cache->n_blocks()) * cache->block_size();
  // With a window a sequence holds at most the window's blocks (plus a step's chunk), except
  // in the uncached baseline, which recomputes every position in one chunk.
  const int chunk =
      options.recompute_every_step
          ? static_cast<int>(std::min<int64_t>(needed, INT32_MAX))
          : std::min(options.max_batch_tokens, windowed ? options.kv_window : INT32_MAX);
  const int64_t held = cache->window_blocks_bound(needed, chunk) * cache->block_size();
  if (held > room)
    return Status::error(
        "the prompt's " + std::to_string(prompt.size()) + " tokens + " +
        std::to_string(request.max_new_tokens) + " new tokens need " + std::to_string(needed) +
        " positions" +
        (windowed ? " (" + std::to_string(held) + " held at once in the window)" : std::string()) +
        ", beyond the whole KV cache (" + std::to_string(room) + " positions in " +
        std::to_string(cache->arena_bytes()) + " bytes)");
  return Status::ok();
}

Result<RequestId> Engine::submit(Request request) {
  std::vector<int32_t> prompt = std::move(request.prompt_ids);
  if (request.prompt_text) {
    KVLM_ASSIGN_OR_RETURN(prompt,
                          impl_->model->encode_prompt(*request.prompt_text, request.allow_special));
  }
  if (request.max_new_tokens < 1)
    return Status::error("max_new_tokens must be at least 1, found " +
                         std::to_string(request.max_new_tokens));
  KVLM_RETURN_IF_ERROR(impl_->check_request(request, prompt));
  KVLM_ASSIGN_OR_RETURN(GenerationState state, GenerationState::create(*impl_->model, request));
  auto seq = std::make_unique<Sequence>(Sequence{0, std::move(prompt), 0, 0, -1, std::move(state)});
  seq->n_prompt = seq->tokens.size();
  std::lock_guard<std::mutex> lock(impl_->inbox_mutex);
  seq->id = impl_->next_id++;
  const RequestId id = seq->id;
  impl_->submitted.push_back(std::move(seq));
  ++impl_->unfinished;
  ++impl_->published.waiting;
  return id;
}

void Engine::cancel(RequestId id) {
  std::lock_guard<std::mutex> lock(impl_->inbox_mutex);
  impl_->cancelled.push_back(id);
}

bool Engine::has_unfinished() const {
  return impl_->unfinished.load() > 0;
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(impl_->inbox_mutex);
  return impl_->published;
}

void Engine::Impl::finish(Sequence* seq) {
  scheduler->remove(seq);
  sequences.erase(seq->id);
  --unfinished;
}

void Engine::Impl::drain_inbox(std::vector<Event>* events) {
  std::vector<std::unique_ptr<Sequence>> arrived;
  std::vector<RequestId> to_cancel;
  {
    std::lock_guard<std::mutex> lock(inbox_mutex);
    arrived.swap(submitted);
    to_cancel.swap(cancelled);
  }
  for (auto& seq : arrived) {  // in submission order: arrival order is queue order
    scheduler->enqueue(seq.get());
    stats.prompt_tokens += static_cast<int64_t>(seq->n_prompt);
    const RequestId id = seq->id;
    sequences[id] = std::move(seq);
  }
  for (RequestId id : to_cancel) {
    auto it = sequences.find(id);
    if (it == sequences.end()) continue;  // unknown or already finished
    Event event;
    event.id = id;
    event.text = it->second->state.flush();
    event.finish = FinishReason::kCancelled;
    events->push_back(std::move(event));
    finish(it->second.get());
  }
}

std::vector<Event> Engine::step() {
  Impl& m = *impl_;
  std::vector<Event> events;
  m.drain_inbox(&events);
  const StepPlan plan = m.scheduler->schedule();
  m.stats.preemptions += plan.n_preempted;
  m.stats.prefix_queries += plan.prefix_queried;
  m.stats.prefix_hits += plan.prefix_hits;
  if (!plan.chunks.empty()) {
    std::vector<SequenceChunk> chunks;
    for (const ScheduledChunk& sc : plan.chunks) {
      chunks.push_back({sc.seq->slot, sc.start,
                        std::span<const int32_t>(sc.seq->tokens).subspan(sc.start, sc.n)});
      m.stats.rows_computed += sc.n;
    }
    const size_t V = m.model->n_vocab();
    m.logits.resize(chunks.size() * V);
    const auto start = std::chrono::steady_clock::now();
    const Status run = m.model->model().forward(m.logits.data(), chunks, *m.cache, m.par);
    (plan.prefill_tokens > 0 ? m.stats.prefill_seconds : m.stats.decode_seconds) +=
        seconds_since(start);
    ++m.stats.steps;
    m.scheduler->computed(plan);
    for (size_t k = 0; k < plan.chunks.size(); ++k) {
      Sequence* seq = plan.chunks[k].seq;
      if (!run.is_ok()) {  // a bug, not a user error (requests were checked at submit)
        Event event;
        event.id = seq->id;
        event.finish = FinishReason::kError;
        event.error = run.message();
        events.push_back(std::move(event));
        m.finish(seq);
        continue;
      }
      if (!plan.chunks[k].samples()) continue;  // a prefill chunk short of the prompt's end
      const std::span<const float> row(m.logits.data() + k * V, V);
      if (m.options.on_logits) m.options.on_logits(seq->id, seq->state.n_generated(), row);
      Event event = seq->state.next(row, seq->history());
      event.id = seq->id;
      ++m.stats.generated_tokens;
      if (plan.prefill_tokens == 0) ++m.stats.decode_step_tokens;
      const bool done = event.finish != FinishReason::kNone;
      if (!done) seq->tokens.push_back(event.token);
      events.push_back(std::move(event));
      if (done) m.finish(seq);
    }
  }
  m.stats.running = m.scheduler->n_running();
  m.stats.waiting = m.scheduler->n_waiting();
  m.update_cache_gauges();
  std::lock_guard<std::mutex> lock(m.inbox_mutex);
  m.published = m.stats;
  m.published.waiting += static_cast<int>(m.submitted.size());
  return events;
}

Result<std::vector<Completion>> run_to_completion(
    Engine& engine, std::vector<Request> requests,
    const std::function<void(const Event&)>& on_event) {
  std::map<RequestId, size_t> index;
  std::vector<Completion> out(requests.size());
  std::vector<RequestId> ids;
  for (size_t i = 0; i < requests.size(); ++i) {
    Request& request = requests[i];
    if (request.prompt_text) {
      auto encoded = engine.model().encode_prompt(*request.prompt_text, request.allow_special);
      if (!encoded)
        return Status::error("request " + std::to_string(i + 1) + ": " + encoded.message());
      request.prompt_ids = std::move(encoded.value());
      request.prompt_text.reset();
    }
    out[i].prompt_ids = request.prompt_ids;
    auto id = engine.submit(std::move(request));
    if (!id) {
      for (RequestId submitted : ids) engine.cancel(submitted);
      while (engine.has_unfinished()) engine.step();
      return Status::error("request " + std::to_string(i + 1) + ": " + id.message());
    }
    ids.push_back(id.value());
    index[id.value()] = i;
  }
  size_t n_done = 0;
  while (n_done < out.size()) {
    for (const Event& event : engine.step()) {
      Completion& c = out[index.at(event.id)];
      if (event.token >= 0) c.ids.push_back(event.token);
      c.text += event.text;
      if (event.logprobs) c.logprobs.push_back(*event.logprobs);
      if (on_event) on_event(event);
      if (event.finish == FinishReason::kNone) continue;
      c.finish = event.finish;
      ++n_done;
      if (event.finish == FinishReason::kError) {
        for (RequestId id : ids) engine.cancel(id);
        while (engine.has_unfinished()) engine.step();
        return Status::error(event.error);
      }
    }
  }
  return out;
}

}  // namespace kvlm
