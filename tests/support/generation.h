// Running generate() in tests and comparing runs bit for bit: every step's logits of every
// sequence are recorded, so a claim like "cached == uncached" is checked at every step, not
// only on the tokens. CacheSpec names the cache a run uses, so suites can take it as a
// parameter (contiguous, or paged with a block size, sharing prefixes or not; and how it stores
// K/V: f32, f16, bf16, q8_0, fp8).
#pragma once

#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "generate/generate.h"
#include "kvlm/status.h"

namespace kvlm::test {

struct CacheSpec {
  int block_size = 0;          // 0: the contiguous cache; > 0: paged, blocks of this many positions
  bool share_prefixes = true;  // paged: reuse blocks of a common prefix, in the batch or cached
  KvDtype dtype = KvDtype::f32;  // how K and V are stored (fp8: unit scales)

  // "contiguous", "paged3", "paged16_unshared", "paged4_kv_q8_0" (the dtype when not f32).
  std::string name() const;
  // Points `options` at this cache (paged options, or none; the storage dtype).
  void apply(GenerateOptions* options) const;
  // The storage options a cache for `config` takes (what generate() makes of kv_storage).
  KvStorageOptions storage(const ModelConfig& config) const;
  CacheSpec with(KvDtype d) const {
    CacheSpec c = *this;
    c.dtype = d;
    return c;
  }
};

inline void PrintTo(const CacheSpec& cache, std::ostream* os) {
  *os << cache.name();
}

inline CacheSpec contiguous_cache() {
  return {};
}
inline CacheSpec paged_cache(int block_size, bool share_prefixes = true) {
  return {block_size, share_prefixes};
}

struct Generation {
  std::vector<std::vector<std::vector<float>>> logits;  // [step][seq][n_vocab]
  std::vector<std::vector<int32_t>> tokens;             // new tokens of each sequence
  GenerateStats stats;
  Status status;
};

// generate() with `options` (its observer replaced by the recorder) on `threads` threads.
Generation run_generate(Model& model, const std::vector<std::vector<int32_t>>& prompts,
                        GenerateOptions options, int threads);
// The common case: `n_new` greedy tokens, cached (on `cache`) or not.
Generation run_generate(Model& model, const std::vector<std::vector<int32_t>>& prompts, int n_new,
                        bool cached, int threads, const CacheSpec& cache = {});

// One sequence of a batched run, as if it had run alone (its logits and tokens only).
Generation only_sequence(const Generation& g, size_t seq);

bool bitwise_equal(std::span<const float> a, std::span<const float> b);
float max_abs_diff(std::span<const float> a, std::span<const float> b);

// Both runs succeeded, gave the same tokens and, at every step, the same logits bit for bit for
// every sequence. `what` names the comparison in failure messages.
void expect_same_bits(const Generation& a, const Generation& b, const std::string& what);

}  // namespace kvlm::test
