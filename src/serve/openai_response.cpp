#include "serve/openai_response.h"

#include <algorithm>

namespace kvlm::serve {

namespace {

Json usage_json(const Usage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens},
          {"completion_tokens", usage.completion_tokens},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
}

Json finish_json(FinishReason finish) {
  const char* name = openai_finish_reason(finish);
  return name ? Json(name) : Json(nullptr);
}

// Completions' legacy shape: parallel arrays, top_logprobs as {token text: logprob} objects.
Json completion_logprobs(const std::vector<LogprobInfo>& infos, size_t first_offset,
                         const TokenText& token_text) {
  Json tokens = Json::array(), token_logprobs = Json::array(), top = Json::array(),
       offsets = Json::array();
  size_t offset = first_offset;
  for (const LogprobInfo& info : infos) {
    const std::string text = token_text(info.chosen.id);
    tokens.push_back(text);
    token_logprobs.push_back(info.chosen.logprob);
    Json alternatives = Json::object();
    for (size_t i = 0; i < info.top.size(); ++i) {  // as many as asked for
      alternatives[token_text(info.top[i].id)] = info.top[i].logprob;
    }
    top.push_back(std::move(alternatives));
    offsets.push_back(offset);
    offset += text.size();
  }
  return {{"tokens", tokens},
          {"token_logprobs", token_logprobs},
          {"top_logprobs", top},
          {"text_offset", offsets}};
}

Json chat_token(int32_t id, float logprob, const TokenText& token_text) {
  const std::string text = token_text(id);
  Json bytes = Json::array();
  for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
  return {{"token", text}, {"logprob", logprob}, {"bytes", bytes}};
}

// Chat's shape: {"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}.
Json chat_logprobs(const std::vector<LogprobInfo>& infos, const TokenText& token_text) {
  Json content = Json::array();
  for (const LogprobInfo& info : infos) {
    Json entry = chat_token(info.chosen.id, info.chosen.logprob, token_text);
    Json top = Json::array();
    for (size_t i = 0; i < info.top.size(); ++i) {  // as many as asked for
      top.push_back(chat_token(info.top[i].id, info.top[i].logprob, token_text));
    }
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  return {{"content", content}, {"refusal", nullptr}};
}

}  // namespace

const char* openai_finish_reason(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength:
      return "length";
    case FinishReason::kEos:
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kCancelled:
      return "abort";
    case FinishReason::kError:
      return "error";
    case FinishReason::kNone:
      break;
  }
  return nullptr;
}

Json completion_body(const ResponseMeta& meta, const std::vector<ChoiceOutput>& choices,
                     const Usage& usage, int top_n, const TokenText& token_text) {
  Json list = Json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceOutput& c = choices[i];
    list.push_back(
        {{"index", i},
         {"text", c.text},
         {"logprobs",
          top_n < 0 ? Json(nullptr) : completion_logprobs(c.logprobs, c.echo_bytes, token_text)},
         {"finish_reason", finish_json(c.finish)}});
  }
  return {{"id", meta.id},
          {"object", "text_completion"},
          {"created", meta.created},
          {"model", meta.model},
          {"choices", list},
          {"usage", usage_json(usage)},
          {"system_fingerprint", nullptr}};
}

Json chat_body(const ResponseMeta& meta, const std::vector<ChoiceOutput>& choices,
               const Usage& usage, int top_n, const TokenText& token_text) {
  Json list = Json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceOutput& c = choices[i];
    list.push_back({{"index", i},
                    {"message", {{"role", "assistant"}, {"content", c.text}, {"refusal", nullptr}}},
                    {"logprobs", top_n < 0 ? Json(nullptr) : chat_logprobs(c.logprobs, token_text)},
                    {"finish_reason", finish_json(c.finish)}});
  }
  return {{"id", meta.id},
          {"object", "chat.completion"},
          {"created", meta.created},
          {"model", meta.model},
          {"choices", list},
          {"usage", usage_json(usage)},
          {"system_fingerprint", nullptr}};
}

Json completion_chunk(const ResponseMeta& meta, int index, const std::string& text,
                      const LogprobInfo* logprob, int top_n, size_t text_offset,
                      FinishReason finish, const TokenText& token_text) {
  Json logprobs = nullptr;
  if (logprob != nullptr && top_n >= 0) {
    logprobs = completion_logprobs({*logprob}, text_offset, token_text);
  }
  Json choice = {{"index", index},
                 {"text", text},
                 {"logprobs", logprobs},
                 {"finish_reason", finish_json(finish)}};
  return {
      {"id", meta.id},       {"object", "text_completion"},      {"created", meta.created},
      {"model", meta.model}, {"choices", Json::array({choice})}, {"system_fingerprint", nullptr}};
}

Json chat_chunk(const ResponseMeta& meta, int index, const std::string& role,
                const std::string& content, const LogprobInfo* logprob, int top_n,
                FinishReason finish, const TokenText& token_text) {
  Json delta = Json::object();
  if (!role.empty()) delta["role"] = role;
  if (!content.empty() || !role.empty()) delta["content"] = content;
  Json logprobs = nullptr;
  if (logprob != nullptr && top_n >= 0) logprobs = chat_logprobs({*logprob}, token_text);
  Json choice = {{"index", index},
                 {"delta", delta},
                 {"logprobs", logprobs},
                 {"finish_reason", finish_json(finish)}};
  return {
      {"id", meta.id},       {"object", "chat.completion.chunk"}, {"created", meta.created},
      {"model", meta.model}, {"choices", Json::array({choice})},  {"system_fingerprint", nullptr}};
}

Json usage_chunk(const ResponseMeta& meta, bool chat, const Usage& usage) {
  return {{"id", meta.id},
          {"object", chat ? "chat.completion.chunk" : "text_completion"},
          {"created", meta.created},
          {"model", meta.model},
          {"choices", Json::array()},
          {"usage", usage_json(usage)}};
}

}  // namespace kvlm::serve
