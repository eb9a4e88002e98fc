// Each formatter below follows its family's reference Jinja template (quoted in the comment
// above it) for the messages a client can send: system, user, assistant.
#include "serve/chat_template.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace kvlm::serve {

namespace {

std::string strip(const std::string& s) {
  const char* ws = " \t\r\n\f\v";
  const size_t begin = s.find_first_not_of(ws);
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(ws) - begin + 1);
}

bool contains(const std::string& text, const char* marker) {
  return text.find(marker) != std::string::npos;
}

std::string bos(const ChatTemplate& tmpl) {
  if (!tmpl.bos_token.empty()) return tmpl.bos_token;
  return tmpl.kind == ChatTemplateKind::kLlama3 ? "<|begin_of_text|>" : "<s>";
}

std::string eos(const ChatTemplate& tmpl) {
  return tmpl.eos_token.empty() ? "</s>" : tmpl.eos_token;
}

// {% for m in messages %}{{'<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>' +
// '\n'}}{% endfor %}{{ '<|im_start|>assistant\n' }}
std::string render_chatml(const std::vector<ChatMessage>& messages) {
  std::string out;
  for (const ChatMessage& m : messages) {
    out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  }
  return out + "<|im_start|>assistant\n";
}

// bos_token, then per message '<|start_header_id|>' + role + '<|end_header_id|>\n\n' +
// content | trim + '<|eot_id|>', then '<|start_header_id|>assistant<|end_header_id|>\n\n'.
std::string render_llama3(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages) {
  std::string out = bos(tmpl);
  for (const ChatMessage& m : messages) {
    out +=
        "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + strip(m.content) + "<|eot_id|>";
  }
  return out + "<|start_header_id|>assistant<|end_header_id|>\n\n";
}

// A leading system message is folded into the first user turn as '<<SYS>>\n' + system +
// '\n<</SYS>>\n\n' + content; user turns are bos_token + '[INST] ' + content.strip() +
// ' [/INST]', assistant turns ' ' + content.strip() + ' ' + eos_token.
std::string render_llama2(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages) {
  std::string system;
  size_t first = 0;
  if (!messages.empty() && messages[0].role == "system") {
    system = messages[0].content;
    first = 1;
  }
  std::string out;
  bool system_pending = first == 1;
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    std::string content = m.content;
    if (system_pending && m.role == "user") {
      content = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content;
      system_pending = false;
    }
    if (m.role == "user") {
      out += bos(tmpl) + "[INST] " + strip(content) + " [/INST]";
    } else if (m.role == "assistant") {
      out += " " + strip(content) + " " + eos(tmpl);
    }
  }
  return out;
}

// bos_token, then user turns '[INST] ' + content + ' [/INST]' and assistant turns content +
// eos_token. Mistral's first templates refuse a system message; its later ones (and
// llama.cpp) put it before the first user message, separated by a blank line, as here.
std::string render_mistral(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages) {
  std::string system;
  std::string out = bos(tmpl);
  for (const ChatMessage& m : messages) {
    if (m.role == "system") {
      system += (system.empty() ? "" : "\n\n") + m.content;
    } else if (m.role == "user") {
      const std::string content = system.empty() ? m.content : system + "\n\n" + m.content;
      system.clear();
      out += "[INST] " + content + " [/INST]";
    } else if (m.role == "assistant") {
      out += m.content + eos(tmpl);
    }
  }
  return out;
}

// A special token in tokenizer_config.json: a string, or {"content": "..."} (AddedToken).
std::string token_text(const nlohmann::json& value, const std::string& fallback) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value["content"].is_string()) {
    return value["content"].get<std::string>();
  }
  return fallback;
}

}  // namespace

