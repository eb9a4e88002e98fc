// Parsing and validation of OpenAI request bodies (POST /v1/completions and
// /v1/chat/completions) into one GenerationParams. Pure functions: no model, no server; every
// error is a 400 in OpenAI's shape naming the field, what was expected and what was found.
// Checks that need the tokenized prompt (token ids in the vocabulary, prompt + max_tokens
// within the context) are check_prompt(), run after tokenizing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvlm/sampling.h"
#include "serve/api_error.h"
#include "serve/chat_template.h"

namespace kvlm::serve {

// One prompt of a completions request: text to encode, or token ids used as they are.
struct PromptInput {
  bool is_text = true;
  std::string text;
  std::vector<int32_t> ids;
};

struct GenerationParams {
  std::string model;                  // "" when the request named none
  std::vector<PromptInput> prompts;   // completions: one or more prompts
  std::vector<ChatMessage> messages;  // chat: the conversation
  std::optional<int> max_tokens;  // absent: 16 for completions, the rest of the context for chat
  SamplingParams sampling;
  bool seed_given = false;  // without a seed each request draws its own
  std::vector<std::string> stop;
  // Log-probabilities: -1 none, else the number of alternatives (0..20) with each token.
  int logprobs = -1;
  int n = 1;  // choices per prompt
  bool echo = false;
  bool ignore_eos = false;  // vLLM's extension: the model's end ids do not stop it
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
};

inline constexpr int kMaxLogprobs = 20;
inline constexpr int kMaxChoices = 16;
inline constexpr int kMaxStops = 4;

ApiResult<GenerationParams> parse_completion_request(const std::string& body);
ApiResult<GenerationParams> parse_chat_request(const std::string& body);

// A tokenized prompt against the model: non-empty, ids in [0, n_vocab), and prompt + max_tokens
// within n_ctx (the message names both numbers, as OpenAI's context_length_exceeded does).
// `param` names the field the prompt came from ("prompt", "prompt[2]", "messages").
// `windowed` (kvlm serve --kv-window): positions are renumbered within the window, so the
// context does not bound the request; the engine checks it against the cache's memory instead.
std::optional<ApiError> check_prompt(const std::vector<int32_t>& ids, int max_tokens, int n_ctx,
                                     int n_vocab, const std::string& param, bool windowed = false);

}  // namespace kvlm::serve
