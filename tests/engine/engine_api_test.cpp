// The engine's API contract: what submit() refuses (with both numbers), cancellation freeing
// blocks, submissions from another thread while one thread steps, every end id of a config
// counting, and the finish reasons.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <thread>

#include "model/llama_random.h"
#include "model/loader.h"
#include "support/engine_runs.h"

namespace kvlm {
namespace {

TEST(EngineApiTest, SubmitRefusesWhatCanNeverRunNamingTheNumbers) {
  test::TempDir dir;
  auto model = test::engine_gpt2(dir);
  ASSERT_TRUE(model);
  EngineOptions options;
  options.kv_tokens = 48;
  options.block_size = 16;
  auto engine = Engine::create(model, options);
  ASSERT_TRUE(engine.is_ok()) << engine.message();
  struct Case {
    Request request;
    std::string message;
  };
  Request bad_temperature = test::greedy_request({1, 2}, 2);
  bad_temperature.sampling.temperature = -1.0f;
  Request too_many_logprobs = test::greedy_request({1, 2}, 2);
  too_many_logprobs.logprobs = 21;
  Request text_without_tokenizer;
  text_without_tokenizer.prompt_text = "hello";
  const Case cases[] = {
      {test::greedy_request({}, 2), "the prompt is empty"},
      {test::greedy_request({1, 64}, 2), "token id 64 is outside the vocabulary [0, 64)"},
      {test::greedy_request({1, 2, 3}, 95),
       "3 tokens + 95 new tokens need 97 positions, beyond the context "
       "length 96"},
      {test::greedy_request({1, 2, 3}, 47),
       "3 tokens + 47 new tokens need 49 positions, beyond the whole KV "
       "cache (48 positions"},
      {test::greedy_request({1, 2}, 0), "max_new_tokens must be at least 1, found 0"},
      {bad_temperature, "--temperature"},
      {too_many_logprobs, "logprobs must be between 0 and 20, found 21"},
      {text_without_tokenizer, "needs a tokenizer"},
  };
  for (const Case& c : cases) {
    auto id = engine.value()->submit(c.request);
    ASSERT_FALSE(id.is_ok()) << c.message;
    EXPECT_NE(id.message().find(c.message), std::string::npos) << id.message();
  }
  EXPECT_FALSE(engine.value()->has_unfinished());
  // Exactly the whole cache is fine.
  EXPECT_TRUE(engine.value()->submit(test::greedy_request({1, 2, 3}, 46)).is_ok());
}

TEST(EngineApiTest, CancelEndsTheRequestAndGivesItsBlocksBack) {
  test::TempDir dir;
  auto model = test::engine_llama(dir);
  ASSERT_TRUE(model);
  const std::vector<test::Spec> specs = {{test::greedy_request({1, 2, 3, 4, 5}, 30), 0},
                                         {test::greedy_request({6, 7, 8}, 30), 0}};
  const auto alone = test::run_each_alone(model, specs);
  EngineOptions options;
  options.block_size = 4;
  options.prefix_caching = false;  // so freed blocks are not counted as held cached prefixes
  auto engine = Engine::create(model, options);
  ASSERT_TRUE(engine.is_ok());
  auto a = engine.value()->submit(specs[0].request);
  auto b = engine.value()->submit(specs[1].request);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  std::vector<int32_t> b_tokens;
  bool a_cancelled = false, b_done = false;
  for (int step = 0; step < 200 && !(a_cancelled && b_done); ++step) {
    if (step == 5) engine.value()->cancel(a.value());
    for (const Event& e : engine.value()->step()) {
      if (e.id == a.value() && e.finish == FinishReason::kCancelled) a_cancelled = true;
      if (e.id == b.value() && e.token >= 0) b_tokens.push_back(e.token);
      if (e.id == b.value() && e.finish != FinishReason::kNone) b_done = true;
    }
    if (a_cancelled && !b_done) {
      EXPECT_LT(engine.value()->stats().kv_usage, 1.0);
    }
  }
  EXPECT_TRUE(a_cancelled);
  EXPECT_TRUE(b_done);
  EXPECT_EQ(b_tokens, alone[1].tokens);  // the other request did not notice
  EXPECT_EQ(engine.value()->stats().kv_usage, 0.0);
  EXPECT_FALSE(engine.value()->has_unfinished());
  engine.value()->cancel(a.value());  // finished ids are ignored
  EXPECT_TRUE(engine.value()->step().empty());
}

TEST(EngineApiTest, SubmissionsFromAnotherThreadWhileStepping) {
  test::TempDir dir;
  auto model = test::engine_gpt2(dir);
  ASSERT_TRUE(model);
  std::vector<test::Spec> specs;
  std::mt19937 rng(5);
  for (int i = 0; i < 8; ++i) {
    std::vector<int32_t> prompt(1 + rng() % 20);
    for (int32_t& t : prompt) t = rng() % 64;
    specs.push_back({test::greedy_request(prompt, 1 + rng() % 10), 0});
  }
  const auto alone = test::run_each_alone(model, specs);
  EngineOptions options;
  options.max_running = 3;
  options.max_batch_tokens = 9;
  auto engine = Engine::create(model, options);
  ASSERT_TRUE(engine.is_ok());
  std::vector<RequestId> ids(specs.size());
  std::atomic<int> submitted{0};
  std::thread client([&] {
    for (size_t i = 0; i < specs.size(); ++i) {
      ids[i] = engine.value()->submit(specs[i].request).value();
      submitted.store(static_cast<int>(i + 1));
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  // Events are filed by id: a request can produce tokens before its submit() call returns to
  // the client thread, so the loop must not need the client's ids. Bounded by time, not steps
  // (a starved client thread must not end the loop early).
  std::map<RequestId, std::vector<int32_t>> by_id;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    const bool all_in = submitted.load() == static_cast<int>(specs.size());
    if (all_in && !engine.value()->has_unfinished()) break;
    const std::vector<Event> events = engine.value()->step();
    if (events.empty()) std::this_thread::yield();
    for (const Event& e : events)
      if (e.token >= 0) by_id[e.id].push_back(e.token);
  }
  client.join();
  EXPECT_FALSE(engine.value()->has_unfinished()) << "not finished within 120 s";
  std::vector<std::vector<int32_t>> tokens(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) tokens[i] = by_id[ids[i]];
  for (size_t i = 0; i < specs.size(); ++i) EXPECT_EQ(tokens[i], alone[i].tokens) << i;
}

// A Llama 3 config lists several end ids; each one ends a sequence.
TEST(EngineApiTest, EveryEndIdOfTheConfigStopsGeneration) {
  test::TempDir dir;
  LlamaConfig lc = tiny_llama_config();
  HfWriteOptions hf;
  ASSERT_TRUE(write_llama_hf(dir.path(), random_llama_weights(lc, 3), hf).is_ok());
  auto run = [&](std::vector<int> eos, bool ignore_eos) {
    nlohmann::json config = nlohmann::json::parse(test::read_text(dir.file("config.json")));
    config["eos_token_id"] = eos;
    test::write_text(dir.file("config.json"), config.dump());
    auto model = load_model(dir.path(), {});
    EXPECT_TRUE(model.is_ok()) << model.message();
    auto loaded =
        LoadedModel::from_parts(std::shared_ptr<Model>(std::move(model.value())), nullptr);
    EXPECT_EQ(loaded.value()->end_ids(), std::vector<int32_t>(eos.begin(), eos.end()));
    Request r = test::greedy_request({1, 5, 9}, 12);
    r.ignore_eos = ignore_eos;
    auto engine = Engine::create(loaded.value(), {});
    std::vector<Request> one;
    one.push_back(r);
    return run_to_completion(*engine.value(), std::move(one)).value().at(0);
  };
  const Completion free_run = run({47}, true);
  ASSERT_EQ(free_run.ids.size(), 12u);
  const int32_t third = free_run.ids[2];
  // Pick a first id that greedy decoding never produces before the third token.
  int32_t other = 0;
  while (other == free_run.ids[0] || other == free_run.ids[1] || other == third) ++other;
  const Completion stopped = run({other, third}, false);
  EXPECT_EQ(stopped.finish, FinishReason::kEos);
  const size_t first_third =
      std::find(free_run.ids.begin(), free_run.ids.end(), third) - free_run.ids.begin();
  ASSERT_LE(first_third, 2u);
  EXPECT_EQ(stopped.ids,
            std::vector<int32_t>(free_run.ids.begin(), free_run.ids.begin() + first_third + 1));
  EXPECT_EQ(run({other, third}, true).finish, FinishReason::kLength);
}

TEST(EngineApiTest, StopIdsAndLengthFinishReasons) {
  test::TempDir dir;
  auto model = test::engine_gpt2(dir);
  ASSERT_TRUE(model);
  auto engine = Engine::create(model, {});
  std::vector<Request> requests = {test::greedy_request({3, 4}, 6),
                                   test::greedy_request({3, 4}, 6)};
  auto first = run_to_completion(*engine.value(), requests).value();
  EXPECT_EQ(first[0].finish, FinishReason::kLength);
  EXPECT_EQ(first[0].ids.size(), 6u);
  requests[1].stop_ids = {first[0].ids[3]};
  auto second = run_to_completion(*engine.value(), requests).value();
  EXPECT_EQ(second[1].finish, FinishReason::kEos);
  EXPECT_EQ(second[1].ids.back(), first[0].ids[3]);
  EXPECT_LE(second[1].ids.size(), 4u);
  EXPECT_EQ(second[0].ids, first[0].ids);  // the same request again: same tokens
}

// Request::logprobs: unset reports none; 0 the chosen token's log-probability only (OpenAI's
// logprobs: true with top_logprobs: 0); n also the n most likely tokens, best first. The values
// are those of the logits row sampled from (log-softmax in double, as token_logprobs computes).
TEST(EngineApiTest, LogprobsZeroReportsTheChosenTokenOnly) {
  test::TempDir dir;
  auto model = test::engine_gpt2(dir);
  ASSERT_TRUE(model);
  std::map<RequestId, std::vector<std::vector<float>>> rows;
  EngineOptions options;
  options.on_logits = [&](RequestId id, int, std::span<const float> row) {
    rows[id].emplace_back(row.begin(), row.end());
  };
  auto engine = Engine::create(model, options);
  ASSERT_TRUE(engine.is_ok()) << engine.message();
  std::map<RequestId, std::optional<int>> asked;
  for (std::optional<int> n :
       {std::optional<int>(), std::optional<int>(0), std::optional<int>(3)}) {
    Request r = test::greedy_request({3, 4, 5}, 4);
    r.logprobs = n;
    auto id = engine.value()->submit(r);
    ASSERT_TRUE(id.is_ok()) << id.message();
    asked[id.value()] = n;
  }
  std::map<RequestId, int> events;
  while (engine.value()->has_unfinished()) {
    for (const Event& e : engine.value()->step()) {
      const std::optional<int> n = asked.at(e.id);
      const int step = events[e.id]++;
      if (!n) {
        EXPECT_FALSE(e.logprobs) << "none asked";
        continue;
      }
      ASSERT_TRUE(e.logprobs) << "logprobs " << *n;
      EXPECT_EQ(e.logprobs->chosen.id, e.token);
      const auto& row = rows.at(e.id).at(step);
      double lse = 0, max = row[0];
      for (float v : row) max = std::max<double>(max, v);
      for (float v : row) lse += std::exp(static_cast<double>(v) - max);
      lse = max + std::log(lse);
      // token_logprobs sums exp in float (relative error ~1e-7 per term) into a double and
      // rounds the result to float: for logprobs of a few units, far inside 1e-5.
      EXPECT_NEAR(e.logprobs->chosen.logprob, row[e.token] - lse, 1e-5);
      ASSERT_EQ(e.logprobs->top.size(), static_cast<size_t>(*n));
      if (*n > 0) {
        EXPECT_EQ(e.logprobs->top[0].id, e.token);  // greedy: the best is chosen
      }
    }
  }
  for (const auto& [id, n] : events) EXPECT_EQ(n, 4) << "request " << id;
  Request bad = test::greedy_request({3}, 1);
  bad.logprobs = -1;
  EXPECT_EQ(engine.value()->submit(bad).message(), "logprobs must be between 0 and 20, found -1");
}

}  // namespace
}  // namespace kvlm
