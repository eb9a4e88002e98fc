// Helpers for the engine tests: small GPT-2 and Llama models written as real files, request
// specs, and a driver that submits each request at its arrival step and records, per request,
// every logits row it sampled from and every token it got.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kvlm/engine.h"
#include "support/test_support.h"

namespace kvlm::test {

// Tiny models with a 96-position context, loaded back through the real loaders.
std::shared_ptr<LoadedModel> engine_gpt2(const TempDir& dir);
std::shared_ptr<LoadedModel> engine_llama(const TempDir& dir);  // llama2.c model.bin, GQA

// Ids in, greedy, `max_new` tokens exactly (the model's end ids do not stop it).
Request greedy_request(std::vector<int32_t> prompt, int max_new);

struct Spec {
  Request request;
  int arrival_step = 0;
};

struct Trace {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;  // [step][n_vocab]
  FinishReason finish = FinishReason::kNone;
};

struct RunResult {
  std::vector<Trace> traces;  // by spec index
  EngineStats stats;
};

// Submits spec i at step specs[i].arrival_step (in index order within a step) and steps until
// every request finishes (bounded: fails the test past 20,000 steps).
RunResult run_schedule(std::shared_ptr<LoadedModel> model, const std::vector<Spec>& specs,
                       EngineOptions options);
// Each spec run alone on a fresh engine (one running sequence, room for its whole run).
std::vector<Trace> run_each_alone(std::shared_ptr<LoadedModel> model,
                                  const std::vector<Spec>& specs);

// Bitwise: same tokens, same finish, every logits row memcmp-equal. Returns "" or what differs.
std::string compare_traces(const Trace& got, const Trace& want);

}  // namespace kvlm::test
