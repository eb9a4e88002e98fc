// /metrics text: Prometheus exposition of the engine's counters and the server's histograms.
#include "serve/metrics.h"

#include <gtest/gtest.h>

namespace kvlm::serve {
namespace {

TEST(Metrics, HistogramIsCumulativeWithLessOrEqualBuckets) {
  Histogram h({0.1, 1.0});
  h.observe(0.1);  // on the bound: counts in le="0.1"
  h.observe(0.5);
  h.observe(7);
  std::string out;
  h.write(&out, "x_seconds", "Help.");
  EXPECT_EQ(out,
            "# HELP x_seconds Help.\n# TYPE x_seconds histogram\n"
            "x_seconds_bucket{le=\"0.1\"} 1\nx_seconds_bucket{le=\"1\"} 2\n"
            "x_seconds_bucket{le=\"+Inf\"} 3\nx_seconds_sum 7.6\nx_seconds_count 3\n");
}

TEST(Metrics, PageHasEveryDocumentedName) {
  EngineStats stats;
  stats.running = 2;
  stats.waiting = 1;
  stats.kv_usage = 0.25;
  stats.prefix_queries = 40;
  stats.prefix_hits = 32;
  stats.prompt_tokens = 100;
  stats.generated_tokens = 64;
  stats.preemptions = 3;
  stats.kv_block_size = 16;
  stats.kv_blocks_total = 40;
  stats.kv_blocks_used = 10;
  stats.kv_blocks_free = 30;
  stats.kv_bytes_total = 40 * 8192;
  ServerMetrics m;
  m.time_to_first_token.observe(0.02);
  m.finished["length"] = 5;
  m.rejected_queue_full = 2;
  const std::string text = format_metrics(stats, m);
  for (const char* line : {"kvlm:num_requests_running 2\n",
                           "kvlm:num_requests_waiting 1\n",
                           "kvlm:kv_cache_usage_perc 0.25\n",
                           "kvlm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"40\"} 1\n",
                           "kvlm:kv_cache_blocks_total 40\n",
                           "kvlm:kv_cache_blocks_used 10\n",
                           "kvlm:kv_cache_blocks_free 30\n",
                           "kvlm:kv_cache_bytes_total 327680\n",
                           "kvlm:prefix_cache_queries_total 40\n",
                           "kvlm:prefix_cache_hits_total 32\n",
                           "kvlm:prompt_tokens_total 100\n",
                           "kvlm:generation_tokens_total 64\n",
                           "kvlm:num_preemptions_total 3\n",
                           "kvlm:request_success_total{finished_reason=\"length\"} 5\n",
                           "kvlm:request_success_total{finished_reason=\"stop\"} 0\n",
                           "kvlm:request_rejected_total 2\n",
                           "kvlm:time_to_first_token_seconds_bucket{le=\"0.02\"} 1\n",
                           "kvlm:time_to_first_token_seconds_count 1\n",
                           "kvlm:inter_token_latency_seconds_count 0\n",
                           "kvlm:e2e_request_latency_seconds_count 0\n",
                           "# TYPE kvlm:kv_cache_usage_perc gauge\n",
                           "# TYPE kvlm:prompt_tokens_total counter\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line;
  }
}

}  // namespace
}  // namespace kvlm::serve
