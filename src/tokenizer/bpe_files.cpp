#include "tokenizer/bpe_files.h"

#include <cstdio>
#include <unordered_map>

#include "tokenizer/byte_unicode.h"
#include "tokenizer/json_cursor.h"
#include "util/mapped_file.h"

namespace kvlm {
namespace {

// Generous for any real vocabulary; keeps a corrupt id from allocating gigabytes.
constexpr int64_t kMaxVocab = int64_t{1} << 24;
constexpr char kEndOfText[] = "<|endoftext|>";

// A token or line for an error message: quoted, control characters escaped, long ones cut.
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

// Tokens as written in the file (byte-level text such as "Ġthe"), with where each was written.
struct VocabEntries {
  std::vector<std::string> text;  // [n_vocab]
  std::vector<size_t> offset;     // [n_vocab] byte offset of the token in the file
  std::vector<bool> present;      // [n_vocab]
  std::unordered_map<std::string, int32_t> id_of;
};

// Reads a JSON object of token -> id at the cursor.
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
    if (auto [it, fresh] = vocab->id_of.emplace(token, static_cast<int32_t>(i)); !fresh) {
      return json.error_at(at, "token " + quote(token) + " appears twice (first at " +
                                   json.where(vocab->offset[it->second]) + ")");
    }
    if (i >= vocab->text.size()) {
      vocab->text.resize(i + 1);
      vocab->offset.resize(i + 1);
      vocab->present.resize(i + 1, false);
    }
    if (vocab->present[i]) {
      return json.error_at(at, "duplicate id " + std::to_string(i) + ": tokens " +
                                   quote(vocab->text[i]) + " (at " + json.where(vocab->offset[i]) +
                                   ") and " + quote(token) + " both have it");
    }
    vocab->text[i] = token;
    vocab->offset[i] = at;
    vocab->present[i] = true;
    return Status::ok();
  });
}

// Converts the byte-level text of each token to bytes into `model`.
Status vocab_to_model(const VocabEntries& vocab, const JsonCursor& json, BpeModel* model) {
  const size_t n = vocab.text.size();
  model->tokens.assign(n, std::string());
  model->present = vocab.present;
  for (size_t id = 0; id < n; ++id) {
    if (!vocab.present[id]) continue;
    Result<std::string> bytes = byte_level_to_bytes(vocab.text[id]);
    if (!bytes) {
      return json.error_at(vocab.offset[id],
                           "token " + quote(vocab.text[id]) + ": " + bytes.message());
    }
    model->tokens[id] = std::move(bytes).value();
  }
  return Status::ok();
}

// Turns "left right" into a merge rule. where() names the line for messages; it is only called
// on error, since finding a line in a large file is not free.
template <typename Where>
Result<MergeRule> resolve_merge(const std::string& left, const std::string& right,
                                const VocabEntries& vocab, const std::string& vocab_file,
                                Where&& where) {
  MergeRule rule{};
  for (const std::string* part : {&left, &right}) {
    auto it = vocab.id_of.find(*part);
    if (it == vocab.id_of.end()) {
      return Status::error(where() + ": the merge names token " + quote(*part) +
                           ", which is not in the vocabulary (" + vocab_file + ")");
    }
    (part == &left ? rule.left : rule.right) = it->second;
  }
  auto it = vocab.id_of.find(left + right);
  if (it == vocab.id_of.end()) {
    return Status::error(where() + ": the merge of " + quote(left) + " and " + quote(right) +
                         " makes " + quote(left + right) + ", which is not in the vocabulary (" +
                         vocab_file + ")");
  }
  rule.merged = it->second;
  return rule;
}

Status parse_merges_txt(std::string_view text, const std::string& path, const VocabEntries& vocab,
                        const std::string& vocab_path, std::vector<MergeRule>* merges) {
  size_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    if (line_no == 1 && line.starts_with("#version")) continue;
    auto where = [&] { return path + " line " + std::to_string(line_no); };
    const size_t space = line.find(' ');
    if (space == 0 || space == std::string_view::npos || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos) {
      return Status::error(where() + ": expected two tokens separated by one space, found " +
                           quote(line));
    }
    Result<MergeRule> rule =
        resolve_merge(std::string(line.substr(0, space)), std::string(line.substr(space + 1)),
                      vocab, vocab_path, where);
    KVLM_RETURN_IF_ERROR(rule);
    merges->push_back(rule.value());
  }
  return Status::ok();
}

// GPT-2 marks the end of a text (and, having nothing else, the start) with <|endoftext|>.
void set_end_of_text(const VocabEntries& vocab, BpeModel* model) {
  auto it = vocab.id_of.find(kEndOfText);
  if (it == vocab.id_of.end()) return;
  model->eos_id = it->second;
  model->bos_id = it->second;
  bool listed = false;
  for (int32_t id : model->special_ids) listed |= id == it->second;
  if (!listed) model->special_ids.push_back(it->second);
}

