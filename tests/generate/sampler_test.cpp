// Samplers, exact behaviour: pinned probabilities (the llama.cpp test values), which tokens each
// filter keeps, the numbers the penalties produce, greedy ties, error messages.
#include "generate/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace kvlm {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> log_of(std::vector<float> p) {
  for (float& x : p) x = std::log(x);
  return p;
}

// Applies one sampler to fresh candidates for `logits` and returns the candidates.
Candidates run(Sampler& s, const std::vector<float>& logits, const TokenHistory& history = {}) {
  Candidates cur;
  cur.assign(logits);
  Rng rng(0);
  s.apply(cur, history, rng);
  return cur;
}

std::vector<TokenId> ids_of(const Candidates& cur) {
  std::vector<TokenId> ids;
  for (const TokenCandidate& c : cur.items) ids.push_back(c.id);
  return ids;
}

std::vector<TokenId> sorted_ids(const Candidates& cur) {
  std::vector<TokenId> ids = ids_of(cur);
  std::sort(ids.begin(), ids.end());
  return ids;
}

void expect_probs(const Candidates& cur, const std::vector<double>& expected) {
  const std::vector<double> p = candidate_probabilities(cur, expected.size());
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(p[i], expected[i], 1e-5) << "id " << i;
}

const std::vector<float> kQuarter = log_of({0.1f, 0.2f, 0.3f, 0.4f});

TEST(TopK, PinnedProbabilities) {
  // llama.cpp's test-sampling: top-k 3 over {0.1, 0.2, 0.3, 0.4} -> {0.44444, 0.33333, 0.22222}.
  auto s = make_top_k_sampler(3);
  const Candidates cur = run(*s, kQuarter);
  EXPECT_EQ(ids_of(cur), (std::vector<TokenId>{3, 2, 1}));
  EXPECT_TRUE(cur.sorted);
  expect_probs(cur, {0.0, 0.22222, 0.33333, 0.44444});
}

TEST(TopK, OffAndLargerThanVocabKeepEverything) {
  auto zero = make_top_k_sampler(0);
  expect_probs(run(*zero, kQuarter), {0.1, 0.2, 0.3, 0.4});
  auto big = make_top_k_sampler(10);
  expect_probs(run(*big, kQuarter), {0.1, 0.2, 0.3, 0.4});
  auto one = make_top_k_sampler(1);
  EXPECT_EQ(ids_of(run(*one, kQuarter)), std::vector<TokenId>{3});
}

TEST(TopK, TiesBreakTowardTheLowerId) {
  auto s = make_top_k_sampler(2);
  EXPECT_EQ(ids_of(run(*s, {1.0f, 5.0f, 1.0f, 5.0f, 5.0f})), (std::vector<TokenId>{1, 3}));
}

TEST(TopK, MatchesAFullSortForSmallAndLargeK) {
  // Small k takes the heap path, large k the nth_element path; both must equal a full sort
  // under (logit desc, id asc). Coarse logits make ties common.
  Rng rng(21);
  std::vector<float> logits(50257);
  for (float& l : logits) l = static_cast<float>(std::floor(rng.uniform01() * 300.0));
  std::vector<TokenId> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](TokenId a, TokenId b) { return logits[a] > logits[b]; });
  for (int32_t k : {1, 2, 40, 1000, 3140, 3141, 30000, 50256}) {
    auto s = make_top_k_sampler(k);
    const Candidates cur = run(*s, logits);
    ASSERT_EQ(cur.items.size(), static_cast<size_t>(k));
    EXPECT_TRUE(cur.sorted);
    for (int32_t r = 0; r < k; ++r) ASSERT_EQ(cur.items[r].id, order[r]) << "k " << k;
  }
}

