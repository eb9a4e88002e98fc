#include "support/engine_runs.h"

#include <gtest/gtest.h>

#include <cstring>

#include "model/llama_random.h"
#include "model/loader.h"
#include "model/random_gpt2.h"

namespace kvlm::test {

namespace {

std::shared_ptr<LoadedModel> load(const std::string& path) {
  auto model = load_model(path, {});
  EXPECT_TRUE(model.is_ok()) << model.message();
  if (!model) return nullptr;
  auto loaded = LoadedModel::from_parts(std::shared_ptr<Model>(std::move(model.value())), nullptr);
  EXPECT_TRUE(loaded.is_ok()) << loaded.message();
  return loaded ? loaded.value() : nullptr;
}

}  // namespace

Request greedy_request(std::vector<int32_t> prompt, int max_new) {
  Request r;
  r.prompt_ids = std::move(prompt);
  r.max_new_tokens = max_new;
  r.sampling.temperature = 0.0f;
  r.ignore_eos = true;
  return r;
}

std::shared_ptr<LoadedModel> engine_gpt2(const TempDir& dir) {
  ModelConfig c = tiny_gpt2_config();
  c.n_ctx = 96;
  RandomGpt2Options options;
  options.seed = 7;
  EXPECT_TRUE(write_random_gpt2(dir.path(), c, options).is_ok());
  return load(dir.path());
}

std::shared_ptr<LoadedModel> engine_llama(const TempDir& dir) {
  LlamaConfig lc = tiny_llama_config();
  lc.model.n_ctx = 96;
  EXPECT_TRUE(write_llama2c(dir.file("model.bin"), random_llama_weights(lc, 11)).is_ok());
  return load(dir.file("model.bin"));
}

RunResult run_schedule(std::shared_ptr<LoadedModel> model, const std::vector<Spec>& specs,
                       EngineOptions options) {
  RunResult out;
  out.traces.resize(specs.size());
  std::map<RequestId, size_t> index;
  options.on_logits = [&](RequestId id, int step, std::span<const float> logits) {
    Trace& t = out.traces[index.at(id)];
    EXPECT_EQ(static_cast<size_t>(step), t.logits.size()) << "request " << index.at(id);
    t.logits.emplace_back(logits.begin(), logits.end());
  };
  auto engine = Engine::create(model, options);
  EXPECT_TRUE(engine.is_ok()) << engine.message();
  if (!engine) return out;
  size_t finished = 0;
  for (int step = 0; finished < specs.size(); ++step) {
    if (step > 20000) {
      ADD_FAILURE() << "engine did not finish within 20000 steps";
      break;
    }
    for (size_t i = 0; i < specs.size(); ++i) {
      if (specs[i].arrival_step != step) continue;
      auto id = engine.value()->submit(specs[i].request);
      EXPECT_TRUE(id.is_ok()) << "spec " << i << ": " << id.message();
      if (!id) return out;
      index[id.value()] = i;
    }
    for (const Event& event : engine.value()->step()) {
      Trace& t = out.traces[index.at(event.id)];
      if (event.token >= 0) t.tokens.push_back(event.token);
      if (event.finish == FinishReason::kNone) continue;
      t.finish = event.finish;
      ++finished;
    }
  }
  EXPECT_FALSE(engine.value()->has_unfinished());
  out.stats = engine.value()->stats();
  return out;
}

std::vector<Trace> run_each_alone(std::shared_ptr<LoadedModel> model,
                                  const std::vector<Spec>& specs) {
  std::vector<Trace> traces;
  for (const Spec& spec : specs) {
    EngineOptions options;
    options.max_running = 1;
    options.threads = 1;
    Spec alone = spec;
    alone.arrival_step = 0;
    traces.push_back(run_schedule(model, {alone}, options).traces.at(0));
  }
  return traces;
}

std::string compare_traces(const Trace& got, const Trace& want) {
  if (got.tokens != want.tokens) return "tokens differ";
  if (got.finish != want.finish)
    return std::string("finish ") + finish_reason_name(got.finish) + " vs " +
           finish_reason_name(want.finish);
  if (got.logits.size() != want.logits.size())
    return "logits rows " + std::to_string(got.logits.size()) + " vs " +
           std::to_string(want.logits.size());
  for (size_t s = 0; s < got.logits.size(); ++s)
    if (got.logits[s].size() != want.logits[s].size() ||
        std::memcmp(got.logits[s].data(), want.logits[s].data(),
                    got.logits[s].size() * sizeof(float)) != 0)
      return "logits of step " + std::to_string(s) + " differ";
  return "";
}

}  // namespace kvlm::test
