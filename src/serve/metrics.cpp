#include "serve/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace kvlm::serve {

namespace {

// Shortest text that reads back as the same double (Prometheus parses Go floats).
std::string number(double value) {
  char buf[40];
  if (value == std::floor(value) && std::fabs(value) < 1e15) {  // counters: 40, not 4e+01
    std::snprintf(buf, sizeof buf, "%.0f", value);
    return buf;
  }
  double back = 0;
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, value);
    if (std::sscanf(buf, "%lf", &back) == 1 && back == value) break;
  }
  return buf;
}

void header(std::string* out, const std::string& name, const char* type, const std::string& help) {
  *out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void metric(std::string* out, const std::string& name, const char* type, const std::string& help,
            double value) {
  header(out, name, type, help);
  *out += name + " " + number(value) + "\n";
}

// vLLM's bucket bounds for the same histograms.
std::vector<double> ttft_bounds() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
          1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}
std::vector<double> itl_bounds() {
  return {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
          0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
}
std::vector<double> e2e_bounds() {
  return {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
          30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  // Prometheus buckets are "less than or equal": the first bound >= value.
  const size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::write(std::string* out, const std::string& name, const std::string& help) const {
  header(out, name, "histogram", help);
  int64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    *out +=
        name + "_bucket{le=\"" + number(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  *out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
  *out += name + "_sum " + number(sum_) + "\n";
  *out += name + "_count " + std::to_string(count_) + "\n";
}

ServerMetrics::ServerMetrics()
    : time_to_first_token(ttft_bounds()),
      inter_token_latency(itl_bounds()),
      e2e_request_latency(e2e_bounds()) {}

std::string format_metrics(const EngineStats& stats, const ServerMetrics& m) {
  std::string out;
  metric(&out, "kvlm:num_requests_running", "gauge", "Sequences running in the engine.",
         stats.running);
  metric(&out, "kvlm:num_requests_waiting", "gauge",
         "Sequences waiting to be admitted (preempted ones included).", stats.waiting);
  metric(&out, "kvlm:kv_cache_usage_perc", "gauge",
         "Fraction of KV cache blocks held by sequences (1 = full).", stats.kv_usage);
  // vLLM's info gauge (num_gpu_blocks: the name dashboards know; here the blocks of the
  // CPU arena), then the block counts themselves.
  header(&out, "kvlm:cache_config_info", "gauge", "Information of the KV cache's configuration.");
  out += "kvlm:cache_config_info{block_size=\"" + std::to_string(stats.kv_block_size) +
         "\",num_gpu_blocks=\"" + std::to_string(stats.kv_blocks_total) + "\"} 1\n";
  metric(&out, "kvlm:kv_cache_blocks_total", "gauge", "KV cache blocks in the arena.",
         stats.kv_blocks_total);
  metric(&out, "kvlm:kv_cache_blocks_used", "gauge", "KV cache blocks held by sequences.",
         stats.kv_blocks_used);
  metric(&out, "kvlm:kv_cache_blocks_free", "gauge",
         "KV cache blocks not held by any sequence (cached prefixes included).",
         stats.kv_blocks_free);
  metric(&out, "kvlm:kv_cache_bytes_total", "gauge", "Bytes of the KV cache's arena.",
         static_cast<double>(stats.kv_bytes_total));
  metric(&out, "kvlm:prefix_cache_queries_total", "counter",
         "Prompt tokens looked up in the prefix cache.", static_cast<double>(stats.prefix_queries));
  metric(&out, "kvlm:prefix_cache_hits_total", "counter",
         "Prompt tokens found in the prefix cache.", static_cast<double>(stats.prefix_hits));
  metric(&out, "kvlm:prompt_tokens_total", "counter", "Prompt tokens of admitted sequences.",
         static_cast<double>(stats.prompt_tokens));
  metric(&out, "kvlm:generation_tokens_total", "counter", "Tokens generated.",
         static_cast<double>(stats.generated_tokens));
  metric(&out, "kvlm:num_preemptions_total", "counter",
         "Sequences preempted (blocks freed, recomputed later) when the cache ran out.",
         static_cast<double>(stats.preemptions));
  header(&out, "kvlm:request_success_total", "counter",
         "Sequences finished, by finish reason (stop, length, abort, error).");
  for (const char* reason : {"stop", "length", "abort", "error"}) {
    auto it = m.finished.find(reason);
    out += std::string("kvlm:request_success_total{finished_reason=\"") + reason + "\"} " +
           std::to_string(it == m.finished.end() ? 0 : it->second) + "\n";
  }
  metric(&out, "kvlm:request_rejected_total", "counter",
         "Requests answered 503 because the waiting queue was full.",
         static_cast<double>(m.rejected_queue_full));
  m.time_to_first_token.write(&out, "kvlm:time_to_first_token_seconds",
                              "Time from a sequence's arrival to its first token.");
  m.inter_token_latency.write(&out, "kvlm:inter_token_latency_seconds",
                              "Time between consecutive tokens of a sequence.");
  m.e2e_request_latency.write(&out, "kvlm:e2e_request_latency_seconds",
                              "Time from a sequence's arrival to its last event.");
  return out;
}

}  // namespace kvlm::serve