TEST(TopP, KeepsTheSmallestSetReachingP) {
  auto p07 = make_top_p_sampler(0.7f);  // 0.4 + 0.3 reaches 0.7 exactly
  const Candidates a = run(*p07, kQuarter);
  EXPECT_EQ(ids_of(a), (std::vector<TokenId>{3, 2}));
  expect_probs(a, {0.0, 0.0, 3.0 / 7.0, 4.0 / 7.0});

  // Exactly p where the float p lies above the decimal: 0.8f is 0.800000012, and 0.5 + 0.3 as
  // the sampler sums them (from logs) is within rounding of 0.8; the tolerance at p keeps it
  // a two-token nucleus. (0.7f above rounds down, so it never exercised the tolerance.)
  const std::vector<float> k532 = log_of({0.5f, 0.3f, 0.2f});
  auto p08 = make_top_p_sampler(0.8f);
  const Candidates b = run(*p08, k532);
  EXPECT_EQ(ids_of(b), (std::vector<TokenId>{0, 1}));
  expect_probs(b, {0.625, 0.375, 0.0});
  auto p081 = make_top_p_sampler(0.81f);  // and just above it, all three
  EXPECT_EQ(ids_of(run(*p081, k532)), (std::vector<TokenId>{0, 1, 2}));

  auto p071 = make_top_p_sampler(0.71f);  // 0.7 falls short: a third token is needed
  EXPECT_EQ(ids_of(run(*p071, kQuarter)), (std::vector<TokenId>{3, 2, 1}));
  auto p03 = make_top_p_sampler(0.3f);  // the top token alone reaches 0.3
  EXPECT_EQ(ids_of(run(*p03, kQuarter)), std::vector<TokenId>{3});
  auto tiny = make_top_p_sampler(1e-6f);  // at least one token is always kept
  EXPECT_EQ(ids_of(run(*tiny, kQuarter)), std::vector<TokenId>{3});
  auto off = make_top_p_sampler(1.0f);
  EXPECT_EQ(run(*off, kQuarter).items.size(), 4u);
}

TEST(TopP, MatchesAFullSortOnALargeVocabulary) {
  // 50257 random logits exercise the grow-the-sorted-prefix path past several rounds.
  Rng rng(5);
  std::vector<float> logits(50257);
  for (float& l : logits) l = static_cast<float>(rng.uniform01() * 12.0 - 6.0);
  std::vector<double> p(logits.size());
  double total = 0;
  for (size_t i = 0; i < p.size(); ++i) total += p[i] = std::exp(logits[i]);
  std::vector<TokenId> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](TokenId a, TokenId b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  for (float top_p : {0.01f, 0.3f, 0.5f, 0.9f, 0.99f}) {
    auto s = make_top_p_sampler(top_p);
    const Candidates cur = run(*s, logits);
    // The kept tokens are the most likely ones, in order, and the smallest such set: its mass
    // reaches p and without its last token it does not.
    ASSERT_LE(cur.items.size(), order.size());
    double mass = 0;
    for (size_t i = 0; i < cur.items.size(); ++i) {
      ASSERT_EQ(cur.items[i].id, order[i]) << "top_p " << top_p << " rank " << i;
      mass += p[order[i]] / total;
    }
    EXPECT_GE(mass, top_p - 1e-6) << top_p;
    EXPECT_LT(mass - p[order[cur.items.size() - 1]] / total, top_p) << top_p;
    if (top_p >= 0.3f) {
      EXPECT_GT(cur.items.size(), 256u) << "should take several rounds";
    }
  }
}

TEST(MinP, DropsTokensBelowMinPTimesTheMax) {
  // max p = 0.4; min-p 0.5 cuts at 0.2: 0.1 goes, 0.2 (on the cut) stays.
  auto half = make_min_p_sampler(0.5f);
  const Candidates a = run(*half, kQuarter);
  EXPECT_EQ(sorted_ids(a), (std::vector<TokenId>{1, 2, 3}));
  expect_probs(a, {0.0, 2.0 / 9.0, 3.0 / 9.0, 4.0 / 9.0});
  auto s074 = make_min_p_sampler(0.74f);  // cut 0.296: 0.3 stays
  EXPECT_EQ(sorted_ids(run(*s074, kQuarter)), (std::vector<TokenId>{2, 3}));
  auto s076 = make_min_p_sampler(0.76f);  // cut 0.304: 0.3 goes
  EXPECT_EQ(sorted_ids(run(*s076, kQuarter)), std::vector<TokenId>{3});
  auto off = make_min_p_sampler(0.0f);
  EXPECT_EQ(run(*off, kQuarter).items.size(), 4u);
}

