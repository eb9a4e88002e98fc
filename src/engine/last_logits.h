// Each prompt's last-position logits, computed by the engine: what `kvlm logits` prints and
// what the reference tests compare with numpy's.
//
// Cached, the last token is computed against keys and values read back from the cache: each
// prompt minus its last token runs first as a request of its own, then the whole prompt runs as
// a second request, which finds those positions in the prefix cache (blocks of one position, so
// every computed position is a full block) and computes only its last token. Uncached: the
// engine's recompute baseline, one full pass over each prompt. Both give the same bits.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kvlm/engine.h"

namespace kvlm {

struct LastLogitsOptions {
  bool cached = true;
  int threads = 0;               // 0: all cores
  std::string kv_dtype = "f32";  // EngineOptions::kv_dtype
  int kv_window = 0;             // EngineOptions::kv_window (sinks + sliding window; 0: off)
  int sink_tokens = 0;           // EngineOptions::sink_tokens
};

// [n_prompts][n_vocab]. Prompts are checked first (non-empty, ids in the vocabulary, within
// the context unless a window renumbers positions), with errors naming the prompt. With a
// window, the first requests' blocks the window evicted stay cached (nothing reuses them), so
// the second requests still find every position of their prefix.
Result<std::vector<std::vector<float>>> last_logits(
    std::shared_ptr<LoadedModel> model, const std::vector<std::vector<int32_t>>& prompts,
    const LastLogitsOptions& options);

}  // namespace kvlm
