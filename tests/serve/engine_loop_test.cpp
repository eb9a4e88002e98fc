// EngineLoop, the bridge between HTTP threads and the engine thread, without HTTP: events reach
// their request's queue and give the same tokens as run_to_completion, an API call's requests
// are admitted together or refused together (503 + Retry-After), stop() ends open requests with
// a final event and refuses new ones, and the metrics count what finished.
#include "serve/engine_loop.h"

#include <gtest/gtest.h>

#include <map>

#include "model/random_gpt2.h"
#include "support/test_support.h"

namespace kvlm::serve {
namespace {

std::shared_ptr<LoadedModel> tiny_model() {
  auto model = make_random_gpt2(test::tiny_gpt2_config(), RandomGpt2Options{});
  EXPECT_TRUE(model.is_ok());
  auto loaded = LoadedModel::from_parts(std::shared_ptr<Model>(std::move(model.value())), nullptr);
  EXPECT_TRUE(loaded.is_ok());
  return loaded.value();
}

std::unique_ptr<Engine> make_engine(const std::shared_ptr<LoadedModel>& model) {
  EngineOptions options;
  options.threads = 1;
  options.max_running = 4;
  auto engine = Engine::create(model, options);
  EXPECT_TRUE(engine.is_ok()) << engine.message();
  return std::move(engine.value());
}

Request request(std::vector<int32_t> prompt, int max_new, uint64_t seed) {
  Request r;
  r.prompt_ids = std::move(prompt);
  r.max_new_tokens = max_new;
  r.sampling.seed = seed;
  r.ignore_eos = true;
  return r;
}

// Every event of a submission until each request has had its final one (bounded wait).
std::map<RequestId, std::vector<Event>> drain(const Submission& sub) {
  std::map<RequestId, std::vector<Event>> out;
  size_t finished = 0;
  for (int i = 0; i < 600 && finished < sub.ids.size(); ++i) {
    for (Event& e : sub.events->wait_pop(std::chrono::milliseconds(100))) {
      if (e.finish != FinishReason::kNone) ++finished;
      out[e.id].push_back(std::move(e));
    }
  }
  EXPECT_EQ(finished, sub.ids.size()) << "requests did not finish in 60 s";
  return out;
}

std::vector<int32_t> tokens(const std::vector<Event>& events) {
  std::vector<int32_t> ids;
  for (const Event& e : events) {
    if (e.token >= 0) ids.push_back(e.token);
  }
  return ids;
}

TEST(EngineLoop, EventsReachTheirQueueWithTheEnginesTokens) {
  auto model = tiny_model();
  const std::vector<Request> requests = {request({1, 2, 3}, 12, 5), request({4, 5}, 7, 6)};
  auto reference_engine = make_engine(model);
  auto expected = run_to_completion(*reference_engine, requests);
  ASSERT_TRUE(expected.is_ok()) << expected.message();

  auto engine = make_engine(model);
  EngineLoop loop(*engine, 8);
  loop.start();
  ApiResult<Submission> sub = loop.submit(requests);
  ASSERT_TRUE(sub.is_ok()) << sub.error().message;
  ASSERT_EQ(sub.value().ids.size(), 2u);
  auto events = drain(sub.value());
  for (size_t i = 0; i < requests.size(); ++i) {
    const std::vector<Event>& mine = events[sub.value().ids[i]];
    EXPECT_EQ(tokens(mine), expected.value()[i].ids) << "request " << i;
    EXPECT_EQ(mine.back().finish, FinishReason::kLength);
  }
  const std::string metrics = loop.metrics_text();
  EXPECT_NE(metrics.find("kvlm:request_success_total{finished_reason=\"length\"} 2\n"),
            std::string::npos);
  EXPECT_NE(metrics.find("kvlm:time_to_first_token_seconds_count 2\n"), std::string::npos);
  EXPECT_NE(metrics.find("kvlm:inter_token_latency_seconds_count 17\n"), std::string::npos);
  EXPECT_NE(metrics.find("kvlm:generation_tokens_total 19\n"), std::string::npos);
}

TEST(EngineLoop, AllOrNothingAgainstTheLimit) {
  auto model = tiny_model();
  auto engine = make_engine(model);
  EngineLoop loop(*engine, 2);
  loop.start();
  // More than the limit itself can never run: 400, not "retry".
  ApiResult<Submission> three =
      loop.submit({request({1}, 4, 1), request({2}, 4, 1), request({3}, 4, 1)});
  ASSERT_FALSE(three.is_ok());
  EXPECT_EQ(three.error().status, 400);
  EXPECT_EQ(three.error().code, "too_many_sequences");
  // One long request running, two more would pass the limit: 503 + Retry-After.
  ApiResult<Submission> one = loop.submit({request({1}, 60, 1)});
  ASSERT_TRUE(one.is_ok());
  ApiResult<Submission> busy = loop.submit({request({1}, 4, 1), request({2}, 4, 1)});
  if (!busy.is_ok()) {
    EXPECT_EQ(busy.error().status, 503);
    EXPECT_EQ(busy.error().code, "queue_full");
    EXPECT_EQ(busy.error().retry_after, 1);
    EXPECT_NE(loop.metrics_text().find("kvlm:request_rejected_total 1\n"), std::string::npos);
  } else {  // the long request had already finished: these two ran; let them end too
    drain(busy.value());
  }
  drain(one.value());
  // Nothing of a refused call was submitted: two fit again.
  ApiResult<Submission> two = loop.submit({request({1}, 4, 1), request({2}, 4, 1)});
  ASSERT_TRUE(two.is_ok());
  drain(two.value());
  // An engine refusal (prompt + new tokens beyond the context) is a 400 with its reason.
  ApiResult<Submission> bad = loop.submit({request({1}, 4, 1), request({2}, 1000, 1)});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.error().status, 400);
  EXPECT_NE(bad.error().message.find("context"), std::string::npos) << bad.error().message;
}

TEST(EngineLoop, CancelAndStopEndRequestsWithAFinalEvent) {
  auto model = tiny_model();
  auto engine = make_engine(model);
  EngineLoop loop(*engine, 4);
  ApiResult<Submission> sub = loop.submit({request({1, 2}, 60, 1), request({3}, 60, 2)});
  ASSERT_TRUE(sub.is_ok());
  // Cancelled before the loop runs a step: the engine sees the submission and the cancellation
  // in one drain, so the first request ends cancelled whatever the machine's load (started
  // first, a tiny model could finish all 60 tokens before the cancellation arrived).
  loop.cancel(sub.value().ids[0]);
  loop.start();
  loop.stop();  // cancels the other, delivers both final events, ends the thread
  auto events = drain(sub.value());
  for (RequestId id : sub.value().ids) {
    ASSERT_FALSE(events[id].empty());
    const FinishReason last = events[id].back().finish;
    EXPECT_TRUE(last == FinishReason::kCancelled || last == FinishReason::kLength);
  }
  EXPECT_EQ(events[sub.value().ids[0]].back().finish, FinishReason::kCancelled);
  ApiResult<Submission> late = loop.submit({request({1}, 2, 1)});
  ASSERT_FALSE(late.is_ok());
  EXPECT_EQ(late.error().code, "shutting_down");
  EXPECT_EQ(loop.stats().running, 0);
}

}  // namespace
}  // namespace kvlm::serve