// What tokenizer.json says beyond the vocabulary, read before anything is checked because JSON
// objects may list their members in any order.
struct TokenizerJson {
  VocabEntries vocab;
  bool has_vocab = false;
  struct RawMerge {
    std::string left, right;
    size_t offset;
  };
  std::vector<RawMerge> merges;
  bool has_merges = false;
  struct AddedToken {
    int64_t id = -1;
    std::string content;
    bool special = false;
    size_t offset = 0;
  };
  std::vector<AddedToken> added;
};

// Reads {"type": ..., <flag>: bool, ...} or null; returns "" for null. Other members are
// skipped. Unknown flags stay at their defaults.
Result<std::string> read_typed_object(JsonCursor& json,
                                      std::vector<std::pair<std::string, bool*>> flags) {
  if (json.consume_literal("null")) return std::string();
  std::string type;
  Status st = json.read_object([&](const std::string& key, size_t) -> Status {
    if (key == "type") {
      Result<std::string> t = json.read_string();
      KVLM_RETURN_IF_ERROR(t);
      type = t.value();
      return Status::ok();
    }
    for (auto& [name, value] : flags) {
      if (key == name && !json.consume_literal("null")) {
        Result<bool> b = json.read_bool();
        KVLM_RETURN_IF_ERROR(b);
        *value = b.value();
        return Status::ok();
      }
    }
    return json.skip_value();
  });
  KVLM_RETURN_IF_ERROR(st);
  return type;
}

// A merge in tokenizer.json is "left right" (older files) or ["left", "right"] (newer ones).
Status read_merge(JsonCursor& json, size_t at, TokenizerJson* tj) {
  TokenizerJson::RawMerge m{.left = {}, .right = {}, .offset = at};
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
  tj->merges.push_back(std::move(m));
  return Status::ok();
}

Status read_model(JsonCursor& json, TokenizerJson* tj) {
  return json.read_object([&](const std::string& key, size_t at) -> Status {
    if (key == "type") {
      Result<std::string> type = json.read_string();
      KVLM_RETURN_IF_ERROR(type);
      if (type.value() != "BPE") {
        return json.error_at(at, "model.type is " + quote(type.value()) +
                                     ", expected \"BPE\" (kvlm reads byte-level BPE tokenizers)");
      }
      return Status::ok();
    }
    if (key == "vocab") {
      tj->has_vocab = true;
      return read_vocab_object(json, &tj->vocab);
    }
    if (key == "merges") {
      tj->has_merges = true;
      return json.read_array(
          [&](size_t, size_t element_at) { return read_merge(json, element_at, tj); });
    }
    if (key == "continuing_subword_prefix" || key == "end_of_word_suffix") {
      if (json.consume_literal("null")) return Status::ok();
      Result<std::string> affix = json.read_string();
      KVLM_RETURN_IF_ERROR(affix);
      if (!affix.value().empty()) {
        return json.error_at(at, "model." + key + " is " + quote(affix.value()) +
                                     ", expected \"\" (GPT-2's BPE has none)");
      }
      return Status::ok();
    }
    return json.skip_value();
  });
}

Status read_added_tokens(JsonCursor& json, TokenizerJson* tj) {
  return json.read_array([&](size_t, size_t at) -> Status {
    TokenizerJson::AddedToken t;
    t.offset = at;
    KVLM_RETURN_IF_ERROR(json.read_object([&](const std::string& key, size_t) -> Status {
      if (key == "id") {
        Result<int64_t> id = json.read_integer();
        KVLM_RETURN_IF_ERROR(id);
        t.id = id.value();
      } else if (key == "content") {
        Result<std::string> content = json.read_string();
        KVLM_RETURN_IF_ERROR(content);
        t.content = std::move(content).value();
      } else if (key == "special") {
        Result<bool> special = json.read_bool();
        KVLM_RETURN_IF_ERROR(special);
        t.special = special.value();
      } else {
        return json.skip_value();
      }
      return Status::ok();
    }));
    if (t.id < 0 || t.id >= kMaxVocab || t.content.empty()) {
      return json.error_at(at, "an added token needs an id in 0.." + std::to_string(kMaxVocab - 1) +
                                   " and a non-empty content");
    }
    tj->added.push_back(std::move(t));
    return Status::ok();
  });
}