const char* chat_template_name(ChatTemplateKind kind) {
  switch (kind) {
    case ChatTemplateKind::kChatML:
      return "chatml";
    case ChatTemplateKind::kLlama2:
      return "llama2";
    case ChatTemplateKind::kLlama3:
      return "llama3";
    case ChatTemplateKind::kMistral:
      return "mistral";
    case ChatTemplateKind::kNone:
      break;
  }
  return "none";
}

Result<ChatTemplateKind> chat_template_from_name(const std::string& name) {
  for (ChatTemplateKind kind : {ChatTemplateKind::kChatML, ChatTemplateKind::kLlama2,
                                ChatTemplateKind::kLlama3, ChatTemplateKind::kMistral}) {
    if (name == chat_template_name(kind)) return kind;
  }
  return Status::error("--chat-template: expected chatml, llama2, llama3 or mistral, found \"" +
                       name + "\"");
}

ChatTemplateKind detect_chat_template(const std::string& jinja) {
  if (contains(jinja, "<|im_start|>")) return ChatTemplateKind::kChatML;
  if (contains(jinja, "<|start_header_id|>") && contains(jinja, "<|eot_id|>")) {
    return ChatTemplateKind::kLlama3;
  }
  if (contains(jinja, "[INST]")) {
    return contains(jinja, "<<SYS>>") ? ChatTemplateKind::kLlama2 : ChatTemplateKind::kMistral;
  }
  return ChatTemplateKind::kNone;
}

Result<ChatTemplate> read_chat_template(const std::string& folder) {
  ChatTemplate tmpl;
  const std::filesystem::path path = std::filesystem::path(folder) / "tokenizer_config.json";
  std::error_code ec;
  if (folder.empty() || !std::filesystem::is_regular_file(path, ec)) {
    tmpl.absent = "the model has no tokenizer_config.json";
    return tmpl;
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json doc = nlohmann::json::parse(text.str(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return Status::error(path.string() + ": expected a JSON object, found text that is not");
  }
  tmpl.bos_token = token_text(doc.value("bos_token", nlohmann::json()), "");
  tmpl.eos_token = token_text(doc.value("eos_token", nlohmann::json()), "");
  const nlohmann::json* jinja = doc.contains("chat_template") ? &doc["chat_template"] : nullptr;
  // Several named templates: [{"name": "default", "template": "..."}, ...].
  if (jinja != nullptr && jinja->is_array()) {
    const nlohmann::json* chosen = nullptr;
    for (const nlohmann::json& entry : *jinja) {
      if (entry.is_object() && entry.value("name", nlohmann::json()) == "default" &&
          entry.contains("template")) {
        chosen = &entry["template"];
      }
    }
    jinja = chosen;
  }
  if (jinja == nullptr || !jinja->is_string()) {
    tmpl.absent = "the model's tokenizer_config.json has no chat_template";
    return tmpl;
  }
  tmpl.kind = detect_chat_template(jinja->get<std::string>());
  if (tmpl.kind == ChatTemplateKind::kNone) {
    tmpl.absent =
        "the chat_template in the model's tokenizer_config.json is of no family kvlm "
        "knows (ChatML, Llama 2, Llama 3, Mistral)";
    return tmpl;
  }
  tmpl.source = path.string();
  return tmpl;
}

std::string render_chat(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages) {
  switch (tmpl.kind) {
    case ChatTemplateKind::kChatML:
      return render_chatml(messages);
    case ChatTemplateKind::kLlama2:
      return render_llama2(tmpl, messages);
    case ChatTemplateKind::kLlama3:
      return render_llama3(tmpl, messages);
    case ChatTemplateKind::kMistral:
      return render_mistral(tmpl, messages);
    case ChatTemplateKind::kNone:
      break;
  }
  return "";
}

std::string end_of_turn(const ChatTemplate& tmpl) {
  switch (tmpl.kind) {
    case ChatTemplateKind::kChatML:
      return "<|im_end|>";
    case ChatTemplateKind::kLlama3:
      return "<|eot_id|>";
    default:
      return eos(tmpl);
  }
}

}  // namespace kvlm::serve
