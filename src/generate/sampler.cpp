#include "generate/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace kvlm {

namespace {

// The one total order used everywhere: higher logit first, lower id on ties.
bool before(const TokenCandidate& a, const TokenCandidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

float max_logit(const Candidates& cur) {
  if (cur.sorted) return cur.items.front().logit;
  float m = -std::numeric_limits<float>::infinity();
  for (const TokenCandidate& c : cur.items) m = std::max(m, c.logit);
  return m;
}

// A penalty can push a finite logit past float's range (a repetition penalty of 1e-38 divides
// by it): such a logit becomes the largest finite float of its sign, so later steps (the shift
// by the max, exp) never see inf - inf = NaN. A logit that was -inf (masked) stays -inf: no
// penalty unmasks a token, and -inf minus a frequency penalty that overflowed to -inf would be
// NaN. Both found by the sampler fuzz target.
float keep_finite(float before, float after) {
  if (!std::isfinite(before)) return before;
  if (std::isinf(after))
    return std::copysign(std::numeric_limits<float>::max(), after);
  return after;
}

// Fills c.p = exp(logit - max) and returns their sum (in double, in item order).
double fill_unnormalized(Candidates& cur) {
  const float m = max_logit(cur);
  double total = 0.0;
  for (TokenCandidate& c : cur.items) {
    c.p = std::exp(c.logit - m);
    total += c.p;
  }
  return total;
}

// Probabilities computed from float logits carry relative errors near 1e-7, as does a float
// top-p or min-p. Treating values within this relative tolerance as equal makes a set whose
// probability is exactly p on paper (top-p 0.7 over {0.4, 0.3, ...}) count as reaching p.
constexpr double kProbTolerance = 1e-6;

// True when every token in `tokens` sits at its own index in cur.items (ids are unique, so
// items[t].id == t finds it): then a penalty can go straight to it. Holds for the id-ordered
// set a chain starts from.
bool in_id_order(const Candidates& cur, std::span<const TokenId> tokens) {
  for (TokenId t : tokens) {
    if (static_cast<size_t>(t) >= cur.items.size() || cur.items[t].id != t) return false;
  }
  return true;
}

class RepetitionPenalty final : public Sampler {
 public:
  explicit RepetitionPenalty(float penalty) : penalty_(penalty) {}
  std::string_view name() const override { return "repetition-penalty"; }

  void apply(Candidates& cur, const TokenHistory& history, Rng&) override {
    if (penalty_ == 1.0f) return;
    // Hugging Face's RepetitionPenaltyLogitsProcessor: once per distinct token,
    // score < 0 ? score * penalty : score / penalty.
    auto penalize = [&](TokenCandidate& c) {
      c.logit = keep_finite(c.logit, c.logit < 0.0f ? c.logit * penalty_ : c.logit / penalty_);
    };
    if (in_id_order(cur, history.prompt) && in_id_order(cur, history.generated)) {
      // The usual case (first in the chain): visit only the history, O(history).
      for (auto tokens : {history.prompt, history.generated}) {
        for (TokenId t : tokens) {
          grow(t);
          if (!seen_[t]) penalize(cur.items[t]);
          seen_[t] = 1;
        }
      }
    } else {
      for (auto tokens : {history.prompt, history.generated}) {
        for (TokenId t : tokens) {
          grow(t);
          seen_[t] = 1;
        }
      }
      for (TokenCandidate& c : cur.items) {
        if (static_cast<size_t>(c.id) < seen_.size() && seen_[c.id]) penalize(c);
      }
    }
    for (TokenId t : history.prompt) seen_[t] = 0;
    for (TokenId t : history.generated) seen_[t] = 0;
    cur.sorted = false;
  }

 private:
  void grow(TokenId t) {
    if (static_cast<size_t>(t) >= seen_.size()) seen_.resize(static_cast<size_t>(t) + 1, 0);
  }

  float penalty_;
  std::vector<uint8_t> seen_;  // [max id + 1] scratch, all zero between calls
};

class PresenceFrequencyPenalty final : public Sampler {
 public:
  PresenceFrequencyPenalty(float presence, float frequency)
      : presence_(presence), frequency_(frequency) {}
  std::string_view name() const override { return "presence-frequency-penalty"; }

  void apply(Candidates& cur, const TokenHistory& history, Rng&) override {
    if (presence_ == 0.0f && frequency_ == 0.0f) return;
    for (TokenId t : history.generated) {
      if (static_cast<size_t>(t) >= counts_.size()) counts_.resize(static_cast<size_t>(t) + 1, 0);
      ++counts_[t];
    }
    // The OpenAI API's formula, evaluated in its order:
    // logit - count * frequency_penalty - (count > 0) * presence_penalty.
    auto penalize = [&](TokenCandidate& c) {
      c.logit = keep_finite(c.logit,
                            c.logit - static_cast<float>(counts_[c.id]) * frequency_ - presence_);
    };
    if (in_id_order(cur, history.generated)) {
      // O(history): each distinct token is penalized at its first occurrence.
      for (TokenId t : history.generated) {
        if (counts_[t] != 0) penalize(cur.items[t]);
        counts_[t] = 0;  // marks it done; the loop below re-zeroes the rest
      }
    } else {
      for (TokenCandidate& c : cur.items) {
        if (static_cast<size_t>(c.id) < counts_.size() && counts_[c.id] != 0) penalize(c);
      }
    }
    for (TokenId t : history.generated) counts_[t] = 0;
    cur.sorted = false;
  }

 private:
  float presence_;
  float frequency_;
  std::vector<uint32_t> counts_;  // [max id + 1] scratch, all zero between calls
};

class Greedy final : public Sampler {
 public:
  std::string_view name() const override { return "greedy"; }
  void apply(Candidates& cur, const TokenHistory&, Rng&) override {
    size_t best = 0;
    for (size_t i = 1; i < cur.items.size(); ++i) {
      if (before(cur.items[i], cur.items[best])) best = i;
    }
    cur.selected = static_cast<int64_t>(best);
  }
};

class Temperature final : public Sampler {
 public:
  explicit Temperature(float t) : t_(t) {}
  std::string_view name() const override { return "temperature"; }
  void apply(Candidates& cur, const TokenHistory&, Rng&) override {
    if (t_ == 1.0f) return;
    // Shift by the max before dividing: (l - max) / t <= 0 cannot overflow to +inf even for
    // a tiny temperature, and softmax does not change under a shift.
    const float m = max_logit(cur);
    for (TokenCandidate& c : cur.items) c.logit = (c.logit - m) / t_;
    cur.sorted = false;  // rounding may merge logits, and ties order by id
  }

 private:
  float t_;
};

class TopK final : public Sampler {
 public:
  explicit TopK(int32_t k) : k_(k) {}
  std::string_view name() const override { return "top-k"; }
  void apply(Candidates& cur, const TokenHistory&, Rng&) override {
    if (k_ <= 0 || static_cast<size_t>(k_) >= cur.items.size()) return;
    const size_t k = static_cast<size_t>(k_);
    if (cur.sorted) {
      cur.items.resize(k);
      return;
    }
    if (k <= cur.items.size() / 16) {
      select_with_heap(cur.items, k);
    } else {
      // A large k: O(n) selection, then sorting only the k survivors.
      std::nth_element(cur.items.begin(), cur.items.begin() + k_, cur.items.end(), before);
      std::sort(cur.items.begin(), cur.items.begin() + k_, before);
      cur.items.resize(k);
    }
    cur.sorted = true;
  }

 private:
  // A small k: one pass keeping the k best in a heap whose top is the worst of them. Most
  // tokens lose a single, well-predicted comparison with that top, which makes this several
  // times faster than nth_element over a 50257-token vocabulary.
  void select_with_heap(std::vector<TokenCandidate>& items, size_t k) {
    heap_.assign(items.begin(), items.begin() + k);
    std::make_heap(heap_.begin(), heap_.end(), before);
    for (size_t i = k; i < items.size(); ++i) {
      if (!before(items[i], heap_.front())) continue;
      std::pop_heap(heap_.begin(), heap_.end(), before);
      heap_.back() = items[i];
      std::push_heap(heap_.begin(), heap_.end(), before);
    }
    std::sort_heap(heap_.begin(), heap_.end(), before);  // best first
    std::copy(heap_.begin(), heap_.end(), items.begin());
    items.resize(k);
  }

  int32_t k_;
  std::vector<TokenCandidate> heap_;  // [k] scratch
};

class TopP final : public Sampler {
 public:
  explicit TopP(float p) : p_(p) {}
  std::string_view name() const override { return "top-p"; }
  void apply(Candidates& cur, const TokenHistory&, Rng&) override {
    if (p_ >= 1.0f || cur.items.size() <= 1) return;
    const double total = fill_unnormalized(cur);
    const double target = (static_cast<double>(p_) - kProbTolerance) * total;
    // Sort only as far as needed: the nucleus is usually far smaller than the vocabulary, so
    // sort a prefix of 64, then of 128, 256, ... until its mass reaches p.
    std::vector<TokenCandidate>& items = cur.items;
    size_t sorted_end = cur.sorted ? items.size() : 0;
    double cumulative = 0.0;
    for (size_t i = 0; i < items.size(); ++i) {
      if (i == sorted_end) {
        const size_t next = std::min(items.size(), std::max<size_t>(64, 2 * sorted_end));
        std::partial_sort(items.begin() + i, items.begin() + next, items.end(), before);
        sorted_end = next;
      }
      cumulative += items[i].p;
      if (cumulative >= target) {
        items.resize(i + 1);  // keeps at least one
        break;
      }
    }
    // Rounding can leave the whole set short of the target: then everything stays, all sorted.
    cur.sorted = true;
  }

 private:
  float p_;
};

class MinP final : public Sampler {
 public:
  explicit MinP(float min_p) : min_p_(min_p) {}
  std::string_view name() const override { return "min-p"; }
  void apply(Candidates& cur, const TokenHistory&, Rng&) override {
    if (min_p_ <= 0.0f) return;
    // p_i < min_p * p_max  <=>  logit_i - logit_max < log(min_p): no softmax needed.
    const double cutoff = static_cast<double>(max_logit(cur)) +
                          std::log(static_cast<double>(min_p_) * (1.0 - kProbTolerance));
    // remove_if is stable: a sorted set stays sorted, an id-ordered one stays id-ordered.
    auto end = std::remove_if(cur.items.begin(), cur.items.end(), [&](const TokenCandidate& c) {
      return static_cast<double>(c.logit) < cutoff;
    });
    cur.items.erase(end, cur.items.end());  // never empties: the max has ratio 1 > min_p
  }

 private:
  float min_p_;
};

class Dist final : public Sampler {
 public:
  std::string_view name() const override { return "dist"; }
  void apply(Candidates& cur, const TokenHistory&, Rng& rng) override {
    const double total = fill_unnormalized(cur);
    // Inverse CDF over the items in their current order; that order is deterministic (id
    // order, or the total order after top-k / top-p), so a seed picks the same token.
    const double u = rng.uniform01() * total;
    double cumulative = 0.0;
    size_t last_positive = 0;
    for (size_t i = 0; i < cur.items.size(); ++i) {
      if (cur.items[i].p <= 0.0f) continue;
      last_positive = i;
      cumulative += cur.items[i].p;
      if (u < cumulative) {
        cur.selected = static_cast<int64_t>(i);
        return;
      }
    }
    cur.selected = static_cast<int64_t>(last_positive);  // u rounded up to the total
  }
};

std::string vocab_range(size_t n_vocab) {
  return "[0, " + std::to_string(n_vocab) + ")";
}

Status check_history(std::span<const TokenId> tokens, const char* which, size_t n_vocab) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || static_cast<size_t>(tokens[i]) >= n_vocab) {
      return Status::error(std::string("token history: ") + which + "[" + std::to_string(i) +
                           "] = " + std::to_string(tokens[i]) + " is outside the vocabulary " +
                           vocab_range(n_vocab));
    }
  }
  return Status::ok();
}

}  // namespace