TEST(MinP, PropertyOnRandomLogits) {
  Rng rng(11);
  std::vector<float> logits(1000);
  for (float& l : logits) l = static_cast<float>(rng.uniform01() * 8.0);
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  auto s = make_min_p_sampler(0.2f);
  const Candidates cur = run(*s, logits);
  std::vector<bool> kept(logits.size(), false);
  for (const TokenCandidate& c : cur.items) kept[c.id] = true;
  for (size_t i = 0; i < logits.size(); ++i) {
    const double ratio = std::exp(static_cast<double>(logits[i]) - max_logit);
    if (std::abs(ratio - 0.2) < 1e-5) continue;  // too close to the cut to call
    EXPECT_EQ(kept[i], ratio >= 0.2) << "id " << i << " ratio " << ratio;
  }
  // Stable: the survivors keep id order.
  EXPECT_TRUE(std::is_sorted(cur.items.begin(), cur.items.end(),
                             [](const auto& a, const auto& b) { return a.id < b.id; }));
}

TEST(Temperature, RaisesProbabilitiesToThePowerOneOverT) {
  auto s = make_temperature_sampler(0.5f);  // p^2, renormalized: {1, 4, 9, 16} / 30
  expect_probs(run(*s, kQuarter), {1 / 30.0, 4 / 30.0, 9 / 30.0, 16 / 30.0});
  auto hot = make_temperature_sampler(2.0f);  // sqrt(p), renormalized
  const double z = std::sqrt(0.1) + std::sqrt(0.2) + std::sqrt(0.3) + std::sqrt(0.4);
  expect_probs(run(*hot, kQuarter),
               {std::sqrt(0.1) / z, std::sqrt(0.2) / z, std::sqrt(0.3) / z, std::sqrt(0.4) / z});
}

TEST(Temperature, TinyTemperatureDoesNotOverflow) {
  auto s = make_temperature_sampler(1e-30f);
  const Candidates cur = run(*s, {1.0f, 3.0f, 2.0f});
  for (const TokenCandidate& c : cur.items) EXPECT_FALSE(std::isnan(c.logit));
  expect_probs(cur, {0.0, 1.0, 0.0});
}

TEST(Greedy, ArgmaxWithTiesToTheLowestId) {
  auto s = make_greedy_sampler();
  const Candidates a = run(*s, {1.0f, 3.0f, 3.0f, 2.0f});
  EXPECT_EQ(a.items[a.selected].id, 1);
  const Candidates b = run(*s, {-kInf, -5.0f, -kInf});
  EXPECT_EQ(b.items[b.selected].id, 1);
}

TEST(Greedy, TemperatureZeroAndTopK1EqualGreedy) {
  SamplingParams greedy_params;
  greedy_params.temperature = 0.0f;
  SamplingParams top1_params;
  top1_params.top_k = 1;
  top1_params.temperature = 1.7f;
  auto greedy = SamplerChain::from_params(greedy_params);
  auto top1 = SamplerChain::from_params(top1_params);
  ASSERT_TRUE(greedy.is_ok() && top1.is_ok());
  Rng data_rng(3), rng_a(1), rng_b(2);
  std::vector<float> logits(777);
  for (int trial = 0; trial < 200; ++trial) {
    // Coarse values make ties common, so the tie rule is exercised too.
    for (float& l : logits) l = static_cast<float>(std::floor(data_rng.uniform01() * 40.0));
    const TokenId expected = static_cast<TokenId>(std::max_element(logits.begin(), logits.end()) -
                                                  logits.begin());  // first max
    auto a = greedy->sample(logits, {}, rng_a);
    auto b = top1->sample(logits, {}, rng_b);
    ASSERT_TRUE(a.is_ok() && b.is_ok());
    EXPECT_EQ(*a, expected);
    EXPECT_EQ(*b, expected);
  }
}

TEST(RepetitionPenalty, DividesPositiveMultipliesNegativeOncePerDistinctToken) {
  auto s = make_repetition_penalty_sampler(2.0f);
  const std::vector<TokenId> prompt = {0, 1, 0};
  const std::vector<TokenId> generated = {0, 4};
  const Candidates cur = run(*s, {2.0f, -2.0f, 1.0f, 0.5f, 0.0f}, {prompt, generated});
  const float expected[] = {1.0f, -4.0f, 1.0f, 0.5f, 0.0f};
  for (const TokenCandidate& c : cur.items) EXPECT_EQ(c.logit, expected[c.id]) << "id " << c.id;
  // A penalty below 1 rewards repetition instead.
  auto reward = make_repetition_penalty_sampler(0.5f);
  const Candidates r = run(*reward, {2.0f, -2.0f, 1.0f}, {prompt, {}});
  EXPECT_EQ(r.items[0].logit, 4.0f);
  EXPECT_EQ(r.items[1].logit, -1.0f);
  EXPECT_EQ(r.items[2].logit, 1.0f);
}

