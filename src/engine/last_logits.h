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
};

// [n_prompts][n_vocab]. Prompts are checked first (non-empty, ids in the vocabulary, within
// the context), with errors naming the prompt.
Result<std::vector<std::vector<float>>> last_logits(
    std::shared_ptr<LoadedModel> model, const std::vector<std::vector<int32_t>>& prompts,
    const LastLogitsOptions& options);

}  // namespace kvlm
