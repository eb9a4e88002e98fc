// Perplexity of a token sequence, and how far one configuration (KV cache dtype, weight type)
// moves the next-token distributions away from another: what `kvlm perplexity` reports.
//
// Windows (which tokens are scored, each exactly once):
// * Default, as llama-perplexity: the text is cut into floor(N / ctx) windows of ctx tokens,
//   [k * ctx, (k + 1) * ctx); a trailing part shorter than ctx is not used. When `bos` is set
//   (models whose prompts start with BOS: llama2.c, Llama tokenizers) the window's first token
//   is replaced by it. In each window the tokens at offsets [ctx / 2 + 1, ctx) are scored, each
//   predicted from the window's tokens before it (so every scored token sees at least ctx / 2
//   tokens of context): ctx - 1 - ctx / 2 per window.
// * --stride S (1 <= S <= ctx), as Hugging Face's strided perplexity: windows of up to ctx tokens
//   start at 0, S, 2S, ... until one reaches the end of the text; a window scores the tokens past
//   the previous window's end (the first window: offsets 1..), so each token after the first is
//   scored once, with at least ctx - S tokens of context once past the first window. No BOS.
// * With a cache window (EvalConfig::kv.window: sinks + sliding window), the whole text is one
//   stream: every token after the first is scored, predicted through the windowed cache from
//   all tokens before it (of which the row attends to the sinks and the last W - S). No BOS,
//   as with --stride, so `--ctx W --stride 1` (each token predicted by recomputing its last W
//   tokens from scratch) scores the very same tokens: StreamingLLM's reference.
//
// Comparison: with a base configuration, both run over the same windows; per scored position,
// KL(P_base || P) = sum_v p_base(v) (log p_base(v) - log p(v)) over the full vocabulary in double
// precision; top-1 agreement counts positions whose argmax (ties to the lowest id) is the same.
// kld_p99 is the nearest-rank 99th percentile of the per-position values.
//
// Each window runs through Model::forward as one chunk for its unscored prefix plus one chunk per
// scored position on the same sequence, so a single forward pass yields every logit row needed;
// by the exactness contract those rows are bitwise what a cached decode would give. The windowed
// stream goes in passes of W scored positions through a contiguous cache whose ring holds 2W - 1
// positions (kv_bytes_peak), so its memory does not grow with the text.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "kv/kv_cache.h"
#include "kvlm/status.h"
#include "model/model.h"
#include "ops/parallel.h"

namespace kvlm {

// One configuration: a model (its weights as loaded) and how the cache stores K/V.
struct EvalConfig {
  Model* model = nullptr;
  KvStorageOptions kv;
};

struct PerplexityOptions {
  int ctx = 0;       // window length in tokens; 0: the model's context length
  int stride = 0;    // 0: llama-perplexity windows; > 0: strided windows (see above)
  int32_t bos = -1;  // >= 0 (default windows only): each window's first token becomes this id
  // Called after each window with (windows done, windows in all); for a progress bar.
  std::function<void(int, int)> progress;
};

struct PerplexityResult {
  int64_t tokens = 0;  // scored tokens
  int windows = 0;
  double nll = 0;         // mean negative log-likelihood (nats) of the scored tokens
  double ppl = 0;         // exp(nll)
  bool compared = false;  // the fields below are set
  double nll_base = 0;
  double ppl_base = 0;
  double kld_mean = 0;
  double kld_p99 = 0;
  double top1_agree = 0;     // fraction in [0, 1]
  size_t kv_bytes_peak = 0;  // the largest cache one configuration's pass allocated
};

// The windows' layout for n_tokens: [first, first + length) per window and the first scored
// offset in it. Errors name the flag (--ctx, --stride) and what the text holds.
struct EvalWindow {
  int64_t first = 0;
  int length = 0;
  int first_target = 0;  // offsets [first_target, length) are scored
};
Result<std::vector<EvalWindow>> perplexity_windows(int64_t n_tokens, int ctx, int stride);

// Perplexity of `tokens` under `test`; with `base`, also the comparison against it (same
// n_vocab and context needed).
Result<PerplexityResult> perplexity(std::span<const int32_t> tokens, const EvalConfig& test,
                                    const EvalConfig* base, const PerplexityOptions& options,
                                    const Parallel& par);

}  // namespace kvlm
