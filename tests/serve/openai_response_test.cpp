// Response bodies and stream chunks in OpenAI's shapes, and their SSE framing.
#include "serve/openai_response.h"

#include <gtest/gtest.h>

#include "serve/sse.h"

namespace kvlm::serve {
namespace {

const ResponseMeta kMeta{"cmpl-1", 1700000000, "tiny"};
const TokenText kText = [](int32_t id) { return "t" + std::to_string(id); };

TEST(OpenAiResponse, CompletionBody) {
  ChoiceOutput c;
  c.text = "Hi there";
  c.echo_bytes = 2;
  c.completion_tokens = 2;
  c.finish = FinishReason::kEos;
  // As the engine reports top_logprobs 1: one alternative per token.
  c.logprobs = {LogprobInfo{{5, -0.5f}, {{5, -0.5f}}}, LogprobInfo{{7, -0.25f}, {{7, -0.25f}}}};
  const Json body = completion_body(kMeta, {c}, Usage{3, 2}, 1, kText);
  EXPECT_EQ(json_text(body),
            R"({"id":"cmpl-1","object":"text_completion","created":1700000000,"model":"tiny",)"
            R"("choices":[{"index":0,"text":"Hi there","logprobs":{"tokens":["t5","t7"],)"
            R"("token_logprobs":[-0.5,-0.25],"top_logprobs":[{"t5":-0.5},{"t7":-0.25}],)"
            R"("text_offset":[2,4]},"finish_reason":"stop"}],)"
            R"("usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5},)"
            R"("system_fingerprint":null})");
  EXPECT_EQ(completion_body(kMeta, {c}, Usage{3, 2}, -1, kText)["choices"][0]["logprobs"], nullptr);
}

TEST(OpenAiResponse, ChatBodyAndLogprobs) {
  ChoiceOutput c;
  c.text = "ok";
  c.finish = FinishReason::kLength;
  c.logprobs = {LogprobInfo{{1, -0.5f}, {{1, -0.5f}, {2, -1.0f}}}};
  const Json body = chat_body(kMeta, {c}, Usage{1, 1}, 2, kText);
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(body["choices"][0]["message"]["content"], "ok");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  const Json& lp = body["choices"][0]["logprobs"]["content"][0];
  EXPECT_EQ(lp["token"], "t1");
  EXPECT_EQ(lp["bytes"], Json::array({116, 49}));
  EXPECT_EQ(lp["top_logprobs"].size(), 2u);
  EXPECT_EQ(lp["top_logprobs"][1]["token"], "t2");
}

TEST(OpenAiResponse, ChunksAndSse) {
  EXPECT_EQ(
      sse_event(chat_chunk(kMeta, 0, "assistant", "", nullptr, -1, FinishReason::kNone, kText)),
      "data: {\"id\":\"cmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,"
      "\"model\":\"tiny\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\","
      "\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}],"
      "\"system_fingerprint\":null}\n\n");
  const Json last = chat_chunk(kMeta, 1, "", "", nullptr, -1, FinishReason::kStop, kText);
  EXPECT_EQ(last["choices"][0]["delta"], Json::object());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  const Json text = completion_chunk(kMeta, 0, "a\nb", nullptr, -1, 0, FinishReason::kNone, kText);
  EXPECT_EQ(sse_event(text).find('\n'), sse_event(text).size() - 2);  // one line, then a blank
  const Json usage = usage_chunk(kMeta, false, Usage{4, 6});
  EXPECT_EQ(usage["choices"], Json::array());
  EXPECT_EQ(usage["usage"]["total_tokens"], 10);
  EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
}

TEST(OpenAiResponse, InvalidUtf8IsReplacedNotThrown) {
  ChoiceOutput c;
  c.text = std::string("a\xe2\x82", 3);
  EXPECT_EQ(
      completion_body(kMeta, {c}, Usage{}, -1, kText)["choices"][0]["text"].get<std::string>(),
      c.text);
  EXPECT_NE(json_text(completion_body(kMeta, {c}, Usage{}, -1, kText)).find("a\xef\xbf\xbd"),
            std::string::npos);
}

TEST(OpenAiResponse, FinishReasons) {
  EXPECT_STREQ(openai_finish_reason(FinishReason::kEos), "stop");
  EXPECT_STREQ(openai_finish_reason(FinishReason::kStop), "stop");
  EXPECT_STREQ(openai_finish_reason(FinishReason::kLength), "length");
  EXPECT_STREQ(openai_finish_reason(FinishReason::kCancelled), "abort");
  EXPECT_EQ(openai_finish_reason(FinishReason::kNone), nullptr);
}

}  // namespace
}  // namespace kvlm::serve
