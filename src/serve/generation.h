// The two generating endpoints, POST /v1/completions and /v1/chat/completions: parse and
// validate the body, tokenize the prompts (chat: render the messages first), submit one engine
// request per prompt and choice, then answer whole or as a Server-Sent Events stream. A client
// that leaves mid-stream has its requests cancelled.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kvlm/engine.h"
#include "serve/chat_template.h"
#include "serve/engine_loop.h"
#include "serve/http_server.h"

namespace kvlm::serve {

// What the handlers share, set once the model is loaded.
struct GenerationContext {
  std::shared_ptr<LoadedModel> model;
  EngineLoop* loop = nullptr;
  std::string model_name;
  int kv_window = 0;  // the engine's sinks + sliding window (0: off): requests may pass n_ctx
  ChatTemplate chat_template;
  std::vector<int32_t> chat_stop_ids;           // the template's end of turn, when it is one token
  std::vector<std::string> chat_stop_text;      // ... or as text, when it is not
  std::function<void(const std::string&)> log;  // one line per finished request
  std::atomic<uint64_t>* next_id = nullptr;     // response ids
};

HttpResponse handle_generation(const GenerationContext& ctx, const HttpRequest& request, bool chat);

// The HTTP response for an API error (status, OpenAI-shaped body, Retry-After when set).
HttpResponse error_response(const ApiError& error);

}  // namespace kvlm::serve
