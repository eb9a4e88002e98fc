// Field by field, in the order OpenAI documents them. Ranges are OpenAI's where it has one
// (temperature 0..2, penalties -2..2), kvlm's sampler's otherwise (top_k, min_p,
// repetition_penalty). Unknown fields are ignored, as OpenAI's clients send ones we do not use.
#include "serve/openai_request.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "serve/json_text.h"

namespace kvlm::serve {

namespace {

std::string short_number(double x) {
  if (std::isinf(x)) return "inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

ApiError wrong(const std::string& param, const std::string& expected, const Json& value) {
  return bad_request(param, param + ": expected " + expected + ", found " + describe(value));
}

// Reads an optional number field within [lo, hi] (open ends when lo_open / hi_open).
std::optional<ApiError> read_number(const Json& doc, const char* name, double lo, double hi,
                                    bool lo_open, bool hi_open, float* out) {
  if (!doc.contains(name) || doc[name].is_null()) return std::nullopt;
  const Json& v = doc[name];
  const std::string range = std::string(lo_open ? "(" : "[") + short_number(lo) + ", " +
                            short_number(hi) + (hi_open ? ")" : "]");
  if (!v.is_number()) return wrong(name, "a number in " + range, v);
  const double x = v.get<double>();
  const bool ok = (lo_open ? x > lo : x >= lo) && (hi_open ? x < hi : x <= hi) && std::isfinite(x);
  if (!ok) return wrong(name, "a number in " + range, v);
  *out = static_cast<float>(x);
  return std::nullopt;
}

std::optional<ApiError> read_int(const Json& doc, const char* name, int64_t lo, int64_t hi,
                                 std::optional<int64_t>* out) {
  if (!doc.contains(name) || doc[name].is_null()) return std::nullopt;
  const Json& v = doc[name];
  const std::string range =
      "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (!v.is_number_integer()) return wrong(name, range, v);
  // nlohmann reads every non-negative integer as unsigned.
  const bool out_of_range = v.is_number_unsigned()
                                ? (v.get<uint64_t>() > static_cast<uint64_t>(hi) ||
                                   (lo > 0 && v.get<uint64_t>() < static_cast<uint64_t>(lo)))
                                : (v.get<int64_t>() < lo || v.get<int64_t>() > hi);
  if (out_of_range) {
    return wrong(name, range, v);
  }
  *out = v.get<int64_t>();
  return std::nullopt;
}

std::optional<ApiError> read_bool(const Json& doc, const char* name, bool* out) {
  if (!doc.contains(name) || doc[name].is_null()) return std::nullopt;
  if (!doc[name].is_boolean()) return wrong(name, "true or false", doc[name]);
  *out = doc[name].get<bool>();
  return std::nullopt;
}

#define KVLM_API_CHECK(expr)                             \
  do {                                                   \
    if (std::optional<ApiError> e_ = (expr)) return *e_; \
  } while (0)

// The fields both endpoints share.
std::optional<ApiError> read_common(const Json& doc, GenerationParams* p) {
  if (doc.contains("model") && !doc["model"].is_null()) {
    if (!doc["model"].is_string()) return wrong("model", "a string", doc["model"]);
    p->model = doc["model"].get<std::string>();
  }
  SamplingParams& s = p->sampling;
  s.temperature = 1.0f;  // OpenAI's default
  KVLM_API_CHECK(read_number(doc, "temperature", 0, 2, false, false, &s.temperature));
  KVLM_API_CHECK(read_number(doc, "top_p", 0, 1, true, false, &s.top_p));
  KVLM_API_CHECK(read_number(doc, "min_p", 0, 1, false, true, &s.min_p));
  KVLM_API_CHECK(read_number(doc, "presence_penalty", -2, 2, false, false, &s.presence_penalty));
  KVLM_API_CHECK(read_number(doc, "frequency_penalty", -2, 2, false, false, &s.frequency_penalty));
  KVLM_API_CHECK(read_number(doc, "repetition_penalty", 0, std::numeric_limits<double>::infinity(),
                             true, true, &s.repetition_penalty));
  std::optional<int64_t> v;
  // -1 is vLLM's "off" for top_k; 0 is kvlm's.
  KVLM_API_CHECK(read_int(doc, "top_k", -1, std::numeric_limits<int32_t>::max(), &v));
  if (v) s.top_k = static_cast<int32_t>(std::max<int64_t>(*v, 0));
  v.reset();
  KVLM_API_CHECK(read_int(doc, "seed", std::numeric_limits<int64_t>::min(),
                          std::numeric_limits<int64_t>::max(), &v));
  if (v) {
    s.seed = static_cast<uint64_t>(*v);
    p->seed_given = true;
  }
  v.reset();
  KVLM_API_CHECK(read_int(doc, "n", 1, kMaxChoices, &v));
  if (v) p->n = static_cast<int>(*v);
  v.reset();
  KVLM_API_CHECK(read_int(doc, "max_tokens", 1, std::numeric_limits<int32_t>::max(), &v));
  if (v) p->max_tokens = static_cast<int>(*v);

  if (doc.contains("stop") && !doc["stop"].is_null()) {
    const Json& stop = doc["stop"];
    const std::string expected =
        "a non-empty string or an array of at most " + std::to_string(kMaxStops) + " of them";
    if (stop.is_string()) {
      if (stop.get<std::string>().empty()) return wrong("stop", expected, stop);
      p->stop.push_back(stop.get<std::string>());
    } else if (stop.is_array() && stop.size() <= static_cast<size_t>(kMaxStops)) {
      for (const Json& s1 : stop) {
        if (!s1.is_string() || s1.get<std::string>().empty()) return wrong("stop", expected, s1);
        p->stop.push_back(s1.get<std::string>());
      }
    } else {
      return wrong("stop", expected, stop);
    }
  }
  KVLM_API_CHECK(read_bool(doc, "stream", &p->stream));
  KVLM_API_CHECK(read_bool(doc, "ignore_eos", &p->ignore_eos));
  if (doc.contains("stream_options") && !doc["stream_options"].is_null()) {
    const Json& so = doc["stream_options"];
    if (!so.is_object()) return wrong("stream_options", "an object", so);
    if (so.contains("include_usage") && !so["include_usage"].is_null()) {
      if (!so["include_usage"].is_boolean()) {
        return wrong("stream_options.include_usage", "true or false", so["include_usage"]);
      }
      p->include_usage = so["include_usage"].get<bool>();
    }
  }
  return std::nullopt;
}

std::optional<ApiError> read_ids(const Json& array, const std::string& param,
                                 std::vector<int32_t>* ids) {
  for (const Json& id : array) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return wrong(param, "token ids (integers >= 0)", id);
    }
    ids->push_back(id.get<int32_t>());
  }
  return std::nullopt;
}

// prompt: "text" | [ids] | ["text", ...] | [[ids], ...]
std::optional<ApiError> read_prompt(const Json& doc, std::vector<PromptInput>* prompts) {
  const std::string expected =
      "a string, an array of token ids, or an array of strings or of token-id arrays";
  if (!doc.contains("prompt") || doc["prompt"].is_null()) {
    return bad_request("prompt", "prompt: required (" + expected + ")");
  }
  const Json& prompt = doc["prompt"];
  if (prompt.is_string()) {
    prompts->push_back({true, prompt.get<std::string>(), {}});
  } else if (prompt.is_array() && !prompt.empty() && prompt[0].is_number()) {
    PromptInput in{false, "", {}};
    KVLM_API_CHECK(read_ids(prompt, "prompt", &in.ids));
    prompts->push_back(std::move(in));
  } else if (prompt.is_array() && !prompt.empty()) {
    for (size_t i = 0; i < prompt.size(); ++i) {
      const std::string param = "prompt[" + std::to_string(i) + "]";
      if (prompt[i].is_string()) {
        prompts->push_back({true, prompt[i].get<std::string>(), {}});
      } else if (prompt[i].is_array()) {
        PromptInput in{false, "", {}};
        KVLM_API_CHECK(read_ids(prompt[i], param, &in.ids));
        prompts->push_back(std::move(in));
      } else {
        return wrong(param, "a string or an array of token ids", prompt[i]);
      }
    }
  } else {
    return wrong("prompt", expected, prompt);
  }
  for (size_t i = 0; i < prompts->size(); ++i) {
    const PromptInput& in = (*prompts)[i];
    if (in.is_text ? in.text.empty() : in.ids.empty()) {
      const std::string param = prompts->size() == 1 && prompt.is_string()
                                    ? "prompt"
                                    : "prompt[" + std::to_string(i) + "]";
      return bad_request(param, param + ": the prompt is empty", "empty_prompt");
    }
  }
  return std::nullopt;
}

// messages: [{"role": "system"|"developer"|"user"|"assistant", "content": "..." or
// [{"type": "text", "text": "..."}]}]
std::optional<ApiError> read_messages(const Json& doc, std::vector<ChatMessage>* messages) {
  if (!doc.contains("messages") || !doc["messages"].is_array() || doc["messages"].empty()) {
    return wrong("messages", "a non-empty array of {role, content}",
                 doc.contains("messages") ? doc["messages"] : Json(nullptr));
  }
  const Json& list = doc["messages"];
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string param = "messages[" + std::to_string(i) + "]";
    const Json& m = list[i];
    if (!m.is_object()) return wrong(param, "an object {role, content}", m);
    const Json role = m.value("role", Json());
    if (!role.is_string()) return wrong(param + ".role", "a string", role);
    ChatMessage message{role.get<std::string>(), ""};
    if (message.role == "developer") message.role = "system";
    if (message.role != "system" && message.role != "user" && message.role != "assistant") {
      return wrong(param + ".role", "\"system\", \"developer\", \"user\" or \"assistant\"", role);
    }
    const Json content = m.value("content", Json());
    if (content.is_string()) {
      message.content = content.get<std::string>();
    } else if (content.is_array()) {
      for (const Json& part : content) {
        if (!part.is_object() || part.value("type", Json()) != "text" ||
            !part.value("text", Json()).is_string()) {
          return wrong(param + ".content", "text parts {\"type\": \"text\", \"text\": \"...\"}",
                       part);
        }
        message.content += part["text"].get<std::string>();
      }
    } else {
      return wrong(param + ".content", "a string or an array of text parts", content);
    }
    messages->push_back(std::move(message));
  }
  return std::nullopt;
}

