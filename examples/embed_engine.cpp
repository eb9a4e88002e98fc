// The smallest program that embeds kvlm: it sees only include/kvlm (the build gives it no other
// include folder), loads a model, streams one greedy completion through the engine and prints
// each new token id as it arrives.
//   kvlm_embed_example MODEL_PATH MAX_NEW ID [ID...]
// Prompt ids keep it independent of any tokenizer; docs/engine.md shows the same loop with text.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kvlm/engine.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s MODEL_PATH MAX_NEW ID [ID...]\n", argv[0]);
    return 1;
  }
  auto model = kvlm::LoadedModel::load(kvlm::ModelSource{argv[1], "", ""});
  if (!model.is_ok()) {
    std::fprintf(stderr, "%s\n", model.message().c_str());
    return 1;
  }
  auto engine = kvlm::Engine::create(model.value(), kvlm::EngineOptions{});
  if (!engine.is_ok()) {
    std::fprintf(stderr, "%s\n", engine.message().c_str());
    return 1;
  }
  kvlm::Request request;
  request.max_new_tokens = std::atoi(argv[2]);
  request.sampling.temperature = 0;  // greedy: the same ids on every run
  for (int i = 3; i < argc; ++i) request.prompt_ids.push_back(std::atoi(argv[i]));
  auto id = engine.value()->submit(request);
  if (!id.is_ok()) {
    std::fprintf(stderr, "%s\n", id.message().c_str());
    return 1;
  }
  while (engine.value()->has_unfinished()) {
    for (const kvlm::Event& event : engine.value()->step()) {
      if (event.token >= 0) std::printf("%d ", event.token);
      if (event.finish != kvlm::FinishReason::kNone)
        std::printf("[%s]\n", kvlm::finish_reason_name(event.finish));
    }
  }
  return 0;
}