Status read_tokenizer_json(JsonCursor& json, TokenizerJson* tj) {
  return json.read_object([&](const std::string& key, size_t at) -> Status {
    if (key == "model") return read_model(json, tj);
    if (key == "added_tokens") return read_added_tokens(json, tj);
    if (key == "normalizer") {
      Result<std::string> type = read_typed_object(json, {});
      KVLM_RETURN_IF_ERROR(type);
      if (!type.value().empty()) {
        return json.error_at(at, "normalizer " + quote(type.value()) +
                                     " is not supported (GPT-2's tokenizer has none)");
      }
      return Status::ok();
    }
    if (key == "pre_tokenizer") {
      bool add_prefix_space = false, use_regex = true;
      Result<std::string> type = read_typed_object(
          json, {{"add_prefix_space", &add_prefix_space}, {"use_regex", &use_regex}});
      KVLM_RETURN_IF_ERROR(type);
      if (type.value() != "ByteLevel" || add_prefix_space || !use_regex) {
        return json.error_at(
            at, "pre_tokenizer " + quote(type.value()) +
                    (type.value() == "ByteLevel" ? " with add_prefix_space or without use_regex"
                                                 : std::string()) +
                    " is not supported: kvlm implements GPT-2's (ByteLevel, add_prefix_space "
                    "false, use_regex true)");
      }
      return Status::ok();
    }
    return json.skip_value();
  });
}

}  // namespace

Result<BpeModel> load_vocab_and_merges(const std::string& vocab_path,
                                       const std::string& merges_path) {
  Result<std::string> vocab_text = read_text_file(vocab_path);
  KVLM_RETURN_IF_ERROR(vocab_text);
  JsonCursor json(vocab_text.value(), vocab_path);
  VocabEntries vocab;
  KVLM_RETURN_IF_ERROR(read_vocab_object(json, &vocab));
  if (!json.at_end()) {
    return json.error_at(json.offset(),
                         "invalid JSON: unexpected text after the vocabulary object");
  }
  BpeModel model;
  model.source = vocab_path + " + " + merges_path;
  KVLM_RETURN_IF_ERROR(vocab_to_model(vocab, json, &model));

  Result<std::string> merges_text = read_text_file(merges_path);
  KVLM_RETURN_IF_ERROR(merges_text);
  KVLM_RETURN_IF_ERROR(
      parse_merges_txt(merges_text.value(), merges_path, vocab, vocab_path, &model.merges));
  set_end_of_text(vocab, &model);
  return model;
}

Result<BpeModel> load_tokenizer_json(const std::string& path) {
  Result<std::string> text = read_text_file(path);
  KVLM_RETURN_IF_ERROR(text);
  JsonCursor json(text.value(), path);
  TokenizerJson tj;
  KVLM_RETURN_IF_ERROR(read_tokenizer_json(json, &tj));
  if (!json.at_end()) {
    return json.error_at(json.offset(), "invalid JSON: unexpected text after the top-level object");
  }
  if (!tj.has_vocab || !tj.has_merges) {
    return Status::error(path + ": no model.vocab and model.merges (not a BPE tokenizer.json?)");
  }
  // Added tokens hold raw text, not byte-level text; one may repeat a vocabulary entry.
  for (const TokenizerJson::AddedToken& t : tj.added) {
    const auto id = static_cast<size_t>(t.id);
    if (id < tj.vocab.text.size() && tj.vocab.present[id]) {
      if (tj.vocab.text[id] != bytes_to_byte_level(t.content)) {
        return json.error_at(t.offset, "added token " + quote(t.content) + " has id " +
                                           std::to_string(id) + ", which model.vocab gives to " +
                                           quote(tj.vocab.text[id]));
      }
      continue;
    }
    if (id >= tj.vocab.text.size()) {
      tj.vocab.text.resize(id + 1);
      tj.vocab.offset.resize(id + 1);
      tj.vocab.present.resize(id + 1, false);
    }
    tj.vocab.text[id] = bytes_to_byte_level(t.content);
    tj.vocab.offset[id] = t.offset;
    tj.vocab.present[id] = true;
    tj.vocab.id_of.emplace(tj.vocab.text[id], static_cast<int32_t>(id));
  }
  BpeModel model;
  model.source = path;
  KVLM_RETURN_IF_ERROR(vocab_to_model(tj.vocab, json, &model));
  for (const TokenizerJson::RawMerge& m : tj.merges) {
    Result<MergeRule> rule = resolve_merge(m.left, m.right, tj.vocab, path + " model.vocab",
                                           [&] { return json.where(m.offset); });
    KVLM_RETURN_IF_ERROR(rule);
    model.merges.push_back(rule.value());
  }
  for (const TokenizerJson::AddedToken& t : tj.added) {
    if (t.special) model.special_ids.push_back(static_cast<int32_t>(t.id));
  }
  set_end_of_text(tj.vocab, &model);
  return model;
}

}  // namespace kvlm