void Candidates::assign(std::span<const float> logits) {
  items.resize(logits.size());  // keeps its capacity: no allocation after the first call
  for (size_t i = 0; i < logits.size(); ++i) {
    items[i] = TokenCandidate{static_cast<TokenId>(i), logits[i], 0.0f};
  }
  sorted = false;
  selected = -1;
}

std::unique_ptr<Sampler> make_repetition_penalty_sampler(float penalty) {
  return std::make_unique<RepetitionPenalty>(penalty);
}
std::unique_ptr<Sampler> make_presence_frequency_sampler(float presence, float frequency) {
  return std::make_unique<PresenceFrequencyPenalty>(presence, frequency);
}
std::unique_ptr<Sampler> make_greedy_sampler() {
  return std::make_unique<Greedy>();
}
std::unique_ptr<Sampler> make_temperature_sampler(float temperature) {
  return std::make_unique<Temperature>(temperature);
}
std::unique_ptr<Sampler> make_top_k_sampler(int32_t k) {
  return std::make_unique<TopK>(k);
}
std::unique_ptr<Sampler> make_top_p_sampler(float p) {
  return std::make_unique<TopP>(p);
}
std::unique_ptr<Sampler> make_min_p_sampler(float min_p) {
  return std::make_unique<MinP>(min_p);
}
std::unique_ptr<Sampler> make_dist_sampler() {
  return std::make_unique<Dist>();
}

