#include "support/generation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace kvlm::test {

std::string CacheSpec::name() const {
  std::string n = block_size <= 0
                      ? "contiguous"
                      : "paged" + std::to_string(block_size) + (share_prefixes ? "" : "_unshared");
  if (dtype != KvDtype::f32) n += std::string("_kv_") + kv_dtype_name(dtype);
  return n;
}

KvStorageOptions CacheSpec::storage(const ModelConfig& config) const {
  KvStorageOptions s;
  s.dtype = dtype;
  if (dtype == KvDtype::fp8) s.n_kv_head = config.n_kv_head;  // unit scales, as generate() makes
  return s;
}

void CacheSpec::apply(GenerateOptions* options) const {
  options->kv_storage.dtype = dtype;
  if (block_size <= 0) {
    options->paged.reset();
    return;
  }
  PagedGenerateOptions paged;
  paged.block_size = block_size;
  paged.share_prefixes = share_prefixes;
  options->paged = paged;
}

Generation run_generate(Model& model, const std::vector<std::vector<int32_t>>& prompts,
                        GenerateOptions options, int threads) {
  Generation out;
  options.observe = [&](int step, int seq, std::span<const float> logits) {
    if (out.logits.size() <= static_cast<size_t>(step)) out.logits.resize(step + 1);
    auto& row = out.logits[step];
    if (row.size() <= static_cast<size_t>(seq)) row.resize(seq + 1);
    row[seq].assign(logits.begin(), logits.end());
  };
  auto result = generate(model, prompts, options, Parallel{threads});
  out.status = result.status();
  if (result) {
    out.tokens = result->tokens;
    out.stats = result->stats;
  }
  return out;
}

Generation run_generate(Model& model, const std::vector<std::vector<int32_t>>& prompts, int n_new,
                        bool cached, int threads, const CacheSpec& cache) {
  GenerateOptions options;
  options.max_new_tokens = n_new;
  options.use_cache = cached;
  cache.apply(&options);
  return run_generate(model, prompts, options, threads);
}

Generation only_sequence(const Generation& g, size_t seq) {
  Generation out;
  out.status = g.status;
  out.stats = g.stats;
  if (seq < g.tokens.size()) out.tokens = {g.tokens[seq]};
  for (const auto& step : g.logits)
    if (seq < step.size()) out.logits.push_back({step[seq]});
  return out;
}

bool bitwise_equal(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

float max_abs_diff(std::span<const float> a, std::span<const float> b) {
  float m = a.size() == b.size() ? 0.0f : INFINITY;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

void expect_same_bits(const Generation& a, const Generation& b, const std::string& what) {
  ASSERT_TRUE(a.status.is_ok()) << what << ": " << a.status.message();
  ASSERT_TRUE(b.status.is_ok()) << what << ": " << b.status.message();
  EXPECT_EQ(a.tokens, b.tokens) << what;
  ASSERT_EQ(a.logits.size(), b.logits.size()) << what;
  for (size_t step = 0; step < a.logits.size(); ++step) {
    ASSERT_EQ(a.logits[step].size(), b.logits[step].size()) << what << ": step " << step;
    for (size_t s = 0; s < a.logits[step].size(); ++s)
      EXPECT_TRUE(bitwise_equal(a.logits[step][s], b.logits[step][s]))
          << what << ": step " << step << " sequence " << s << ", max |difference| "
          << max_abs_diff(a.logits[step][s], b.logits[step][s]);
  }
}

}  // namespace kvlm::test
