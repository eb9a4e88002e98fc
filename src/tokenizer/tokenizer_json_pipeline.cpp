#include "tokenizer/tokenizer_json_pipeline.h"

#include <vector>

#include "tokenizer/vocab_json.h"

namespace kvlm {
namespace {

using json = nlohmann::ordered_json;

std::string type_of(const json& j) {
  if (!j.is_object()) return "";
  auto it = j.find("type");
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// A member's string, or nullopt when it is absent or not a string.
std::optional<std::string> string_member(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

// A member's bool; `fallback` when it is absent or null.
bool bool_member(const json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

// A Sequence's steps (nested Sequences flattened), a single step, or nothing for null.
void flatten(const json& j, const char* list_key, std::vector<const json*>* out) {
  if (j.is_null()) return;
  if (type_of(j) == "Sequence" && j.contains(list_key) && j[list_key].is_array()) {
    for (const json& step : j[list_key]) flatten(step, list_key, out);
    return;
  }
  out->push_back(&j);
}

// How the file spells a member, for "found ..." in messages (long ones cut).
std::string spelled(const json& j) {
  std::string text = j.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 200) text = text.substr(0, 200) + "...";
  return text;
}

Status refuse(const JsonComponent& c, const std::string& what, const std::string& expected) {
  return Status::error(c.where + ": " + c.name + " " + what + " is not supported: kvlm reads " +
                       expected + "; found " + spelled(c.value));
}

// A Replace step's {"String": s} pattern; nullopt for a Regex (or anything else).
std::optional<std::string> string_pattern(const json& step) {
  auto it = step.find("pattern");
  if (it == step.end() || !it->is_object()) return std::nullopt;
  return string_member(*it, "String");
}

// PCRE2 reads a character escaped with a backslash as itself when it is not a letter or digit,
// so escaping every other ASCII character makes a String pattern literal.
std::string escape_literal(std::string_view s) {
  std::string out;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    const bool word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (u < 0x80 && !word && u >= 0x20) out += '\\';
    out += c;
  }
  return out;
}

constexpr char kByteLevelExpected[] =
    "ByteLevel (GPT-2's: add_prefix_space false, use_regex true) or a Sequence of Split (a "
    "Regex, behavior \"Isolated\", invert false) and ByteLevel (add_prefix_space false, "
    "use_regex false), as Llama 3's";

constexpr char kNormalizerExpected[] =
    "a SentencePiece-style normalizer: null, or Prepend(\"▁\") and Replace(String \" \" -> \"▁\") "
    "alone or in a Sequence";

constexpr char kDecoderExpected[] =
    "a SentencePiece-style decoder: Replace (String patterns), ByteFallback, Fuse, Strip (after "
    "Fuse) and Metaspace, alone or in a Sequence";

// "always", "first" or "never" from prepend_scheme, or from the older add_prefix_space.
std::optional<SentencePieceNormalizer::Prepend> prepend_scheme(const json& metaspace) {
  using P = SentencePieceNormalizer::Prepend;
  if (auto scheme = string_member(metaspace, "prepend_scheme")) {
    if (*scheme == "always") return P::kAlways;
    if (*scheme == "first") return P::kFirst;
    if (*scheme == "never") return P::kNever;
    return std::nullopt;
  }
  return bool_member(metaspace, "add_prefix_space", true) ? P::kAlways : P::kNever;
}

}  // namespace

bool uses_metaspace(const JsonComponent& normalizer, const JsonComponent& pre_tokenizer) {
  std::vector<const json*> steps;
  flatten(normalizer.value, "normalizers", &steps);
  for (const json* step : steps) {
    const std::string type = type_of(*step);
    if (type == "Prepend" || (type == "Replace" && string_pattern(*step) == " ")) return true;
  }
  steps.clear();
  flatten(pre_tokenizer.value, "pretokenizers", &steps);
  for (const json* step : steps) {
    if (type_of(*step) == "Metaspace") return true;
  }
  return false;
}

Result<std::string> read_byte_level_pattern(const JsonComponent& normalizer,
                                            const JsonComponent& pre_tokenizer) {
  if (!normalizer.value.is_null()) {
    return refuse(normalizer, quote(type_of(normalizer.value)),
                  "byte-level BPE files without a normalizer (GPT-2's, Llama 3's)");
  }
  std::vector<const json*> steps;
  flatten(pre_tokenizer.value, "pretokenizers", &steps);
  auto refuse_pre = [&](const std::string& why) {
    const std::string type = type_of(pre_tokenizer.value);
    return refuse(pre_tokenizer, (type.empty() ? std::string("null") : quote(type)) + why,
                  kByteLevelExpected);
  };
  if (steps.empty()) return refuse_pre("");
  const json& last = *steps.back();
  if (type_of(last) != "ByteLevel") return refuse_pre("");
  if (bool_member(last, "add_prefix_space", false)) return refuse_pre(" with add_prefix_space");
  const bool use_regex = bool_member(last, "use_regex", true);
  if (steps.size() == 1) {
    if (!use_regex) return refuse_pre(" without use_regex (and no Split before it)");
    return std::string();  // GPT-2's pattern
  }
  if (steps.size() != 2 || type_of(*steps[0]) != "Split") return refuse_pre("");
  if (use_regex) return refuse_pre(" with a Split and a ByteLevel that splits again (use_regex)");
  const json& split = *steps[0];
  if (string_member(split, "behavior") != "Isolated" || bool_member(split, "invert", false)) {
    return refuse_pre(" with a Split whose behavior is not \"Isolated\" (or inverted)");
  }
  auto pattern = split.find("pattern");
  if (pattern != split.end() && pattern->is_object()) {
    if (auto regex = string_member(*pattern, "Regex")) return *regex;
    if (auto literal = string_member(*pattern, "String")) return escape_literal(*literal);
  }
  return refuse_pre(" with a Split without a Regex or String pattern");
}

Result<SentencePieceNormalizer> read_sentencepiece_normalizer(const JsonComponent& normalizer,
                                                              const JsonComponent& pre_tokenizer) {
  SentencePieceNormalizer out;
  std::vector<const json*> steps;
  flatten(normalizer.value, "normalizers", &steps);
  for (const json* step : steps) {
    const std::string type = type_of(*step);
    SentencePieceNormalizer::Step s;
    if (type == "Prepend" && string_member(*step, "prepend")) {
      s.prepend = true;
      s.text = *string_member(*step, "prepend");
    } else if (type == "Replace" && string_pattern(*step) && !string_pattern(*step)->empty() &&
               string_member(*step, "content")) {
      s.from = *string_pattern(*step);
      s.text = *string_member(*step, "content");
    } else {
      return refuse(normalizer, "step " + quote(type), kNormalizerExpected);
    }
    out.steps.push_back(std::move(s));
  }
  steps.clear();
  flatten(pre_tokenizer.value, "pretokenizers", &steps);
  if (steps.empty()) return out;
  const json& m = *steps[0];
  const auto scheme = prepend_scheme(m);
  const auto replacement = string_member(m, "replacement");
  if (steps.size() != 1 || type_of(m) != "Metaspace" || !scheme || !replacement ||
      replacement->empty()) {
    return refuse(pre_tokenizer, quote(type_of(pre_tokenizer.value)),
                  "a SentencePiece-style pre_tokenizer: null, or Metaspace with a replacement "
                  "and prepend_scheme \"always\", \"first\" or \"never\"");
  }
  out.replacement = *replacement;
  out.prepend = *scheme;
  out.split = bool_member(m, "split", true);
  return out;
}

Result<SentencePieceDecoder> read_sentencepiece_decoder(const JsonComponent& decoder) {
  using Kind = SentencePieceDecoder::Step::Kind;
  SentencePieceDecoder out;
  std::vector<const json*> steps;
  flatten(decoder.value, "decoders", &steps);
  if (steps.empty()) return refuse(decoder, "null", kDecoderExpected);
  bool fused = false, stripped = false;
  for (const json* step : steps) {
    const std::string type = type_of(*step);
    if (stripped) return refuse(decoder, "step " + quote(type) + " after Strip", kDecoderExpected);
    SentencePieceDecoder::Step s;
    if (type == "Replace" && string_pattern(*step) && string_member(*step, "content")) {
      s.kind = Kind::kReplace;
      s.from = *string_pattern(*step);
      s.to = *string_member(*step, "content");
    } else if (type == "ByteFallback") {
      s.kind = Kind::kByteFallback;
    } else if (type == "Metaspace" && string_member(*step, "replacement") &&
               prepend_scheme(*step)) {
      s.kind = Kind::kMetaspace;
      s.from = *string_member(*step, "replacement");
      s.to = " ";
      s.drop_in_first = *prepend_scheme(*step) != SentencePieceNormalizer::Prepend::kNever;
    } else if (type == "Fuse") {
      fused = true;
      continue;
    } else if (type == "Strip") {
      const auto content = string_member(*step, "content");
      auto count = [&](const char* key) {
        auto it = step->find(key);
        return it != step->end() && it->is_number_unsigned() ? it->get<int>() : -1;
      };
      if (!fused || !content || content->size() != 1 || count("start") < 0 || count("stop") < 0)
        return refuse(decoder, "step \"Strip\" (before Fuse, or not one ASCII character)",
                      kDecoderExpected);
      out.strip_char = (*content)[0];
      out.strip_start = count("start");
      out.strip_stop = count("stop");
      stripped = true;
      continue;
    } else {
      return refuse(decoder, "step " + quote(type), kDecoderExpected);
    }
    if (fused) return refuse(decoder, "step " + quote(type) + " after Fuse", kDecoderExpected);
    out.steps.push_back(std::move(s));
  }
  return out;
}

std::optional<TemplateBos> read_template_bos(const JsonComponent& post_processor) {
  std::vector<const json*> steps;
  flatten(post_processor.value, "processors", &steps);
  for (const json* step : steps) {
    if (type_of(*step) != "TemplateProcessing") continue;
    auto single = step->find("single");
    if (single == step->end() || !single->is_array()) return std::nullopt;
    std::vector<std::string> before;  // the special tokens before the text
    for (const json& item : *single) {
      if (item.contains("Sequence")) break;
      auto special = item.find("SpecialToken");
      if (special == item.end() || !special->is_object()) return std::nullopt;
      auto name = string_member(*special, "id");
      if (!name) return std::nullopt;
      before.push_back(*name);
    }
    if (before.size() != 1) return std::nullopt;
    TemplateBos bos{.token = before[0], .id = std::nullopt};
    auto tokens = step->find("special_tokens");
    if (tokens != step->end() && tokens->is_object()) {
      auto token = tokens->find(bos.token);
      if (token != tokens->end() && token->is_object()) {
        auto ids = token->find("ids");
        if (ids != token->end() && ids->is_array() && ids->size() == 1 &&
            (*ids)[0].is_number_integer())
          bos.id = (*ids)[0].get<int64_t>();
      }
    }
    return bos;
  }
  return std::nullopt;
}

}  // namespace kvlm
