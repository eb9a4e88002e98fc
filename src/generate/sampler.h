// Samplers: turn the last position's logits into the next token. As in llama.cpp's
// llama-sampling, every sampler has one small interface (apply to a candidate set) and a chain
// of samplers is itself a sampler. SamplerChain::from_params builds the documented chain
// (docs/sampling.md):
//
//   repetition penalty -> presence/frequency penalties -> greedy             (temperature 0)
//                                                      -> temperature -> top-k -> top-p
//                                                         -> min-p -> draw  (otherwise)
//
// (Top-k and temperature commute, so the built chain runs top-k first and scales k logits.)
// A sampler is a pure function of (candidates, the sequence's tokens, the RNG): the history is
// passed in rather than accumulated through accept() calls, so one chain can serve any
// sequence and a sequence's tokens cannot depend on what the chain sampled before. Randomness
// comes only from the Rng passed in (one per sequence, see rng.h). Every ordering uses the
// total order (logit descending, id ascending), so ties and results never depend on the
// standard library's sort algorithms.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "generate/rng.h"
#include "kvlm/sampling.h"
#include "kvlm/status.h"

namespace kvlm {

struct TokenCandidate {
  TokenId id;
  float logit;  // after the samplers applied so far
  float p;      // scratch: unnormalized probability, meaningful only inside one sampler
};

// The candidate set each sampler hands to the next. A chain reuses one, so sampling does not
// allocate once its buffers have grown to n_vocab.
struct Candidates {
  std::vector<TokenCandidate> items;  // [n_candidates]; starts as [n_vocab] in id order
  bool sorted = false;                // items ordered by (logit desc, id asc)
  int64_t selected = -1;              // index into items of the chosen token; -1 = none yet

  // Resets to all n_vocab tokens in id order with the given logits (no checks).
  void assign(std::span<const float> logits);
};

// The tokens already in the sequence. The repetition penalty looks at both spans; presence and
// frequency penalties look at `generated` only (the OpenAI API's meaning).
struct TokenHistory {
  std::span<const TokenId> prompt;
  std::span<const TokenId> generated;
};

class Sampler {
 public:
  virtual ~Sampler() = default;
  virtual std::string_view name() const = 0;
  // Rescales, removes or selects candidates. Never empties the set. Token ids in `history`
  // must be >= 0 (SamplerChain::sample checks them against n_vocab).
  virtual void apply(Candidates& cur, const TokenHistory& history, Rng& rng) = 0;
};

// The building blocks, each a no-op at its "off" value.
std::unique_ptr<Sampler> make_repetition_penalty_sampler(float penalty);
std::unique_ptr<Sampler> make_presence_frequency_sampler(float presence, float frequency);
std::unique_ptr<Sampler> make_greedy_sampler();
std::unique_ptr<Sampler> make_temperature_sampler(float temperature);  // temperature > 0
std::unique_ptr<Sampler> make_top_k_sampler(int32_t k);
std::unique_ptr<Sampler> make_top_p_sampler(float p);
std::unique_ptr<Sampler> make_min_p_sampler(float min_p);
std::unique_ptr<Sampler> make_dist_sampler();  // draws one token; consumes one rng.uniform01()

class SamplerChain final : public Sampler {
 public:
  SamplerChain() = default;
  // The documented chain for these params (validated first: errors name the flag). Samplers
  // at their "off" value are left out.
  static Result<SamplerChain> from_params(const SamplingParams& params);

  void add(std::unique_ptr<Sampler> sampler) { samplers_.push_back(std::move(sampler)); }
  size_t size() const { return samplers_.size(); }
  const Sampler& at(size_t i) const { return *samplers_[i]; }

  std::string_view name() const override { return "chain"; }
  void apply(Candidates& cur, const TokenHistory& history, Rng& rng) override;

  // The next token: checks the logits (n_vocab = logits.size() > 0, no NaN or +inf, not all
  // -inf) and the history's ids, applies the chain to scratch candidates, returns the
  // selected id. Errors if the chain selects nothing (it lacks a greedy or dist sampler).
  // Not thread-safe (scratch buffers): use one chain per thread.
  Result<TokenId> sample(std::span<const float> logits, const TokenHistory& history, Rng& rng);
  // The candidates the last sample() left behind (for inspection and tests).
  const Candidates& last_candidates() const { return scratch_; }

 private:
  std::vector<std::unique_ptr<Sampler>> samplers_;
  Candidates scratch_;
};

// Checks that the logits can be sampled from; the errors name the offending index.
Status check_logits(std::span<const float> logits);
// The normalized distribution the candidates define, indexed by token id: out[id] = 0 for
// tokens no longer among the candidates. Computed in double. [n_vocab]
std::vector<double> candidate_probabilities(const Candidates& cur, size_t n_vocab);

}  // namespace kvlm
