// Request parsing and validation for /v1/completions and /v1/chat/completions: every accepted
// shape, and each error class with the field it names.
#include "serve/openai_request.h"

#include <gtest/gtest.h>

#include "serve/api_error.h"

namespace kvlm::serve {
namespace {

GenerationParams completion(const std::string& body) {
  ApiResult<GenerationParams> r = parse_completion_request(body);
  EXPECT_TRUE(r.is_ok()) << (r.is_ok() ? "" : r.error().message);
  return r.is_ok() ? r.value() : GenerationParams{};
}

ApiError completion_error(const std::string& body) {
  ApiResult<GenerationParams> r = parse_completion_request(body);
  EXPECT_FALSE(r.is_ok()) << body;
  return r.is_ok() ? ApiError{} : r.error();
}

TEST(OpenAiRequest, PromptShapes) {
  GenerationParams p = completion(R"({"model":"m","prompt":"Hello"})");
  ASSERT_EQ(p.prompts.size(), 1u);
  EXPECT_TRUE(p.prompts[0].is_text);
  EXPECT_EQ(p.prompts[0].text, "Hello");
  EXPECT_EQ(p.model, "m");

  p = completion(R"({"prompt":[7,3,19]})");
  ASSERT_EQ(p.prompts.size(), 1u);
  EXPECT_FALSE(p.prompts[0].is_text);
  EXPECT_EQ(p.prompts[0].ids, (std::vector<int32_t>{7, 3, 19}));

  p = completion(R"({"prompt":["a","b"]})");
  ASSERT_EQ(p.prompts.size(), 2u);
  EXPECT_EQ(p.prompts[1].text, "b");

  p = completion(R"({"prompt":[[1,2],[3]]})");
  ASSERT_EQ(p.prompts.size(), 2u);
  EXPECT_EQ(p.prompts[1].ids, (std::vector<int32_t>{3}));
}

TEST(OpenAiRequest, DefaultsAreOpenAis) {
  const GenerationParams p = completion(R"({"prompt":"x"})");
  EXPECT_EQ(p.max_tokens, 16);
  EXPECT_EQ(p.sampling.temperature, 1.0f);
  EXPECT_EQ(p.sampling.top_p, 1.0f);
  EXPECT_EQ(p.n, 1);
  EXPECT_EQ(p.logprobs, -1);
  EXPECT_FALSE(p.seed_given);
  EXPECT_FALSE(p.stream);
  EXPECT_FALSE(p.echo);
}

TEST(OpenAiRequest, EveryField) {
  const GenerationParams p = completion(
      R"({"prompt":"x","max_tokens":5,"temperature":0,"top_p":0.5,"top_k":40,"min_p":0.1,
          "seed":-3,"stop":["a","bc"],"presence_penalty":1.5,"frequency_penalty":-2,
          "repetition_penalty":1.1,"logprobs":20,"n":3,"echo":true,"stream":true,
          "stream_options":{"include_usage":true},"ignore_eos":true,"user":"ignored"})");
  EXPECT_EQ(p.max_tokens, 5);
  EXPECT_EQ(p.sampling.temperature, 0.0f);
  EXPECT_EQ(p.sampling.top_p, 0.5f);
  EXPECT_EQ(p.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(p.sampling.min_p, 0.1f);
  EXPECT_TRUE(p.seed_given);
  EXPECT_EQ(p.sampling.seed, static_cast<uint64_t>(-3));
  EXPECT_EQ(p.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(p.sampling.presence_penalty, 1.5f);
  EXPECT_EQ(p.sampling.frequency_penalty, -2.0f);
  EXPECT_FLOAT_EQ(p.sampling.repetition_penalty, 1.1f);
  EXPECT_EQ(p.logprobs, 20);
  EXPECT_EQ(p.n, 3);
  EXPECT_TRUE(p.echo);
  EXPECT_TRUE(p.stream);
  EXPECT_TRUE(p.include_usage);
  EXPECT_TRUE(p.ignore_eos);
  EXPECT_EQ(completion(R"({"prompt":"x","stop":"end"})").stop, std::vector<std::string>{"end"});
  EXPECT_EQ(completion(R"({"prompt":"x","top_k":-1})").sampling.top_k, 0);  // vLLM's "off"
  EXPECT_EQ(completion(R"({"prompt":"x","max_tokens":null})").max_tokens, 16);
}

TEST(OpenAiRequest, MalformedJson) {
  const ApiError e = completion_error(R"({"prompt": "x",)");
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.code, "invalid_json");
  EXPECT_EQ(completion_error("[1,2]").message, ": expected a JSON object, found array");
}

TEST(OpenAiRequest, WrongTypesNameTheField) {
  struct Case {
    const char* body;
    const char* param;
    const char* message;
  };
  const Case cases[] = {
      {R"({"prompt":"x","max_tokens":"16"})", "max_tokens",
       "max_tokens: expected an integer in [1, 2147483647], found string"},
      {R"({"prompt":"x","temperature":"hot"})", "temperature",
       "temperature: expected a number in [0, 2], found string"},
      {R"({"prompt":"x","stream":1})", "stream", "stream: expected true or false, found 1"},
      {R"({"prompt":"x","n":1.5})", "n", "n: expected an integer in [1, 16], found 1.5"},
      {R"({"prompt":7})", "prompt",
       "prompt: expected a string, an array of token ids, or an array of strings or of "
       "token-id arrays, found 7"},
      {R"({"prompt":[1,"a"]})", "prompt",
       "prompt: expected token ids (integers >= 0), found string"},
      {R"({"prompt":["a",{}]})", "prompt[1]",
       "prompt[1]: expected a string or an array of token ids, found object"},
      {R"({"prompt":"x","stop":[1]})", "stop",
       "stop: expected a non-empty string or an array of at most 4 of them, found 1"},
      {R"({"prompt":"x","stream_options":{"include_usage":"yes"}})", "stream_options.include_usage",
       "stream_options.include_usage: expected true or false, found string"},
      {R"({"prompt":"x","model":3})", "model", "model: expected a string, found 3"},
  };
  for (const Case& c : cases) {
    const ApiError e = completion_error(c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.type, "invalid_request_error");
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_EQ(e.message, c.message) << c.body;
  }
}

TEST(OpenAiRequest, OutOfRange) {
  const char* bodies[] = {
      R"({"prompt":"x","temperature":-0.1})",
      R"({"prompt":"x","temperature":2.5})",
      R"({"prompt":"x","top_p":0})",
      R"({"prompt":"x","top_p":1.01})",
      R"({"prompt":"x","min_p":1})",
      R"({"prompt":"x","top_k":-2})",
      R"({"prompt":"x","presence_penalty":3})",
      R"({"prompt":"x","frequency_penalty":-2.1})",
      R"({"prompt":"x","repetition_penalty":0})",
      R"({"prompt":"x","logprobs":21})",
      R"({"prompt":"x","logprobs":-1})",
      R"({"prompt":"x","n":0})",
      R"({"prompt":"x","n":17})",
      R"({"prompt":"x","max_tokens":0})",
      R"({"prompt":"x","stop":["a","b","c","d","e"]})",
      R"({"prompt":"x","stop":""})",
      R"({"prompt":[-1]})",
      R"({"prompt":[4294967296]})",
  };
  for (const char* body : bodies) {
    const ApiError e = completion_error(body);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_NE(e.message.find("expected"), std::string::npos) << e.message;
  }
  EXPECT_EQ(completion_error(R"({"prompt":"x","n":0})").message,
            "n: expected an integer in [1, 16], found 0");
}

TEST(OpenAiRequest, EmptyOrMissingPrompt) {
  EXPECT_EQ(completion_error(R"({"prompt":""})").message, "prompt: the prompt is empty");
  EXPECT_EQ(completion_error(R"({"prompt":""})").code, "empty_prompt");
  EXPECT_EQ(completion_error(R"({"prompt":["a",""]})").param, "prompt[1]");
  EXPECT_EQ(completion_error(R"({"prompt":[[1],[]]})").param, "prompt[1]");
  EXPECT_EQ(completion_error(R"({"prompt":[]})").param, "prompt");
  EXPECT_EQ(completion_error(R"({"max_tokens":3})").param, "prompt");
}

TEST(OpenAiRequest, CheckPromptNamesBothNumbers) {
  EXPECT_FALSE(check_prompt({1, 2, 3}, 5, 8, 10, "prompt"));
  std::optional<ApiError> e = check_prompt({1, 2, 3}, 6, 8, 10, "prompt");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, "context_length_exceeded");
  EXPECT_EQ(e->message,
            "This model's maximum context length is 8 tokens. However, you requested 9 tokens "
            "(3 in the prompt, 6 for the completion). Please reduce the prompt or max_tokens.");
  e = check_prompt({1, 10}, 1, 8, 10, "prompt[1]");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "prompt[1]");
  EXPECT_EQ(e->message, "prompt[1]: token id 10 at position 1 is outside the vocabulary [0, 10)");
  EXPECT_EQ(check_prompt({}, 1, 8, 10, "messages")->code, "empty_prompt");
}

