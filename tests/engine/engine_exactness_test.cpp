// The engine's promise: a request's tokens and logits are bitwise the same whether it runs
// alone or among others, whatever step it arrives at, however its prompt is split into prefill
// chunks, with or without a prefix hit, after being preempted and recomputed, and at any thread
// count. Every case compares each request with its solo run on a fresh engine.
#include <gtest/gtest.h>

#include <ostream>
#include <random>

#include "support/engine_runs.h"

namespace kvlm {
namespace {

using test::Spec;

enum class Arch { kGpt2, kLlama };
void PrintTo(Arch arch, std::ostream* os) {
  *os << (arch == Arch::kGpt2 ? "Gpt2" : "Llama");
}

std::shared_ptr<LoadedModel> make_model(Arch arch, const test::TempDir& dir) {
  return arch == Arch::kGpt2 ? test::engine_gpt2(dir) : test::engine_llama(dir);
}

std::vector<int32_t> random_tokens(std::mt19937& rng, int n, int n_vocab) {
  std::uniform_int_distribution<int32_t> id(0, n_vocab - 1);
  std::vector<int32_t> tokens(n);
  for (int32_t& t : tokens) t = id(rng);
  return tokens;
}

// Requests of random lengths and arrival steps; a third share a 21-token prefix (more than
// one block of every size tried), half sample with their own seed, half are greedy.
std::vector<Spec> random_specs(uint32_t seed, int n, int n_vocab, int max_arrival) {
  std::mt19937 rng(seed);
  const std::vector<int32_t> shared = random_tokens(rng, 21, n_vocab);
  std::vector<Spec> specs(n);
  for (int i = 0; i < n; ++i) {
    Request& r = specs[i].request;
    r.prompt_ids = random_tokens(rng, 1 + rng() % 30, n_vocab);
    if (i % 3 == 0) r.prompt_ids.insert(r.prompt_ids.begin(), shared.begin(), shared.end());
    r.max_new_tokens = 1 + rng() % 18;
    r.ignore_eos = true;
    if (i % 2 == 0) {
      r.sampling.temperature = 0.9f;
      r.sampling.top_k = 12;
      r.sampling.seed = rng();
    } else {
      r.sampling.temperature = 0.0f;
    }
    specs[i].arrival_step = static_cast<int>(rng() % (max_arrival + 1));
  }
  return specs;
}

void expect_same_as_alone(const std::vector<test::Trace>& got,
                          const std::vector<test::Trace>& alone, const std::string& what) {
  ASSERT_EQ(got.size(), alone.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(test::compare_traces(got[i], alone[i]), "") << what << ", request " << i;
    EXPECT_FALSE(alone[i].logits.empty()) << what << ", request " << i;
  }
}

class EngineExactnessTest : public ::testing::TestWithParam<Arch> {};

TEST_P(EngineExactnessTest, AllArrivingTogetherMatchAlone) {
  test::TempDir dir;
  auto model = make_model(GetParam(), dir);
  ASSERT_TRUE(model);
  auto specs = random_specs(1, 8, model->n_vocab(), 0);
  const auto alone = test::run_each_alone(model, specs);
  EngineOptions options;
  options.max_running = 8;
  options.threads = 2;
  auto together = test::run_schedule(model, specs, options);
  expect_same_as_alone(together.traces, alone, "together");
}

// The randomized schedule of issue 10: random arrivals, chunk budgets, block sizes, thread
// counts and a cache small enough that sequences are preempted and recomputed.
TEST_P(EngineExactnessTest, RandomArrivalsBudgetsAndPreemptionMatchAlone) {
  test::TempDir dir;
  auto model = make_model(GetParam(), dir);
  ASSERT_TRUE(model);
  int64_t preemptions = 0, prefix_hits = 0, chunked = 0;
  const int budgets[] = {3, 8, 17, 64};
  const int blocks[] = {1, 4, 5, 16};
  for (uint32_t trial = 0; trial < 4; ++trial) {
    auto specs = random_specs(100 + trial, 12, model->n_vocab(), 12);
    const auto alone = test::run_each_alone(model, specs);
    EngineOptions options;
    options.block_size = blocks[trial];
    options.max_batch_tokens = budgets[trial];
    options.max_running = 2 + 2 * static_cast<int>(trial);
    options.threads = 1 + static_cast<int>(trial % 3);
    int longest = 0;
    for (const Spec& s : specs)
      longest = std::max<int>(longest, s.request.prompt_ids.size() + s.request.max_new_tokens);
    options.kv_tokens = longest + 2 * options.block_size;  // one long request and a bit more
    auto run = test::run_schedule(model, specs, options);
    expect_same_as_alone(run.traces, alone, "trial " + std::to_string(trial));
    preemptions += run.stats.preemptions;
    prefix_hits += run.stats.prefix_hits;
    chunked += options.max_batch_tokens < longest;
    EXPECT_EQ(run.stats.kv_usage, 0.0) << "every block given back";
  }
  // The schedules must really have exercised what they claim to.
  EXPECT_GT(preemptions, 0);
  EXPECT_GT(prefix_hits, 0);
  EXPECT_GT(chunked, 0);
}

TEST_P(EngineExactnessTest, UncachedBaselineMatchesCached) {
  test::TempDir dir;
  auto model = make_model(GetParam(), dir);
  ASSERT_TRUE(model);
  auto specs = random_specs(7, 4, model->n_vocab(), 0);
  EngineOptions cached;
  cached.max_running = 4;
  EngineOptions uncached = cached;
  uncached.recompute_every_step = true;
  auto a = test::run_schedule(model, specs, cached);
  auto b = test::run_schedule(model, specs, uncached);
  expect_same_as_alone(b.traces, a.traces, "uncached");
  EXPECT_GT(b.stats.rows_computed, a.stats.rows_computed);
}

// A prompt whose prefix an earlier request left in the cache: a hit, and the same bits.
TEST_P(EngineExactnessTest, PrefixLeftByFinishedRequestIsReused) {
  test::TempDir dir;
  auto model = make_model(GetParam(), dir);
  ASSERT_TRUE(model);
  std::mt19937 rng(3);
  const auto shared = random_tokens(rng, 40, model->n_vocab());
  std::vector<Spec> specs(2);
  for (Spec& s : specs) {
    s.request.prompt_ids = shared;
    s.request.max_new_tokens = 5;
    s.request.sampling.temperature = 0.0f;
    s.request.ignore_eos = true;
  }
  specs[1].request.prompt_ids.push_back(5);
  specs[1].arrival_step = 10;  // after the first has finished
  EngineOptions options;
  options.block_size = 8;
  auto run = test::run_schedule(model, specs, options);
  EXPECT_EQ(run.stats.prefix_hits, 40);  // five full blocks
  expect_same_as_alone(run.traces, test::run_each_alone(model, specs), "prefix hit");
}

INSTANTIATE_TEST_SUITE_P(Engine, EngineExactnessTest, ::testing::Values(Arch::kGpt2, Arch::kLlama),
                         [](const ::testing::TestParamInfo<Arch>& info) {
                           return info.param == Arch::kGpt2 ? "Gpt2" : "Llama";
                         });

}  // namespace
}  // namespace kvlm