Result<SamplerChain> SamplerChain::from_params(const SamplingParams& params) {
  KVLM_RETURN_IF_ERROR(params.validate());
  SamplerChain chain;
  // Penalties act on the raw logits, before temperature (as Hugging Face and OpenAI do).
  if (params.repetition_penalty != 1.0f)
    chain.add(make_repetition_penalty_sampler(params.repetition_penalty));
  if (params.presence_penalty != 0.0f || params.frequency_penalty != 0.0f)
    chain.add(make_presence_frequency_sampler(params.presence_penalty, params.frequency_penalty));
  if (params.is_greedy()) {
    chain.add(make_greedy_sampler());
    return chain;
  }
  // Documented order: temperature, top-k, top-p, min-p. Top-k keeps the same tokens at any
  // temperature (scaling is monotonic), so it runs first: then only k logits get scaled.
  if (params.top_k > 0) chain.add(make_top_k_sampler(params.top_k));
  if (params.temperature != 1.0f) chain.add(make_temperature_sampler(params.temperature));
  if (params.top_p < 1.0f) chain.add(make_top_p_sampler(params.top_p));
  if (params.min_p > 0.0f) chain.add(make_min_p_sampler(params.min_p));
  chain.add(make_dist_sampler());
  return chain;
}

void SamplerChain::apply(Candidates& cur, const TokenHistory& history, Rng& rng) {
  for (const std::unique_ptr<Sampler>& s : samplers_) s->apply(cur, history, rng);
}