TEST(PresenceFrequencyPenalty, CountsGeneratedTokensOnly) {
  auto s = make_presence_frequency_sampler(0.5f, 0.25f);
  const std::vector<TokenId> prompt = {0, 0, 3};
  const std::vector<TokenId> generated = {2, 2, 1, 2};
  const std::vector<float> logits = {1.0f, 1.0f, 1.0f, 1.0f};
  const Candidates cur = run(*s, logits, {prompt, generated});
  EXPECT_EQ(cur.items[0].logit, 1.0f);                 // in the prompt only: untouched
  EXPECT_EQ(cur.items[1].logit, 1.0f - 0.25f - 0.5f);  // once
  EXPECT_EQ(cur.items[2].logit, 1.0f - 3 * 0.25f - 0.5f);
  EXPECT_EQ(cur.items[3].logit, 1.0f);
}

TEST(Penalties, ScratchIsClearedBetweenCalls) {
  // A second call with another history must not see the first call's tokens.
  auto rep = make_repetition_penalty_sampler(2.0f);
  auto freq = make_presence_frequency_sampler(1.0f, 1.0f);
  const std::vector<TokenId> first = {0, 1};
  const std::vector<TokenId> second = {2};
  Candidates cur;
  Rng rng(0);
  cur.assign(std::vector<float>{4.0f, 4.0f, 4.0f});
  rep->apply(cur, {first, first}, rng);
  freq->apply(cur, {first, first}, rng);
  cur.assign(std::vector<float>{4.0f, 4.0f, 4.0f});
  rep->apply(cur, {second, second}, rng);
  freq->apply(cur, {second, second}, rng);
  EXPECT_EQ(cur.items[0].logit, 4.0f);
  EXPECT_EQ(cur.items[1].logit, 4.0f);
  EXPECT_EQ(cur.items[2].logit, 4.0f / 2.0f - 1.0f - 1.0f);
}

TEST(Penalties, SameResultOnAReorderedCandidateSet) {
  // Penalties normally see the id-ordered set and go straight to each history token; on any
  // other order (a custom chain) they scan the candidates instead. Both must agree.
  Rng rng(8);
  std::vector<float> logits(1000);
  for (float& l : logits) l = static_cast<float>(rng.uniform01() * 10.0 - 5.0);
  std::vector<TokenId> prompt, generated;
  for (int i = 0; i < 300; ++i) prompt.push_back(static_cast<TokenId>(rng.next_u64() % 1000));
  for (int i = 0; i < 300; ++i) generated.push_back(static_cast<TokenId>(rng.next_u64() % 50));
  for (auto make : {+[] { return make_repetition_penalty_sampler(1.7f); },
                    +[] { return make_presence_frequency_sampler(0.4f, 0.3f); }}) {
    auto s = make();
    const Candidates direct = run(*s, logits, {prompt, generated});
    Candidates reversed;
    reversed.assign(logits);
    std::reverse(reversed.items.begin(), reversed.items.end());
    Rng unused(0);
    s->apply(reversed, {prompt, generated}, unused);
    for (const TokenCandidate& c : reversed.items) {
      ASSERT_EQ(c.logit, direct.items[c.id].logit) << s->name() << " id " << c.id;
    }
  }
}

TEST(Penalties, NeverUnmaskAToken) {
  // A masked logit (-inf) stays -inf under every penalty, even one whose product with the
  // token's count overflows (4 * -3e38 = -inf, and -inf - -inf would be NaN).
  const std::vector<TokenId> repeated = {0, 0, 0, 0};
  const std::vector<float> logits = {-kInf, 1.0f};
  auto freq = make_presence_frequency_sampler(-3e38f, -3e38f);
  const Candidates f = run(*freq, logits, {{}, repeated});
  EXPECT_EQ(f.items[0].logit, -kInf);
  auto rep = make_repetition_penalty_sampler(1e-30f);
  const Candidates r = run(*rep, logits, {repeated, repeated});
  EXPECT_EQ(r.items[0].logit, -kInf);
}

