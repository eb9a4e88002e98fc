#include "tokenizer/tokenizer_json.h"

#include "tokenizer/bpe_files.h"
#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/sentencepiece_bpe.h"
#include "tokenizer/tokenizer_json_pipeline.h"
#include "tokenizer/vocab_json.h"
#include "util/mapped_file.h"

namespace kvlm {
namespace {

constexpr char kModelTypeExpected[] =
    "expected \"BPE\" (kvlm reads byte-level BPE such as GPT-2's and Llama 3's, and "
    "SentencePiece-style BPE with byte_fallback such as Llama 2's and Mistral's)";

// Everything tokenizer.json says that kvlm uses, read in one pass before anything is checked,
// because JSON objects may list their members in any order.
struct TokenizerJson {
  VocabEntries vocab;  // model.vocab, as written
  bool has_vocab = false;
  std::vector<RawMerge> merges;
  bool has_merges = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
  struct AddedToken {
    int64_t id = -1;
    std::string content;
    bool special = false;
    size_t offset = 0;
  };
  std::vector<AddedToken> added;
  JsonComponent normalizer{.name = "normalizer", .value = nullptr, .where = {}};
  JsonComponent pre_tokenizer{.name = "pre_tokenizer", .value = nullptr, .where = {}};
  JsonComponent decoder{.name = "decoder", .value = nullptr, .where = {}};
  JsonComponent post_processor{.name = "post_processor", .value = nullptr, .where = {}};
};

// A true/false member that may also be null (false).
Status read_flag(JsonCursor& json, bool* value) {
  if (json.consume_literal("null")) return Status::ok();
  Result<bool> b = json.read_bool();
  KVLM_RETURN_IF_ERROR(b);
  *value = b.value();
  return Status::ok();
}

Status read_model(JsonCursor& json, TokenizerJson* tj) {
  return json.read_object([&](const std::string& key, size_t at) -> Status {
    if (key == "type") {
      Result<std::string> type = json.read_string();
      KVLM_RETURN_IF_ERROR(type);
      if (type.value() != "BPE") {
        return json.error_at(at,
                             "model.type is " + quote(type.value()) + ", " + kModelTypeExpected);
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
          [&](size_t, size_t element_at) { return read_merge(json, element_at, &tj->merges); });
    }
    if (key == "byte_fallback") return read_flag(json, &tj->byte_fallback);
    if (key == "ignore_merges") return read_flag(json, &tj->ignore_merges);
    if (key == "continuing_subword_prefix" || key == "end_of_word_suffix") {
      if (json.consume_literal("null")) return Status::ok();
      Result<std::string> affix = json.read_string();
      KVLM_RETURN_IF_ERROR(affix);
      if (!affix.value().empty()) {
        return json.error_at(at, "model." + key + " is " + quote(affix.value()) +
                                     ", expected \"\" or null (GPT-2's and Llama's BPE have none)");
      }
      return Status::ok();
    }
    if (key == "dropout") {
      if (json.consume_literal("null")) return Status::ok();
      const size_t value_at = json.offset();
      KVLM_RETURN_IF_ERROR(json.skip_value());
      const std::string_view written = json.text().substr(value_at, json.offset() - value_at);
      if (written.find_first_not_of("0.eE+-") != std::string_view::npos) {
        return json.error_at(at, "model.dropout is " + std::string(written) +
                                     ", expected null or 0 (kvlm encodes deterministically)");
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

// Keeps a pipeline member's JSON for tokenizer_json_pipeline.h to read.
Status read_component(JsonCursor& json, size_t at, JsonComponent* c) {
  const size_t begin = json.offset();
  KVLM_RETURN_IF_ERROR(json.skip_value());
  const std::string_view written = json.text().substr(begin, json.offset() - begin);
  c->value = nlohmann::ordered_json::parse(written, nullptr, /*allow_exceptions=*/false);
  if (c->value.is_discarded()) return json.error_at(begin, "invalid JSON in " + c->name);
  c->where = json.where(at);
  return Status::ok();
}

Status read_tokenizer_json(JsonCursor& json, TokenizerJson* tj) {
  return json.read_object([&](const std::string& key, size_t at) -> Status {
    if (key == "model") return read_model(json, tj);
    if (key == "added_tokens") return read_added_tokens(json, tj);
    for (JsonComponent* c :
         {&tj->normalizer, &tj->pre_tokenizer, &tj->decoder, &tj->post_processor}) {
      if (key == c->name) return read_component(json, at, c);
    }
    return json.skip_value();
  });
}

// Adds the added tokens to the vocabulary (`spelled` turns their raw text into the vocabulary's
// spelling); one may repeat a vocabulary entry, but only with the same text.
template <typename Spell>
Status add_added_tokens(const JsonCursor& json, Spell&& spelled, TokenizerJson* tj) {
  for (const TokenizerJson::AddedToken& t : tj->added) {
    const auto id = static_cast<size_t>(t.id);
    if (id < tj->vocab.present.size() && tj->vocab.present[id]) {
      if (tj->vocab.text[id] != spelled(t.content)) {
        return json.error_at(t.offset, "added token " + quote(t.content) + " has id " +
                                           std::to_string(id) + ", which model.vocab gives to " +
                                           quote(tj->vocab.text[id]));
      }
      continue;
    }
    tj->vocab.add(spelled(t.content), id, t.offset);
  }
  return Status::ok();
}

Result<std::vector<MergeRule>> resolve_merges(const JsonCursor& json, const TokenizerJson& tj,
                                              const std::string& path) {
  std::vector<MergeRule> rules;
  rules.reserve(tj.merges.size());
  for (const RawMerge& m : tj.merges) {
    Result<MergeRule> rule = resolve_merge(m.left, m.right, tj.vocab, path + " model.vocab",
                                           [&] { return json.where(m.offset); });
    KVLM_RETURN_IF_ERROR(rule);
    rules.push_back(rule.value());
  }
  return rules;
}

// The id of the first of `names` that is a special added token.
std::optional<int32_t> find_special(const TokenizerJson& tj,
                                    std::initializer_list<const char*> names) {
  for (const char* name : names) {
    for (const TokenizerJson::AddedToken& t : tj.added) {
      if (t.special && t.content == name) return static_cast<int32_t>(t.id);
    }
  }
  return std::nullopt;
}

// BOS from the post-processor's template (then prompts start with it), else by its usual name.
void set_bos(const TokenizerJson& tj, std::optional<int32_t>* bos_id, bool* add_bos) {
  if (std::optional<TemplateBos> bos = read_template_bos(tj.post_processor)) {
    std::optional<int32_t> id = find_special(tj, {bos->token.c_str()});
    if (!id && bos->id) id = static_cast<int32_t>(*bos->id);
    if (id) {
      *bos_id = id;
      *add_bos = true;
      return;
    }
  }
  if (std::optional<int32_t> id = find_special(tj, {"<s>", "<|begin_of_text|>"})) *bos_id = id;
}

Result<std::unique_ptr<Tokenizer>> make_byte_level(TokenizerJson& tj, const JsonCursor& json,
                                                   const std::string& path) {
  Result<std::string> pattern = read_byte_level_pattern(tj.normalizer, tj.pre_tokenizer);
  KVLM_RETURN_IF_ERROR(pattern);
  // Added tokens hold raw text; the vocabulary spells bytes in GPT-2's alphabet.
  KVLM_RETURN_IF_ERROR(add_added_tokens(json, bytes_to_byte_level, &tj));
  BpeModel model;
  model.source = path;
  model.pretokenizer_pattern = std::move(pattern).value();
  model.ignore_merges = tj.ignore_merges;
  KVLM_RETURN_IF_ERROR(byte_level_vocab_to_model(tj.vocab, json, &model));
  Result<std::vector<MergeRule>> merges = resolve_merges(json, tj, path);
  KVLM_RETURN_IF_ERROR(merges);
  model.merges = std::move(merges).value();
  for (const TokenizerJson::AddedToken& t : tj.added) {
    if (t.special) model.special_ids.push_back(static_cast<int32_t>(t.id));
  }
  set_end_of_text(tj.vocab, &model);  // GPT-2's <|endoftext|>
  if (std::optional<int32_t> eos = find_special(tj, {"<|end_of_text|>"})) model.eos_id = eos;
  set_bos(tj, &model.bos_id, &model.add_bos);
  Result<std::unique_ptr<ByteLevelBpe>> bpe = ByteLevelBpe::create(std::move(model));
  KVLM_RETURN_IF_ERROR(bpe);
  return std::unique_ptr<Tokenizer>(std::move(bpe).value());
}

Result<std::unique_ptr<Tokenizer>> make_sentencepiece(TokenizerJson& tj, const JsonCursor& json,
                                                      const std::string& path) {
  if (!tj.byte_fallback) {
    const JsonComponent& c = tj.pre_tokenizer.value.is_null() ? tj.normalizer : tj.pre_tokenizer;
    const nlohmann::ordered_json type =
        c.value.is_object() ? c.value.value("type", nlohmann::ordered_json()) : c.value;
    return Status::error(c.where + ": " + c.name + " " + type.dump() +
                         " is not supported without model.byte_fallback: kvlm reads "
                         "SentencePiece-style BPE (\"▁\" for spaces) only with byte fallback, as "
                         "Llama 2's and Mistral's have; found byte_fallback false");
  }
  Result<SentencePieceNormalizer> normalizer =
      read_sentencepiece_normalizer(tj.normalizer, tj.pre_tokenizer);
  KVLM_RETURN_IF_ERROR(normalizer);
  Result<SentencePieceDecoder> decoder = read_sentencepiece_decoder(tj.decoder);
  KVLM_RETURN_IF_ERROR(decoder);
  KVLM_RETURN_IF_ERROR(add_added_tokens(
      json, [](const std::string& s) { return s; }, &tj));
  SentencePieceModel model;
  model.source = path;
  model.pieces = tj.vocab.text;
  model.present = tj.vocab.present;
  Result<std::vector<MergeRule>> merges = resolve_merges(json, tj, path);
  KVLM_RETURN_IF_ERROR(merges);
  model.merges = std::move(merges).value();
  for (const TokenizerJson::AddedToken& t : tj.added) {
    if (t.special) model.special_ids.push_back(static_cast<int32_t>(t.id));
  }
  model.ignore_merges = tj.ignore_merges;
  model.normalizer = std::move(normalizer).value();
  model.decoder = std::move(decoder).value();
  model.eos_id = find_special(tj, {"</s>"});
  set_bos(tj, &model.bos_id, &model.add_bos);
  Result<std::unique_ptr<SentencePieceBpe>> bpe = SentencePieceBpe::create(std::move(model));
  KVLM_RETURN_IF_ERROR(bpe);
  return std::unique_ptr<Tokenizer>(std::move(bpe).value());
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> load_tokenizer_json(const std::string& path) {
  Result<std::string> text = read_text_file(path);
  KVLM_RETURN_IF_ERROR(text);
  return parse_tokenizer_json(text.value(), path);
}

Result<std::unique_ptr<Tokenizer>> parse_tokenizer_json(std::string_view text,
                                                        const std::string& path) {
  JsonCursor json(text, path);
  TokenizerJson tj;
  KVLM_RETURN_IF_ERROR(read_tokenizer_json(json, &tj));
  if (!json.at_end()) {
    return json.error_at(json.offset(), "invalid JSON: unexpected text after the top-level object");
  }
  if (!tj.has_vocab) {
    return Status::error(path + ": no model.vocab (a BPE tokenizer.json needs model.vocab and " +
                         "model.merges)");
  }
  if (!tj.has_merges) {
    return Status::error(path + ": no model.merges (a BPE tokenizer.json needs model.vocab and " +
                         "model.merges)");
  }
  for (JsonComponent* c : {&tj.normalizer, &tj.pre_tokenizer, &tj.decoder, &tj.post_processor}) {
    if (c->where.empty()) c->where = path + " (no " + c->name + " member)";
  }
  if (tj.byte_fallback || uses_metaspace(tj.normalizer, tj.pre_tokenizer)) {
    return make_sentencepiece(tj, json, path);
  }
  return make_byte_level(tj, json, path);
}

}  // namespace kvlm
