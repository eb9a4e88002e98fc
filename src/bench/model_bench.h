// Timed runs of a model: one prefill, decode steps over an already filled cache, and the seed's
// cached-vs-uncached experiment with the roofline's prediction beside the measurement. Token
// ids are fixed pseudo-random values: the time of a forward step does not depend on them.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "bench/roofline.h"
#include "kv/kv_cache.h"
#include "kvlm/status.h"
#include "model/model.h"
#include "ops/parallel.h"

namespace kvlm {

struct TimedRun {
  double seconds = 0;   // wall time of the timed part
  int64_t tokens = 0;   // tokens it processed (prefill) or generated (decode, all sequences)
  StepCost cost;        // roofline cost of the timed part
  size_t kv_bytes = 0;  // bytes of the cache it allocated
  // Read bandwidth (bytes/s) measured right beside the timed window: the mean of the readings
  // just before and just after it; 0 when the run was not given a probe.
  double bandwidth = 0;
  double tokens_per_second() const { return seconds > 0 ? tokens / seconds : 0; }
};

// One prefill of an n_tokens prompt into an empty cache, best of `repeats` (after a warm-up).
Result<TimedRun> time_prefill(Model& model, int n_tokens, int repeats, const Parallel& par,
                              const KvStorageOptions& kv = {});

// `batch` sequences with `context` positions already cached (prefilled, not timed) each take
// n_steps decode steps of one token; best of `repeats` rounds of n_steps. `read_bandwidth`,
// when given, is called before each round and once after the last (never inside one), and the
// fastest round's TimedRun::bandwidth is the mean of the two readings around it.
Result<TimedRun> time_decode(Model& model, int batch, int context, int n_steps, int repeats,
                             const Parallel& par, const KvStorageOptions& kv = {},
                             const std::function<double()>& read_bandwidth = {});

// The seed's experiment: generate max_new tokens per prompt without and with the cache.
struct CacheExperiment {
  std::vector<int> prompt_lengths;
  int max_new_tokens = 0;
  double uncached_seconds = 0, cached_seconds = 0;
  double speedup = 0;  // uncached / cached, measured
  // Token positions a left-padded batch pushes through the model (the seed's count): uncached,
  // step s runs max_len + s per row; cached, max_len, then one per step.
  int64_t positions_uncached = 0, positions_cached = 0;
  double position_ratio = 0;
  StepCost uncached_cost, cached_cost;  // summed over steps (ragged, as kvlm runs them)
  double roofline_uncached_seconds = 0, roofline_cached_seconds = 0;
  double roofline_ratio = 0;  // the speedup the two rooflines predict
  bool identical = false;     // cached and uncached chose the same tokens
};

Result<CacheExperiment> run_cache_experiment(Model& model,
                                             const std::vector<std::vector<int32_t>>& prompts,
                                             int max_new_tokens, const MachineRates& rates,
                                             const Parallel& par, const KvStorageOptions& kv = {});

}  // namespace kvlm