TEST(Penalties, ChainAppliesThemBeforeGreedy) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.repetition_penalty = 2.0f;
  auto chain = SamplerChain::from_params(p);
  ASSERT_TRUE(chain.is_ok());
  Rng rng(0);
  const std::vector<float> logits = {3.0f, 2.0f, 1.0f};
  EXPECT_EQ(*chain->sample(logits, {}, rng), 0);
  const std::vector<TokenId> seen = {0};
  EXPECT_EQ(*chain->sample(logits, {seen, {}}, rng), 1);  // 3 / 2 = 1.5 < 2
}

TEST(Dist, NeverPicksAnImpossibleToken) {
  auto chain = SamplerChain::from_params(SamplingParams{});
  ASSERT_TRUE(chain.is_ok());
  Rng rng(9);
  const std::vector<float> logits = {-kInf, 0.0f, -kInf, 0.0f, -kInf};
  for (int i = 0; i < 10000; ++i) {
    auto t = chain->sample(logits, {}, rng);
    ASSERT_TRUE(t.is_ok());
    EXPECT_TRUE(*t == 1 || *t == 3) << *t;
  }
}

TEST(Chain, SameSeedSameTokens) {
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_k = 50;
  p.top_p = 0.95f;
  p.min_p = 0.01f;
  p.repetition_penalty = 1.1f;
  auto run_once = [&](uint64_t seed) {
    auto chain = SamplerChain::from_params(p);
    EXPECT_TRUE(chain.is_ok());
    Rng rng(seed);
    std::vector<TokenId> out;
    std::vector<float> logits(2000);
    for (int step = 0; step < 300; ++step) {
      for (size_t i = 0; i < logits.size(); ++i)
        logits[i] = static_cast<float>(std::sin(0.37 * i + step)) * 4.0f;
      out.push_back(*chain->sample(logits, {{}, out}, rng));
    }
    return out;
  };
  EXPECT_EQ(run_once(123), run_once(123));
  EXPECT_NE(run_once(123), run_once(124));
}

TEST(Chain, RejectsBadLogitsAndHistory) {
  auto chain = SamplerChain::from_params(SamplingParams{});
  ASSERT_TRUE(chain.is_ok());
  Rng rng(0);
  auto nan = chain->sample(std::vector<float>{0.0f, std::nanf(""), 1.0f}, {}, rng);
  ASSERT_FALSE(nan.is_ok());
  EXPECT_EQ(nan.message(), "logits[1] is NaN");
  auto inf = chain->sample(std::vector<float>{kInf}, {}, rng);
  ASSERT_FALSE(inf.is_ok());
  EXPECT_EQ(inf.message(), "logits[0] is +inf");
  auto empty = chain->sample(std::vector<float>{}, {}, rng);
  ASSERT_FALSE(empty.is_ok());
  EXPECT_NE(empty.message().find("n_vocab > 0"), std::string::npos);
  auto all_masked = chain->sample(std::vector<float>{-kInf, -kInf}, {}, rng);
  ASSERT_FALSE(all_masked.is_ok());
  EXPECT_NE(all_masked.message().find("-inf"), std::string::npos);
  const std::vector<TokenId> bad = {0, 3};
  auto hist = chain->sample(std::vector<float>{0.0f, 1.0f, 2.0f}, {{}, bad}, rng);
  ASSERT_FALSE(hist.is_ok());
  EXPECT_EQ(hist.message(), "token history: generated[1] = 3 is outside the vocabulary [0, 3)");
}

TEST(Chain, WithoutASelectorIsAnError) {
  SamplerChain chain;
  chain.add(make_top_k_sampler(2));
  Rng rng(0);
  auto t = chain.sample(kQuarter, {}, rng);
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.message().find("greedy or dist"), std::string::npos);
}

TEST(Chain, IsItselfASampler) {
  // A chain nested in a chain behaves like its samplers inlined.
  auto inner = std::make_unique<SamplerChain>();
  inner->add(make_top_k_sampler(3));
  inner->add(make_top_p_sampler(0.5f));
  SamplerChain outer;
  outer.add(std::move(inner));
  const Candidates cur = run(outer, kQuarter);
  EXPECT_EQ(ids_of(cur), (std::vector<TokenId>{3, 2}));  // 4/9 < 0.5 <= 7/9
}

}  // namespace
}  // namespace kvlm
