// The server's metrics and their Prometheus text (GET /metrics). Names follow vLLM's
// (`vllm:num_requests_running` -> `kvlm:num_requests_running`, ...), bucket bounds too, so
// dashboards made for vLLM read kvlm with the prefix changed. Every name is listed, with its
// meaning, in docs/serving.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kvlm/engine.h"

namespace kvlm::serve {

// A Prometheus histogram: counts per upper bound (cumulative when written), sum and count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  int64_t count() const { return count_; }
  double sum() const { return sum_; }
  // # HELP, # TYPE, name_bucket{le="..."} lines (cumulative, +Inf last), name_sum, name_count.
  void write(std::string* out, const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;   // ascending
  std::vector<int64_t> counts_;  // [bounds_.size() + 1]: the last is above every bound
  double sum_ = 0;
  int64_t count_ = 0;
};

// What the engine loop observes beyond EngineStats: latencies of each request, and how
// requests ended. All in seconds.
struct ServerMetrics {
  ServerMetrics();
  Histogram time_to_first_token;
  Histogram inter_token_latency;
  Histogram e2e_request_latency;
  std::map<std::string, int64_t> finished;  // by finish reason as the API names it
  int64_t rejected_queue_full = 0;          // requests answered 503
};

// The whole /metrics page.
std::string format_metrics(const EngineStats& stats, const ServerMetrics& metrics);

}  // namespace kvlm::serve
