#include "eval/perplexity.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <optional>
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

// One configuration's pass over one window: its cache, and the logit rows of the window's
// targets a step at a time. Row i of a step is the distribution after the window's tokens
// [0, t_begin + i), predicting offset t_begin + i. Without a cache window a step is the whole
// window (one forward pass); with one, the window streams through the contiguous cache's ring in
// steps of W targets, so the cache holds 2W - 1 positions however long the text (by the
// exactness contract the rows are the bits one pass would give).
class WindowPass {
 public:
  WindowPass(const EvalConfig& config, const KvStorageOptions& storage,
             std::span<const int32_t> window, int first_target)
      : config_(config),
        window_(window),
        first_target_(first_target),
        step_(storage.window.enabled() ? storage.window.window : static_cast<int>(window.size())),
        cache_(config.model->config().n_layer, config.model->config().kv_dim(),
               {static_cast<int>(window.size())}, storage,
               storage.window.enabled() ? std::max(step_, first_target) : 0) {}

  // Targets per step.
  int step() const { return step_; }
  size_t kv_bytes() const { return cache_.allocated_bytes(); }
  // Logit rows [t_end - t_begin, V] of targets [t_begin, t_end), steps in order.
  Status logits(int t_begin, int t_end, std::vector<float>* out, const Parallel& par) {
    // Target first_target comes from the unscored prefix's last row; each later target t from
    // the single-token chunk at position t - 1.
    chunks_.clear();
    for (int t = t_begin; t < t_end; ++t)
      chunks_.push_back(t == first_target_ ? SequenceChunk{0, 0, window_.first(first_target_)}
                                           : SequenceChunk{0, t - 1, window_.subspan(t - 1, 1)});
    out->resize(chunks_.size() * static_cast<size_t>(config_.model->config().n_vocab));
    return config_.model->forward(out->data(), chunks_, cache_, par);
  }

 private:
  const EvalConfig& config_;
  std::span<const int32_t> window_;
  int first_target_;
  int step_;
  ContiguousKvCache cache_;
  std::vector<SequenceChunk> chunks_;
};

// The scores of every target: negative log-likelihoods, and against a base configuration the
// KL divergences and top-1 agreements.
struct Tally {
  double nll = 0, nll_base = 0;
  int64_t tokens = 0, agree = 0;
  std::vector<double> klds;

  // One target's logit rows [V] (base: null without a comparison).
  void add(const float* logits, const float* base, int32_t target, size_t V) {
    const RowStats s = row_stats(logits, V);
    nll += s.log_sum_exp - logits[target];
    ++tokens;
    if (base == nullptr) return;
    const RowStats sb = row_stats(base, V);
    nll_base += sb.log_sum_exp - base[target];
    agree += s.argmax == sb.argmax;
    double kld = 0;
    for (size_t v = 0; v < V; ++v) {
      const double lp_base = base[v] - sb.log_sum_exp;
      const double lp = logits[v] - s.log_sum_exp;
      kld += std::exp(lp_base) * (lp_base - lp);
    }
    klds.push_back(std::max(kld, 0.0));  // rounding can leave -1e-17 for equal rows
  }

  PerplexityResult result(bool compared) {
    PerplexityResult r;
    r.compared = compared;
    r.tokens = tokens;
    r.nll = nll / static_cast<double>(tokens);
    r.ppl = std::exp(r.nll);
    if (!compared) return r;
    r.nll_base = nll_base / static_cast<double>(tokens);
    r.ppl_base = std::exp(r.nll_base);
    r.top1_agree = static_cast<double>(agree) / static_cast<double>(tokens);
    double sum = 0;
    for (double k : klds) sum += k;
    r.kld_mean = sum / static_cast<double>(klds.size());
    std::sort(klds.begin(), klds.end());
    const size_t rank = static_cast<size_t>(std::ceil(0.99 * static_cast<double>(klds.size())));
    r.kld_p99 = klds[std::max<size_t>(rank, 1) - 1];
    return r;
  }
};

// The storage a configuration's cache uses, checked against the model.
Result<KvStorageOptions> pass_storage(const EvalConfig& config) {
  const ModelConfig& c = config.model->config();
  KvStorageOptions storage = config.kv;
  if (storage.dtype == KvDtype::fp8 && storage.fp8_k_scales.empty())
    storage.n_kv_head = c.n_kv_head;
  KVLM_RETURN_IF_ERROR(validate_kv_storage(storage, c.n_layer, c.kv_dim()));
  return storage;
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
  KVLM_ASSIGN_OR_RETURN(const KvStorageOptions storage, pass_storage(test));
  KvStorageOptions storage_base;
  if (base) {
    KVLM_ASSIGN_OR_RETURN(storage_base, pass_storage(*base));
  }
  Tally tally;
  std::vector<float> logits, logits_base;
  std::vector<int32_t> window;
  int windows_done = 0;
  size_t kv_bytes_peak = 0;
  for (const EvalWindow& w : windows) {
    window.assign(tokens.begin() + w.first, tokens.begin() + w.first + w.length);
    if (options.stride == 0 && !streaming && options.bos >= 0) window[0] = options.bos;
    WindowPass pass(test, storage, window, w.first_target);
    std::optional<WindowPass> pass_base;
    if (base) pass_base.emplace(*base, storage_base, window, w.first_target);
    for (int t_begin = w.first_target; t_begin < w.length; t_begin += pass.step()) {
      const int t_end = std::min(w.length, t_begin + pass.step());
      KVLM_RETURN_IF_ERROR(pass.logits(t_begin, t_end, &logits, par));
      if (base) KVLM_RETURN_IF_ERROR(pass_base->logits(t_begin, t_end, &logits_base, par));
      for (int t = t_begin; t < t_end; ++t) {
        const size_t row = static_cast<size_t>(t - t_begin) * V;
        tally.add(logits.data() + row, base ? logits_base.data() + row : nullptr, window[t], V);
      }
    }
    kv_bytes_peak = std::max(kv_bytes_peak, pass.kv_bytes());
    ++windows_done;
    if (options.progress) options.progress(windows_done, static_cast<int>(windows.size()));
  }
  PerplexityResult r = tally.result(base != nullptr);
  r.windows = windows_done;
  r.kv_bytes_peak = kv_bytes_peak;
  return r;
}

}  // namespace kvlm