// kvlm serve --kv-window: positions are renumbered within the window, so the context no longer
// bounds a request (the engine bounds it by the cache's memory); ids and emptiness still do.
TEST(OpenAiRequest, CheckPromptWithAWindowPassesTheContext) {
  EXPECT_FALSE(check_prompt({1, 2, 3}, 1000, 8, 10, "prompt", true));
  EXPECT_FALSE(check_prompt(std::vector<int32_t>(20, 1), 1, 8, 10, "prompt", true));
  EXPECT_EQ(check_prompt({1, 10}, 1, 8, 10, "prompt", true)->code, "invalid_token_id");
  EXPECT_EQ(check_prompt({}, 1, 8, 10, "prompt", true)->code, "empty_prompt");
}

TEST(OpenAiRequest, Chat) {
  ApiResult<GenerationParams> r = parse_chat_request(
      R"({"model":"m","messages":[{"role":"developer","content":"Be brief."},
          {"role":"user","content":[{"type":"text","text":"Hi "},{"type":"text","text":"there"}]}],
          "max_completion_tokens":7,"logprobs":true,"top_logprobs":2})");
  ASSERT_TRUE(r.is_ok()) << r.error().message;
  const GenerationParams& p = r.value();
  ASSERT_EQ(p.messages.size(), 2u);
  EXPECT_EQ(p.messages[0].role, "system");
  EXPECT_EQ(p.messages[1].content, "Hi there");
  EXPECT_EQ(p.max_tokens, 7);
  EXPECT_EQ(p.logprobs, 2);
  EXPECT_FALSE(parse_chat_request(R"({"messages":[{"role":"user","content":"x"}]})")
                   .value()
                   .max_tokens.has_value());  // the rest of the context
  EXPECT_EQ(parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],"logprobs":true})")
                .value()
                .logprobs,
            0);
}

