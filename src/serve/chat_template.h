// Chat templates without a template engine. A model's tokenizer_config.json carries a Jinja
// `chat_template`; Debian packages no Jinja engine, and a template is untrusted input, so kvlm
// never executes it. As llama.cpp's Jinja-free path does, it recognises the template family by
// its markers and renders messages with a built-in formatter written from that family's
// reference template: ChatML, Llama 2, Llama 3, Mistral. `--chat-template NAME` chooses one
// by name instead.
//
// The rendered prompt holds the template's own special tokens as text (BOS included where the
// family puts it), so it is encoded with special-token text allowed and no BOS added, as
// transformers' apply_chat_template(tokenize=True) does.
#pragma once

#include <string>
#include <vector>

#include "kvlm/status.h"

namespace kvlm::serve {

enum class ChatTemplateKind { kNone, kChatML, kLlama2, kLlama3, kMistral };

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

struct ChatTemplate {
  ChatTemplateKind kind = ChatTemplateKind::kNone;
  // From tokenizer_config.json; empty: the family's usual token ("<s>" / "<|begin_of_text|>",
  // "</s>"), e.g. when --chat-template names a family for a model without that file.
  std::string bos_token;
  std::string eos_token;
  std::string source;  // where the choice came from, for the ready line
  std::string absent;  // with kNone: why there is no template (said in chat requests' 400)
};

// "chatml", "llama2", "llama3", "mistral" (and "none").
const char* chat_template_name(ChatTemplateKind kind);
// A --chat-template value; the error lists the names.
Result<ChatTemplateKind> chat_template_from_name(const std::string& name);
// The family a Jinja template's text belongs to, from its markers; kNone when none matches.
ChatTemplateKind detect_chat_template(const std::string& jinja);

// Reads tokenizer_config.json in `folder` (chat_template, bos_token, eos_token). A folder
// without that file, a file without chat_template, or a template of no known family gives kind
// kNone with `absent` saying which; only a file that is not JSON is an error.
Result<ChatTemplate> read_chat_template(const std::string& folder);

// The prompt for `messages`, ending with the assistant's turn opened (add_generation_prompt).
// kNone is a programming error (returns "").
std::string render_chat(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages);

// The text that ends an assistant turn in this family ("<|im_end|>", "<|eot_id|>", the EOS
// token): generation stops there.
std::string end_of_turn(const ChatTemplate& tmpl);

}  // namespace kvlm::serve
