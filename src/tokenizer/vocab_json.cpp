#include "tokenizer/vocab_json.h"

#include <cstdio>

namespace kvlm {

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < 80; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  if (s.size() > 80) out += "...";
  return out + "\"";
}

void VocabEntries::add(const std::string& token, size_t id, size_t at) {
  if (id >= text.size()) {
    text.resize(id + 1);
    offset.resize(id + 1);
    present.resize(id + 1, false);
  }
  text[id] = token;
  offset[id] = at;
  present[id] = true;
  id_of.emplace(token, static_cast<int32_t>(id));
}

Status read_vocab_object(JsonCursor& json, VocabEntries* vocab) {
  return json.read_object([&](const std::string& token, size_t at) -> Status {
    const size_t id_at = json.offset();
    Result<int64_t> id = json.read_integer();
    if (!id) return Status::error(id.message() + " (the id of token " + quote(token) + ")");
    if (id.value() < 0 || id.value() >= kMaxVocab) {
      return json.error_at(id_at, "token " + quote(token) + " has id " +
                                      std::to_string(id.value()) + ", expected 0.." +
                                      std::to_string(kMaxVocab - 1));
    }
    const auto i = static_cast<size_t>(id.value());
    if (auto it = vocab->id_of.find(token); it != vocab->id_of.end()) {
      return json.error_at(at, "token " + quote(token) + " appears twice (first at " +
                                   json.where(vocab->offset[it->second]) + ")");
    }
    if (i < vocab->present.size() && vocab->present[i]) {
      return json.error_at(at, "duplicate id " + std::to_string(i) + ": tokens " +
                                   quote(vocab->text[i]) + " (at " + json.where(vocab->offset[i]) +
                                   ") and " + quote(token) + " both have it");
    }
    vocab->add(token, i, at);
    return Status::ok();
  });
}

Status read_merge(JsonCursor& json, size_t at, std::vector<RawMerge>* merges) {
  RawMerge m{.left = {}, .right = {}, .offset = at};
  if (json.peek() == '[') {
    std::vector<std::string> parts;
    KVLM_RETURN_IF_ERROR(json.read_array([&](size_t, size_t) -> Status {
      Result<std::string> part = json.read_string();
      KVLM_RETURN_IF_ERROR(part);
      parts.push_back(std::move(part).value());
      return Status::ok();
    }));
    if (parts.size() != 2) {
      return json.error_at(at,
                           "expected a merge of two tokens, found " + std::to_string(parts.size()));
    }
    m.left = std::move(parts[0]);
    m.right = std::move(parts[1]);
  } else {
    Result<std::string> line = json.read_string();
    KVLM_RETURN_IF_ERROR(line);
    const std::string& s = line.value();
    const size_t space = s.find(' ');
    if (space == 0 || space == std::string::npos || space + 1 == s.size() ||
        s.find(' ', space + 1) != std::string::npos) {
      return json.error_at(
          at, "expected a merge of two tokens separated by one space, found " + quote(s));
    }
    m.left = s.substr(0, space);
    m.right = s.substr(space + 1);
  }
  merges->push_back(std::move(m));
  return Status::ok();
}

}  // namespace kvlm
