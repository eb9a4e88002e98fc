// EventQueue: the engine loop's events for one HTTP request (all its choices), handed from the
// engine thread to the HTTP thread that answers. The engine thread pushes after each step();
// the HTTP thread waits with a timeout, so it can look at its client between tokens.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <vector>

#include "kvlm/engine.h"

namespace kvlm::serve {

class EventQueue {
 public:
  void push(Event event) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      events_.push_back(std::move(event));
    }
    ready_.notify_one();
  }

  // Every queued event, waiting up to `timeout` for the first; empty on timeout.
  std::vector<Event> wait_pop(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    ready_.wait_for(lock, timeout, [this] { return !events_.empty(); });
    std::vector<Event> out(std::make_move_iterator(events_.begin()),
                           std::make_move_iterator(events_.end()));
    events_.clear();
    return out;
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Event> events_;
};

}  // namespace kvlm::serve