TEST(OpenAiRequest, ChatErrors) {
  auto error = [](const std::string& body) {
    ApiResult<GenerationParams> r = parse_chat_request(body);
    EXPECT_FALSE(r.is_ok()) << body;
    return r.is_ok() ? ApiError{} : r.error();
  };
  EXPECT_EQ(error(R"({"messages":[]})").param, "messages");
  EXPECT_EQ(error(R"({"prompt":"x"})").param, "messages");
  EXPECT_EQ(error(R"({"messages":[{"role":"robot","content":"x"}]})").param, "messages[0].role");
  EXPECT_EQ(error(R"({"messages":[{"role":"user","content":7}]})").param, "messages[0].content");
  EXPECT_EQ(error(R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})").param,
            "messages[0].content");
  EXPECT_EQ(error(R"({"messages":[{"role":"user","content":[{"type":7,"text":"x"}]}]})").param,
            "messages[0].content");
  EXPECT_EQ(error(R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})").param,
            "top_logprobs");
}

TEST(ApiErrorTest, BodyIsOpenAisShape) {
  EXPECT_EQ(
      error_body(bad_request("n", "n: bad")),
      R"({"error":{"message":"n: bad","type":"invalid_request_error","param":"n","code":null}})");
  EXPECT_NE(error_body_for_status(404).find("\"code\":\"not_found\""), std::string::npos);
  EXPECT_NE(error_body_for_status(413).find("\"code\":\"request_too_large\""), std::string::npos);
}

}  // namespace
}  // namespace kvlm::serve
