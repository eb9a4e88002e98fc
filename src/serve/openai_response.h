// OpenAI response bodies, whole and streamed: text_completion and chat.completion objects,
// their chunks, and log-probabilities in each endpoint's shape. Pure functions of what the
// engine produced; the HTTP side only frames them (sse.h) and sends them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kvlm/engine.h"
#include "serve/json_text.h"

namespace kvlm::serve {

// "stop" (an end id or a stop string), "length", "abort" (cancelled, as vLLM names it),
// "error"; nullptr for kNone.
const char* openai_finish_reason(FinishReason reason);

// The bytes of a token, for log-probabilities ("" for an id the tokenizer lacks).
using TokenText = std::function<std::string(int32_t)>;

struct ResponseMeta {
  std::string id;       // cmpl-... / chatcmpl-...: one per response, shared by all its chunks
  int64_t created = 0;  // Unix seconds
  std::string model;
};

struct ChoiceOutput {
  std::string text;                   // the echoed prompt (completions with echo) then the new text
  size_t echo_bytes = 0;              // bytes of `text` that are the echoed prompt
  std::vector<LogprobInfo> logprobs;  // one per new token, when asked
  int completion_tokens = 0;
  FinishReason finish = FinishReason::kNone;
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};

// `top_n`: -1, no logprobs in the answer; 0..20, each token's logprob with the alternatives the
// engine reported (Request::logprobs = top_n gives exactly that many).
Json completion_body(const ResponseMeta& meta, const std::vector<ChoiceOutput>& choices,
                     const Usage& usage, int top_n, const TokenText& token_text);
Json chat_body(const ResponseMeta& meta, const std::vector<ChoiceOutput>& choices,
               const Usage& usage, int top_n, const TokenText& token_text);

// One streamed chunk. `logprob` may be null; `finish` kNone writes finish_reason null.
// `text_offset`: where this text starts in the choice's whole text (completions' logprobs).
Json completion_chunk(const ResponseMeta& meta, int index, const std::string& text,
                      const LogprobInfo* logprob, int top_n, size_t text_offset,
                      FinishReason finish, const TokenText& token_text);
// `role`: "assistant" on a stream's first chunk, "" afterwards.
Json chat_chunk(const ResponseMeta& meta, int index, const std::string& role,
                const std::string& content, const LogprobInfo* logprob, int top_n,
                FinishReason finish, const TokenText& token_text);
// The usage chunk of stream_options.include_usage: "choices": [] and the totals.
Json usage_chunk(const ResponseMeta& meta, bool chat, const Usage& usage);

}  // namespace kvlm::serve
