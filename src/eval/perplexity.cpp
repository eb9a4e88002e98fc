#include "eval/perplexity.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>

#include "kv/contiguous_kv_cache.h"

namespace kvlm {

namespace {

// log(sum(exp(logits))) in double, and the argmax (ties to the lowest id).
struct RowStats {
  double log_sum_exp;
  int32_t argmax;
};

RowStats row_stats(const float* logits, size_t V) {
  int32_t best = 0;
  for (size_t v = 1; v < V; ++v)
    if (logits[v] > logits[best]) best = static_cast<int32_t>(v);
  const double max = logits[best];
  double sum = 0;
  for (size_t v = 0; v < V; ++v) sum += std::exp(double{logits[v]} - max);
  return {max + std::log(sum), best};
}

// Logit rows [length - first_target, V] of one window under one configuration: row i is the
// distribution after the window's tokens [0, first_target + i), predicting offset first_target + i.
Status window_logits(const EvalConfig& config, std::span<const int32_t> window, int first_target,
                     std::vector<float>* logits, const Parallel& par) {
  const ModelConfig& c = config.model->config();
  KvStorageOptions storage = config.kv;
  if (storage.dtype == KvDtype::fp8 && storage.fp8_k_scales.empty())
    storage.n_kv_head = c.n_kv_head;
  KVLM_RETURN_IF_ERROR(validate_kv_storage(storage, c.n_layer, c.kv_dim()));
  const int length = static_cast<int>(window.size());
  ContiguousKvCache cache(c.n_layer, c.kv_dim(), {length}, storage);
  // One chunk for the unscored prefix (its last row predicts the first target), then one
  // single-token chunk per later position: every row needed comes out of one forward pass.
  std::vector<SequenceChunk> chunks;
  chunks.push_back({0, 0, window.first(first_target)});
  for (int p = first_target; p + 1 < length; ++p) chunks.push_back({0, p, window.subspan(p, 1)});
  logits->resize(chunks.size() * static_cast<size_t>(c.n_vocab));
  return config.model->forward(logits->data(), chunks, cache, par);
}

}  // namespace

Result<std::vector<EvalWindow>> perplexity_windows(int64_t n_tokens, int ctx, int stride) {
  std::vector<EvalWindow> windows;
  if (stride == 0) {
    if (ctx < 3)
      return Status::error(
          "--ctx must be at least 3 tokens (a window scores offsets ctx/2+1.."
          "ctx-1), found " +
          std::to_string(ctx));
    const int64_t n_windows = n_tokens / ctx;
    if (n_windows < 1)
      return Status::error("the text has " + std::to_string(n_tokens) +
                           " tokens, fewer than one window of --ctx " + std::to_string(ctx) +
                           "; give a longer --file or a smaller --ctx");
    for (int64_t k = 0; k < n_windows; ++k) windows.push_back({k * ctx, ctx, ctx / 2 + 1});
    return windows;
  }
  if (ctx < 2)
    return Status::error("--ctx must be at least 2 tokens, found " + std::to_string(ctx));
  if (stride < 1 || stride > ctx)
    return Status::error("--stride must be in [1, --ctx " + std::to_string(ctx) + "], found " +
                         std::to_string(stride));
  if (n_tokens < 2)
    return Status::error("the text has " + std::to_string(n_tokens) +
                         " tokens; perplexity needs at least 2");
  int64_t previous_end = 0;
  for (int64_t first = 0;; first += stride) {
    const int64_t end = std::min(first + ctx, n_tokens);
    const int64_t first_target = std::max(previous_end, first + 1) - first;
    if (first_target < end - first)
      windows.push_back({first, static_cast<int>(end - first), static_cast<int>(first_target)});
    previous_end = end;
    if (end == n_tokens) break;
  }
  return windows;
}

namespace {

// The windows to score, once the configurations, the options and the tokens are known to agree.
Result<std::vector<EvalWindow>> checked_windows(std::span<const int32_t> tokens,
                                                const EvalConfig& test, const EvalConfig* base,
                                                const PerplexityOptions& options) {
  const ModelConfig& c = test.model->config();
  if (base &&
      (base->model->config().n_vocab != c.n_vocab || base->model->config().n_ctx != c.n_ctx))
    return Status::error("the two configurations compared have different vocabularies or contexts");
  const int ctx = options.ctx > 0 ? options.ctx : c.n_ctx;
  const bool streaming = test.kv.window.enabled();
  if (base && base->kv.window.enabled() != streaming)
    return Status::error("the two configurations compared must both use a cache window or neither");
  if (!streaming && ctx > c.n_ctx)
    return Status::error("--ctx " + std::to_string(ctx) + " is beyond the model's context length " +
                         std::to_string(c.n_ctx));
  Result<std::vector<EvalWindow>> windows = std::vector<EvalWindow>{};
  if (streaming) {  // the whole text as one stream through the windowed cache
    if (options.ctx != 0 || options.stride != 0)
      return Status::error(
          "--kv-window scores the whole text as one stream; --ctx and --stride do not apply");
    if (tokens.size() < 2 || tokens.size() > static_cast<size_t>(INT32_MAX))
      return Status::error("the text has " + std::to_string(tokens.size()) +
                           " tokens; a stream needs at least 2 and fewer than 2^31");
    KVLM_RETURN_IF_ERROR(test.model->check_kv_window(test.kv.window));
    windows.value().push_back({0, static_cast<int>(tokens.size()), 1});
  } else {
    windows = perplexity_windows(static_cast<int64_t>(tokens.size()), ctx, options.stride);
  }
  if (!windows) return windows.status();
  for (int32_t id : tokens)
    if (id < 0 || id >= c.n_vocab)
      return Status::error("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                           std::to_string(c.n_vocab) + ")");
  return windows;
}

}  // namespace

Result<PerplexityResult> perplexity(std::span<const int32_t> tokens, const EvalConfig& test,
                                    const EvalConfig* base, const PerplexityOptions& options,
                                    const Parallel& par) {
  KVLM_ASSIGN_OR_RETURN(const std::vector<EvalWindow> windows,
                        checked_windows(tokens, test, base, options));
  const bool streaming = test.kv.window.enabled();
  const size_t V = test.model->config().n_vocab;
  PerplexityResult r;
  r.compared = base != nullptr;
  double nll = 0, nll_base = 0;
  int64_t agree = 0;
  std::vector<double> klds;
  std::vector<float> logits, logits_base;
  std::vector<int32_t> window;
  for (const EvalWindow& w : windows) {
    window.assign(tokens.begin() + w.first, tokens.begin() + w.first + w.length);
    if (options.stride == 0 && !streaming && options.bos >= 0) window[0] = options.bos;
    KVLM_RETURN_IF_ERROR(window_logits(test, window, w.first_target, &logits, par));
    if (base) KVLM_RETURN_IF_ERROR(window_logits(*base, window, w.first_target, &logits_base, par));
    for (int t = w.first_target; t < w.length; ++t) {
      const size_t row = static_cast<size_t>(t - w.first_target) * V;
      const int32_t target = window[t];
      const RowStats s = row_stats(logits.data() + row, V);
      nll += s.log_sum_exp - logits[row + target];
      ++r.tokens;
      if (!base) continue;
      const RowStats sb = row_stats(logits_base.data() + row, V);
      nll_base += sb.log_sum_exp - logits_base[row + target];
      agree += s.argmax == sb.argmax;
      double kld = 0;
      for (size_t v = 0; v < V; ++v) {
        const double lp_base = logits_base[row + v] - sb.log_sum_exp;
        const double lp = logits[row + v] - s.log_sum_exp;
        kld += std::exp(lp_base) * (lp_base - lp);
      }
      klds.push_back(std::max(kld, 0.0));  // rounding can leave -1e-17 for equal rows
    }
    ++r.windows;
    if (options.progress) options.progress(r.windows, static_cast<int>(windows.size()));
  }
  r.nll = nll / static_cast<double>(r.tokens);
  r.ppl = std::exp(r.nll);
  if (base) {
    r.nll_base = nll_base / static_cast<double>(r.tokens);
    r.ppl_base = std::exp(r.nll_base);
    r.top1_agree = static_cast<double>(agree) / static_cast<double>(r.tokens);
    double sum = 0;
    for (double k : klds) sum += k;
    r.kld_mean = sum / static_cast<double>(klds.size());
    std::sort(klds.begin(), klds.end());
    const size_t rank = static_cast<size_t>(std::ceil(0.99 * static_cast<double>(klds.size())));
    r.kld_p99 = klds[std::max<size_t>(rank, 1) - 1];
  }
  return r;
}

}  // namespace kvlm
