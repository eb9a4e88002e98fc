#include "serve/engine_loop.h"

#include "serve/openai_response.h"

namespace kvlm::serve {

EngineLoop::EngineLoop(Engine& engine, int max_unfinished)
    : engine_(engine), max_unfinished_(max_unfinished), stats_(engine.stats()) {}

EngineLoop::~EngineLoop() {
  stop();
}

void EngineLoop::start() {
  thread_ = std::thread([this] { run(); });
}

ApiResult<Submission> EngineLoop::submit(std::vector<Request> requests) {
  std::lock_guard<std::mutex> lock(mutex_);
  ApiError busy;
  busy.status = 503;
  busy.type = "server_error";
  if (stopping_) {
    busy.message = "the server is shutting down";
    busy.code = "shutting_down";
    return busy;
  }
  if (requests.size() > static_cast<size_t>(max_unfinished_)) {
    // Retrying cannot help: say so instead of 503.
    return bad_request("n",
                       "this request needs " + std::to_string(requests.size()) +
                           " sequences (prompts x n), more than the server runs and queues at "
                           "once (" +
                           std::to_string(max_unfinished_) + ", --max-seqs + --max-queue)",
                       "too_many_sequences");
  }
  const size_t unfinished = tracked_.size();
  if (unfinished + requests.size() > static_cast<size_t>(max_unfinished_)) {
    ++metrics_.rejected_queue_full;
    busy.message = "the server is busy: " + std::to_string(unfinished) +
                   " sequences are running or waiting, and this request adds " +
                   std::to_string(requests.size()) + " to a limit of " +
                   std::to_string(max_unfinished_) + " (--max-seqs + --max-queue); retry later";
    busy.code = "queue_full";
    busy.retry_after = 1;
    return busy;
  }
  // Submitting under the lock: the loop cannot route an event before its request is tracked.
  Submission out;
  out.events = std::make_shared<EventQueue>();
  const Clock::time_point now = Clock::now();
  for (Request& request : requests) {
    Result<RequestId> id = engine_.submit(std::move(request));
    if (!id) {
      for (RequestId done : out.ids) {
        engine_.cancel(done);
        tracked_[done].events = std::make_shared<EventQueue>();  // its events go nowhere
      }
      return bad_request("", id.message());
    }
    out.ids.push_back(id.value());
    tracked_[id.value()] = Tracked{out.events, now, now, false};
  }
  work_.notify_one();
  return out;
}

void EngineLoop::cancel(RequestId id) {
  engine_.cancel(id);
}

void EngineLoop::stop() {
  std::vector<RequestId> unfinished;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    for (const auto& [id, tracked] : tracked_) unfinished.push_back(id);
  }
  for (RequestId id : unfinished) engine_.cancel(id);
  work_.notify_all();
  if (thread_.joinable()) thread_.join();
}

EngineStats EngineLoop::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

std::string EngineLoop::metrics_text() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return format_metrics(stats_, metrics_);
}

void EngineLoop::count_rejected() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++metrics_.rejected_queue_full;
}

void EngineLoop::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_.wait(lock, [this] { return !tracked_.empty() || stopping_; });
    if (tracked_.empty()) break;  // stopping, and every request has had its final event
    lock.unlock();
    std::vector<Event> events = engine_.step();
    const EngineStats stats = engine_.stats();
    const Clock::time_point now = Clock::now();
    lock.lock();
    stats_ = stats;
    const bool idle = events.empty();
    route(events, now);
    if (idle) {  // nothing could run this step (should not last): do not spin
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      lock.lock();
    }
  }
}

void EngineLoop::route(std::vector<Event>& events, Clock::time_point now) {
  auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  for (Event& event : events) {
    auto it = tracked_.find(event.id);
    if (it == tracked_.end()) continue;
    Tracked& t = it->second;
    if (event.token >= 0) {
      if (t.has_token) {
        metrics_.inter_token_latency.observe(seconds(now - t.last_token));
      } else {
        metrics_.time_to_first_token.observe(seconds(now - t.arrival));
      }
      t.has_token = true;
      t.last_token = now;
    }
    const bool last = event.finish != FinishReason::kNone;
    if (last) {
      metrics_.e2e_request_latency.observe(seconds(now - t.arrival));
      ++metrics_.finished[openai_finish_reason(event.finish)];
    }
    t.events->push(std::move(event));
    if (last) tracked_.erase(it);
  }
}

}  // namespace kvlm::serve