ApiResult<Json> parse_body(const std::string& body) {
  Json doc = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return bad_request("", "the request body is not valid JSON", "invalid_json");
  }
  if (!doc.is_object()) return wrong("", "a JSON object", doc);
  return doc;
}

}  // namespace

ApiResult<GenerationParams> parse_completion_request(const std::string& body) {
  ApiResult<Json> doc = parse_body(body);
  if (!doc) return doc.error();
  const Json& d = doc.value();
  GenerationParams p;
  KVLM_API_CHECK(read_common(d, &p));
  if (!p.max_tokens) p.max_tokens = 16;
  KVLM_API_CHECK(read_prompt(d, &p.prompts));
  std::optional<int64_t> logprobs;
  KVLM_API_CHECK(read_int(d, "logprobs", 0, kMaxLogprobs, &logprobs));
  if (logprobs) p.logprobs = static_cast<int>(*logprobs);
  KVLM_API_CHECK(read_bool(d, "echo", &p.echo));
  return p;
}

ApiResult<GenerationParams> parse_chat_request(const std::string& body) {
  ApiResult<Json> doc = parse_body(body);
  if (!doc) return doc.error();
  const Json& d = doc.value();
  GenerationParams p;
  KVLM_API_CHECK(read_common(d, &p));
  // max_completion_tokens is the newer name of max_tokens.
  std::optional<int64_t> v;
  KVLM_API_CHECK(read_int(d, "max_completion_tokens", 1, std::numeric_limits<int32_t>::max(), &v));
  if (v) p.max_tokens = static_cast<int>(*v);
  KVLM_API_CHECK(read_messages(d, &p.messages));
  bool logprobs = false;
  KVLM_API_CHECK(read_bool(d, "logprobs", &logprobs));
  std::optional<int64_t> top;
  KVLM_API_CHECK(read_int(d, "top_logprobs", 0, kMaxLogprobs, &top));
  if (top && !logprobs) {
    return bad_request("top_logprobs", "top_logprobs: needs \"logprobs\": true");
  }
  if (logprobs) p.logprobs = top ? static_cast<int>(*top) : 0;
  return p;
}

std::optional<ApiError> check_prompt(const std::vector<int32_t>& ids, int max_tokens, int n_ctx,
                                     int n_vocab, const std::string& param, bool windowed) {
  if (ids.empty()) return bad_request(param, param + ": the prompt is empty", "empty_prompt");
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= n_vocab) {
      return bad_request(param,
                         param + ": token id " + std::to_string(ids[i]) + " at position " +
                             std::to_string(i) + " is outside the vocabulary [0, " +
                             std::to_string(n_vocab) + ")",
                         "invalid_token_id");
    }
  }
  const int64_t total = static_cast<int64_t>(ids.size()) + max_tokens;
  if (!windowed && total > n_ctx) {
    return bad_request(param,
                       "This model's maximum context length is " + std::to_string(n_ctx) +
                           " tokens. However, you requested " + std::to_string(total) +
                           " tokens (" + std::to_string(ids.size()) + " in the prompt, " +
                           std::to_string(max_tokens) +
                           " for the completion). Please reduce the prompt or max_tokens.",
                       "context_length_exceeded");
  }
  return std::nullopt;
}

}  // namespace kvlm::serve