Result<TokenId> SamplerChain::sample(std::span<const float> logits, const TokenHistory& history,
                                     Rng& rng) {
  KVLM_RETURN_IF_ERROR(check_logits(logits));
  KVLM_RETURN_IF_ERROR(check_history(history.prompt, "prompt", logits.size()));
  KVLM_RETURN_IF_ERROR(check_history(history.generated, "generated", logits.size()));
  scratch_.assign(logits);
  apply(scratch_, history, rng);
  if (scratch_.selected < 0 || static_cast<size_t>(scratch_.selected) >= scratch_.items.size())
    return Status::error("sampler chain selected no token: it must end with greedy or dist");
  return scratch_.items[static_cast<size_t>(scratch_.selected)].id;
}

Status check_logits(std::span<const float> logits) {
  if (logits.empty()) return Status::error("logits: expected n_vocab > 0 values, found 0");
  bool any_finite = false;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float l = logits[i];
    if (std::isnan(l)) return Status::error("logits[" + std::to_string(i) + "] is NaN");
    if (l == std::numeric_limits<float>::infinity())
      return Status::error("logits[" + std::to_string(i) + "] is +inf");
    any_finite = any_finite || l != -std::numeric_limits<float>::infinity();
  }
  if (!any_finite)
    return Status::error("logits: all " + std::to_string(logits.size()) +
                         " values are -inf, nothing can be sampled");
  return Status::ok();
}

std::vector<double> candidate_probabilities(const Candidates& cur, size_t n_vocab) {
  std::vector<double> out(n_vocab, 0.0);
  if (cur.items.empty()) return out;
  double m = -std::numeric_limits<double>::infinity();
  for (const TokenCandidate& c : cur.items) m = std::max(m, static_cast<double>(c.logit));
  double total = 0.0;
  for (const TokenCandidate& c : cur.items) total += std::exp(static_cast<double>(c.logit) - m);
  for (const TokenCandidate& c : cur.items) {
    if (static_cast<size_t>(c.id) < n_vocab)
      out[c.id] = std::exp(static_cast<double>(c.logit) - m) / total;
  }
  return out;
}

}  // namespace kvlm
