#include "model/gguf_tokenizer.h"

#include <unordered_map>

#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/llama2c_tokenizer.h"

namespace kvlm {

namespace {

// Llama 3's split pattern (its tokenizer.json's Split pre-tokenizer; llama.cpp's "llama-bpe").
constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// An optional special-token id, in range of the vocabulary.
Result<std::optional<int32_t>> token_id(const GgufFile& f, const char* key, size_t n_vocab) {
  if (!f.find(key)) return std::optional<int32_t>();
  KVLM_ASSIGN_OR_RETURN(const uint64_t id, f.get_uint(key));
  if (id >= n_vocab)
    return Status::error(f.where_key(key) + ": token id " + std::to_string(id) +
                         " is outside the vocabulary of " + std::to_string(n_vocab) + " tokens");
  return std::optional<int32_t>(static_cast<int32_t>(id));
}

// An optional array that must have one entry per token.
Result<const GgufValue*> per_token(const GgufFile& f, const char* key, GgufType type,
                                   size_t n_vocab) {
  if (!f.find(key)) return static_cast<const GgufValue*>(nullptr);
  KVLM_ASSIGN_OR_RETURN(const GgufValue* a, f.get_array(key, type));
  if (a->count != n_vocab)
    return Status::error(f.where_key(key) + ": " + std::to_string(a->count) +
                         " entries, expected one per token (" + std::to_string(n_vocab) +
                         ", the length of tokenizer.ggml.tokens)");
  return a;
}

Result<std::unique_ptr<Tokenizer>> byte_level(const GgufFile& f, const GgufValue& tokens) {
  const size_t n = tokens.strings.size();
  BpeModel m;
  m.source = f.source() + " (tokenizer.ggml)";
  std::unordered_map<std::string_view, int32_t> ids;
  for (size_t i = 0; i < n; ++i) {
    auto bytes = byte_level_to_bytes(tokens.strings[i]);
    if (!bytes)
      return Status::error(f.where_key("tokenizer.ggml.tokens") + ": token " + std::to_string(i) +
                           ": " + bytes.message());
    m.tokens.push_back(std::move(bytes.value()));
    ids.emplace(tokens.strings[i], static_cast<int32_t>(i));  // first id wins
  }
  m.present.assign(n, true);
  KVLM_ASSIGN_OR_RETURN(const GgufValue* merges,
                        f.get_array("tokenizer.ggml.merges", GgufType::kString));
  std::string joined;
  for (size_t r = 0; r < merges->strings.size(); ++r) {
    const std::string_view line = merges->strings[r];
    const size_t space = line.find(' ');
    auto bad = [&](const std::string& why) {
      return Status::error(f.where_key("tokenizer.ggml.merges") + ": merge " + std::to_string(r) +
                           " \"" + std::string(line.substr(0, 64)) + "\" " + why);
    };
    if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos)
      return bad("is not two tokens separated by one space");
    const std::string_view left = line.substr(0, space), right = line.substr(space + 1);
    joined.assign(left);
    joined += right;
    const auto l = ids.find(left), r2 = ids.find(right), j = ids.find(joined);
    if (l == ids.end() || r2 == ids.end() || j == ids.end())
      return bad("names a token the vocabulary lacks");
    m.merges.push_back({l->second, r2->second, j->second});
  }
  KVLM_ASSIGN_OR_RETURN(const GgufValue* types,
                        per_token(f, "tokenizer.ggml.token_type", GgufType::kI32, n));
  if (types)
    for (size_t i = 0; i < n; ++i) {
      const int64_t type = gguf_array_int(*types, i);
      if (type == 3 || type == 4)
        m.special_ids.push_back(static_cast<int32_t>(i));  // control, user
    }
  KVLM_ASSIGN_OR_RETURN(m.bos_id, token_id(f, "tokenizer.ggml.bos_token_id", n));
  KVLM_ASSIGN_OR_RETURN(m.eos_id, token_id(f, "tokenizer.ggml.eos_token_id", n));
  std::string_view pre = "default";
  if (f.find("tokenizer.ggml.pre")) {
    KVLM_ASSIGN_OR_RETURN(pre, f.get_string("tokenizer.ggml.pre"));
  }
  if (pre == "llama-bpe" || pre == "llama3") {
    m.pretokenizer_pattern = kLlama3Pattern;
    m.ignore_merges = true;
    m.add_bos = true;
  } else if (pre != "gpt-2" && pre != "default") {
    return Status::error(f.where_key("tokenizer.ggml.pre") + ": pre-tokenizer \"" +
                         std::string(pre) + "\" is not supported (supported: gpt-2, default, " +
                         "llama-bpe)");
  }
  if (f.find("tokenizer.ggml.add_bos_token")) {
    KVLM_ASSIGN_OR_RETURN(m.add_bos, f.get_bool("tokenizer.ggml.add_bos_token"));
  }
  KVLM_ASSIGN_OR_RETURN(auto bpe, ByteLevelBpe::create(std::move(m)));
  return std::unique_ptr<Tokenizer>(std::move(bpe));
}

Result<std::unique_ptr<Tokenizer>> sentencepiece(const GgufFile& f, const GgufValue& tokens) {
  const size_t n = tokens.strings.size();
  KVLM_ASSIGN_OR_RETURN(const GgufValue* scores,
                        per_token(f, "tokenizer.ggml.scores", GgufType::kF32, n));
  if (!scores) return Status::error(f.source() + ": missing key 'tokenizer.ggml.scores'");
  KVLM_RETURN_IF_ERROR(per_token(f, "tokenizer.ggml.token_type", GgufType::kI32, n));
  // run.c's conventions, which the SentencePiece encoder here follows.
  const std::pair<const char*, int32_t> fixed[] = {{"tokenizer.ggml.bos_token_id", 1},
                                                   {"tokenizer.ggml.eos_token_id", 2}};
  for (const auto& [key, expected] : fixed) {
    KVLM_ASSIGN_OR_RETURN(const std::optional<int32_t> id, token_id(f, key, n));
    if (id && *id != expected)
      return Status::error(f.where_key(key) + ": expected " + std::to_string(expected) +
                           " (SentencePiece vocabularies kvlm reads keep <unk>, <s>, </s> at 0, 1, "
                           "2), found " +
                           std::to_string(*id));
  }
  std::vector<std::string> pieces;
  std::vector<float> score_values;
  pieces.reserve(n);
  score_values.reserve(n);
  const std::string_view kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space
  for (size_t i = 0; i < n; ++i) {
    std::string piece;
    const std::string_view s = tokens.strings[i];
    for (size_t k = 0; k < s.size();) {
      if (s.substr(k, 3) == kSpace) {
        piece += ' ';
        k += 3;
      } else {
        piece += s[k++];
      }
    }
    pieces.push_back(std::move(piece));
    score_values.push_back(static_cast<float>(gguf_array_float(*scores, i)));
  }
  KVLM_ASSIGN_OR_RETURN(auto t,
                        Llama2cTokenizer::from_pieces(std::move(pieces), std::move(score_values),
                                                      f.source() + " (tokenizer.ggml)"));
  if (f.find("tokenizer.ggml.add_bos_token")) {
    KVLM_ASSIGN_OR_RETURN(const bool add, f.get_bool("tokenizer.ggml.add_bos_token"));
    if (!add)
      return Status::error(f.where_key("tokenizer.ggml.add_bos_token") +
                           ": expected true for a SentencePiece vocabulary (run.c puts BOS first)");
  }
  return std::unique_ptr<Tokenizer>(std::move(t));
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> gguf_tokenizer(const GgufFile& f) {
  KVLM_ASSIGN_OR_RETURN(const std::string_view model, f.get_string("tokenizer.ggml.model"));
  KVLM_ASSIGN_OR_RETURN(const GgufValue* tokens,
                        f.get_array("tokenizer.ggml.tokens", GgufType::kString));
  if (tokens->strings.empty() || tokens->strings.size() > INT32_MAX)
    return Status::error(f.where_key("tokenizer.ggml.tokens") +
                         ": expected 1 to 2^31-1 tokens, found " +
                         std::to_string(tokens->strings.size()));
  if (model == "gpt2") return byte_level(f, *tokens);
  if (model == "llama") return sentencepiece(f, *tokens);
  return Status::error(f.where_key("tokenizer.ggml.model") + ": \"" + std::string(model) +
                       "\" is not supported (supported: gpt2, llama)");
}

Result<std::unique_ptr<Tokenizer>> load_gguf_tokenizer(const std::string& path) {
  KVLM_ASSIGN_OR_RETURN(const GgufFile file, GgufFile::open(path));
  return gguf_tokenizer(file);
}

}  // namespace kvlm
