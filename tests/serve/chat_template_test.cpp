// Chat templates: family detection from real templates' markers, tokenizer_config.json
// reading, and each formatter's exact text (written out by hand from the family's reference
// Jinja template).
#include "serve/chat_template.h"

#include <gtest/gtest.h>

#include "support/test_support.h"

namespace kvlm::serve {
namespace {

const std::vector<ChatMessage> kConversation = {
    {"system", "Be brief."}, {"user", " Hi "}, {"assistant", "Hello."}, {"user", "Bye"}};

ChatTemplate of(ChatTemplateKind kind) {
  ChatTemplate t;
  t.kind = kind;
  return t;
}

TEST(ChatTemplate, DetectsFamiliesByMarkers) {
  EXPECT_EQ(detect_chat_template("{% for m in messages %}{{'<|im_start|>' + m['role'] }}"),
            ChatTemplateKind::kChatML);
  EXPECT_EQ(detect_chat_template(
                "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>' }}<|eot_id|>"),
            ChatTemplateKind::kLlama3);
  EXPECT_EQ(detect_chat_template("{{ bos_token + '[INST] ' + '<<SYS>>\\n' }}"),
            ChatTemplateKind::kLlama2);
  EXPECT_EQ(detect_chat_template("{{ bos_token }}{{ '[INST] ' + message['content'] }}"),
            ChatTemplateKind::kMistral);
  EXPECT_EQ(detect_chat_template("{{ messages }}"), ChatTemplateKind::kNone);
}

TEST(ChatTemplate, Names) {
  EXPECT_EQ(chat_template_from_name("llama3").value(), ChatTemplateKind::kLlama3);
  EXPECT_EQ(chat_template_from_name("jinja").message(),
            "--chat-template: expected chatml, llama2, llama3 or mistral, found \"jinja\"");
}

TEST(ChatTemplate, ChatML) {
  EXPECT_EQ(render_chat(of(ChatTemplateKind::kChatML), kConversation),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n Hi <|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplate, Llama3) {
  EXPECT_EQ(render_chat(of(ChatTemplateKind::kLlama3), kConversation),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(end_of_turn(of(ChatTemplateKind::kLlama3)), "<|eot_id|>");
}

TEST(ChatTemplate, Llama2) {
  EXPECT_EQ(
      render_chat(of(ChatTemplateKind::kLlama2), kConversation),
      "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\n Hi [/INST] Hello. </s><s>[INST] Bye [/INST]");
  EXPECT_EQ(end_of_turn(of(ChatTemplateKind::kLlama2)), "</s>");
}

TEST(ChatTemplate, Mistral) {
  EXPECT_EQ(render_chat(of(ChatTemplateKind::kMistral), kConversation),
            "<s>[INST] Be brief.\n\n Hi  [/INST]Hello.</s>[INST] Bye [/INST]");
}

TEST(ChatTemplate, ReadsTokenizerConfig) {
  test::TempDir dir;
  Result<ChatTemplate> none = read_chat_template(dir.path());
  ASSERT_TRUE(none.is_ok());
  EXPECT_EQ(none.value().kind, ChatTemplateKind::kNone);
  EXPECT_EQ(none.value().absent, "the model has no tokenizer_config.json");

  test::write_text(dir.file("tokenizer_config.json"), R"({"bos_token": "<s>"})");
  EXPECT_EQ(read_chat_template(dir.path()).value().absent,
            "the model's tokenizer_config.json has no chat_template");

  test::write_text(dir.file("tokenizer_config.json"),
                   R"({"bos_token": {"content": "<B>"}, "eos_token": "<E>",
                       "chat_template": "{{ bos_token }}[INST] <<SYS>>"})");
  Result<ChatTemplate> t = read_chat_template(dir.path());
  ASSERT_TRUE(t.is_ok());
  EXPECT_EQ(t.value().kind, ChatTemplateKind::kLlama2);
  EXPECT_EQ(render_chat(t.value(), {{"user", "x"}}), "<B>[INST] x [/INST]");
  EXPECT_EQ(end_of_turn(t.value()), "<E>");

  test::write_text(dir.file("tokenizer_config.json"),
                   R"({"chat_template": [{"name": "tool_use", "template": "<|im_start|>"},
                                         {"name": "default", "template": "<|im_start|>"}]})");
  EXPECT_EQ(read_chat_template(dir.path()).value().kind, ChatTemplateKind::kChatML);

  test::write_text(dir.file("tokenizer_config.json"), R"({"chat_template": "{{ raise }}"})");
  EXPECT_NE(read_chat_template(dir.path()).value().absent.find("of no family kvlm knows"),
            std::string::npos);

  test::write_text(dir.file("tokenizer_config.json"), "{not json");
  Result<ChatTemplate> bad = read_chat_template(dir.path());
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("tokenizer_config.json: expected a JSON object"), std::string::npos);
}

}  // namespace
}  // namespace kvlm::serve
