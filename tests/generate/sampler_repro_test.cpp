// Reproducibility (issue 6, item 2): a seed gives the same tokens every run, with any thread
// count and whatever other sequences share the batch, because sequence i of a request always
// draws from Rng(sequence_seed(seed, i)) and a sampler's result depends only on the logits,
// that sequence's tokens and that generator. A toy "model" (logits a fixed function of the
// sequence so far) stands in for the transformer.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "generate/rng.h"
#include "generate/sampler.h"

namespace kvlm {
namespace {

constexpr size_t kVocab = 4096;
constexpr int kSteps = 48;

void toy_logits(std::vector<float>& out, const std::vector<TokenId>& prompt,
                const std::vector<TokenId>& generated) {
  const TokenId last = generated.empty() ? prompt.back() : generated.back();
  const double phase = 0.013 * (last + 1) + 0.37 * static_cast<double>(generated.size());
  out.resize(kVocab);
  for (size_t i = 0; i < kVocab; ++i)
    out[i] = static_cast<float>(3.0 * std::sin(phase * static_cast<double>(i % 97) + 0.5 * i));
}

SamplingParams params() {
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_k = 200;
  p.top_p = 0.95f;
  p.min_p = 0.02f;
  p.repetition_penalty = 1.1f;
  p.frequency_penalty = 0.2f;
  p.seed = 777;
  return p;
}

struct Sequence {
  size_t index;  // position in the request: picks the generator
  std::vector<TokenId> prompt;
  std::vector<TokenId> generated;
  Rng rng;
  Sequence(size_t i, const SamplingParams& p)
      : index(i), prompt{static_cast<TokenId>(i % 3)}, rng(sequence_seed(p.seed, i)) {}
};

void step(Sequence& s, SamplerChain& chain, std::vector<float>& logits) {
  toy_logits(logits, s.prompt, s.generated);
  auto t = chain.sample(logits, {s.prompt, s.generated}, s.rng);
  ASSERT_TRUE(t.is_ok()) << t.message();
  s.generated.push_back(*t);
}

// Each sequence alone, one after the other.
std::vector<std::vector<TokenId>> run_alone(const std::vector<size_t>& indices) {
  std::vector<std::vector<TokenId>> out;
  for (size_t i : indices) {
    auto chain = SamplerChain::from_params(params());
    Sequence s(i, params());
    std::vector<float> logits;
    for (int k = 0; k < kSteps; ++k) step(s, *chain, logits);
    out.push_back(s.generated);
  }
  return out;
}

// All sequences in one batch, one step each in turn, sharing one chain.
std::vector<std::vector<TokenId>> run_batched(const std::vector<size_t>& indices) {
  auto chain = SamplerChain::from_params(params());
  std::vector<Sequence> batch;
  for (size_t i : indices) batch.emplace_back(i, params());
  std::vector<float> logits;
  for (int k = 0; k < kSteps; ++k) {
    for (Sequence& s : batch) step(s, *chain, logits);
  }
  std::vector<std::vector<TokenId>> out;
  for (const Sequence& s : batch) out.push_back(s.generated);
  return out;
}

// The batch split across threads, one chain per thread.
std::vector<std::vector<TokenId>> run_threaded(const std::vector<size_t>& indices,
                                               size_t n_threads) {
  std::vector<Sequence> batch;
  for (size_t i : indices) batch.emplace_back(i, params());
  std::vector<std::thread> threads;
  for (size_t t = 0; t < n_threads; ++t) {
    threads.emplace_back([&, t] {
      auto chain = SamplerChain::from_params(params());
      std::vector<float> logits;
      for (int k = 0; k < kSteps; ++k) {
        for (size_t j = t; j < batch.size(); j += n_threads) step(batch[j], *chain, logits);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  std::vector<std::vector<TokenId>> out;
  for (const Sequence& s : batch) out.push_back(s.generated);
  return out;
}

TEST(Reproducibility, SameSeedSameTokensAcrossRunsThreadsAndBatches) {
  const std::vector<size_t> all = {0, 1, 2, 3, 4, 5};
  const auto reference = run_alone(all);
  EXPECT_EQ(run_alone(all), reference);  // a second run
  EXPECT_EQ(run_batched(all), reference);
  EXPECT_EQ(run_threaded(all, 2), reference);
  EXPECT_EQ(run_threaded(all, 3), reference);

  // Batch composition: sequence 4 with different neighbours, or alone, is unchanged.
  const auto pair = run_batched({4, 1});
  EXPECT_EQ(pair[0], reference[4]);
  EXPECT_EQ(pair[1], reference[1]);
  EXPECT_EQ(run_batched({4})[0], reference[4]);
}

TEST(Reproducibility, SequencesAndSeedsDrawDifferentTokens) {
  const auto reference = run_alone({0, 3});
  // Sequences 0 and 3 share a prompt, so only their generators differ.
  EXPECT_NE(reference[0], reference[1]);
}

}  // namespace
}  // namespace kvlm
