// EngineLoop: the one thread that drives Engine::step(), and the bridge to the HTTP threads.
// An HTTP thread submits the engine requests of one API call (its choices) and gets back their
// ids and one EventQueue; after each step the loop pushes every event into its request's queue,
// and times it for the metrics (time to first token, inter-token latency, end to end). The
// loop sleeps while no request is unfinished.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kvlm/engine.h"
#include "serve/api_error.h"
#include "serve/event_queue.h"
#include "serve/metrics.h"

namespace kvlm::serve {

struct Submission {
  std::vector<RequestId> ids;  // in the order the requests were given
  std::shared_ptr<EventQueue> events;
};

class EngineLoop {
 public:
  // `max_unfinished`: engine requests admitted at once (running + waiting); more get 503.
  EngineLoop(Engine& engine, int max_unfinished);
  ~EngineLoop();  // stop()s
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  void start();
  // All of `requests` or none: 503 (with Retry-After) when they would take the number of
  // unfinished requests past the limit, or while stopping; 400 when they are more than the
  // limit itself, or the engine refuses one.
  ApiResult<Submission> submit(std::vector<Request> requests);
  void cancel(RequestId id);
  // Refuses new submissions, cancels every unfinished request, delivers their final events,
  // then ends the thread. Idempotent.
  void stop();

  EngineStats stats() const;  // as of the last step
  std::string metrics_text() const;
  void count_rejected();

 private:
  using Clock = std::chrono::steady_clock;
  struct Tracked {
    std::shared_ptr<EventQueue> events;
    Clock::time_point arrival;
    Clock::time_point last_token;
    bool has_token = false;
  };
  void run();
  void route(std::vector<Event>& events, Clock::time_point now);

  Engine& engine_;
  const int max_unfinished_;
  mutable std::mutex mutex_;
  std::condition_variable work_;
  std::unordered_map<RequestId, Tracked> tracked_;  // unfinished requests
  EngineStats stats_;
  ServerMetrics metrics_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kvlm::serve
