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
  auto id = f.get_uint(key);
  if (!id) return id.status();
  if (id.value() >= n_vocab)
    return Status::error(f.where_key(key) + ": token id " + std::to_string(id.value()) +
                         " is outside the vocabulary of " + std::to_string(n_vocab) + " tokens");
  return std::optional<int32_t>(static_cast<int32_t>(id.value()));
}

// An optional array that must have one entry per token.
Result<const GgufValue*> per_token(const GgufFile& f, const char* key, GgufType type,
                                   size_t n_vocab) {
  if (!f.find(key)) return static_cast<const GgufValue*>(nullptr);
  auto a = f.get_array(key, type);
  if (!a) return a.status();
  if (a.value()->count != n_vocab)
    return Status::error(f.where_key(key) + ": " + std::to_string(a.value()->count) +
                         " entries, expected one per token (" + std::to_string(n_vocab) +
                         ", the length of tokenizer.ggml.tokens)");
  return a.value();
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
  auto merges = f.get_array("tokenizer.ggml.merges", GgufType::kString);
  if (!merges) return merges.status();
  std::string joined;
  for (size_t r = 0; r < merges.value()->strings.size(); ++r) {
    const std::string_view line = merges.value()->strings[r];
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
  auto types = per_token(f, "tokenizer.ggml.token_type", GgufType::kI32, n);
  if (!types) return types.status();
  if (types.value())
    for (size_t i = 0; i < n; ++i) {
      const int64_t type = gguf_array_int(*types.value(), i);
      if (type == 3 || type == 4)
        m.special_ids.push_back(static_cast<int32_t>(i));  // control, user
    }
  auto bos = token_id(f, "tokenizer.ggml.bos_token_id", n);
  auto eos = token_id(f, "tokenizer.ggml.eos_token_id", n);
  if (!bos) return bos.status();
  if (!eos) return eos.status();
  m.bos_id = bos.value();
  m.eos_id = eos.value();
  std::string_view pre = "default";
  if (f.find("tokenizer.ggml.pre")) {
    auto p = f.get_string("tokenizer.ggml.pre");
    if (!p) return p.status();
    pre = p.value();
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
    auto add = f.get_bool("tokenizer.ggml.add_bos_token");
    if (!add) return add.status();
    m.add_bos = add.value();
  }
  auto bpe = ByteLevelBpe::create(std::move(m));
  if (!bpe) return bpe.status();
  return std::unique_ptr<Tokenizer>(std::move(bpe.value()));
}

Result<std::unique_ptr<Tokenizer>> sentencepiece(const GgufFile& f, const GgufValue& tokens) {
  const size_t n = tokens.strings.size();
  auto scores = per_token(f, "tokenizer.ggml.scores", GgufType::kF32, n);
  if (!scores) return scores.status();
  if (!scores.value()) return Status::error(f.source() + ": missing key 'tokenizer.ggml.scores'");
  auto types = per_token(f, "tokenizer.ggml.token_type", GgufType::kI32, n);
  if (!types) return types.status();
  // run.c's conventions, which the SentencePiece encoder here follows.
  const std::pair<const char*, int32_t> fixed[] = {{"tokenizer.ggml.bos_token_id", 1},
                                                   {"tokenizer.ggml.eos_token_id", 2}};
  for (const auto& [key, expected] : fixed) {
    auto id = token_id(f, key, n);
    if (!id) return id.status();
    if (id.value() && *id.value() != expected)
      return Status::error(f.where_key(key) + ": expected " + std::to_string(expected) +
                           " (SentencePiece vocabularies kvlm reads keep <unk>, <s>, </s> at 0, 1, "
                           "2), found " +
                           std::to_string(*id.value()));
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
    score_values.push_back(static_cast<float>(gguf_array_float(*scores.value(), i)));
  }
  auto t = Llama2cTokenizer::from_pieces(std::move(pieces), std::move(score_values),
                                         f.source() + " (tokenizer.ggml)");
  if (!t) return t.status();
  if (f.find("tokenizer.ggml.add_bos_token")) {
    auto add = f.get_bool("tokenizer.ggml.add_bos_token");
    if (!add) return add.status();
    if (!add.value())
      return Status::error(f.where_key("tokenizer.ggml.add_bos_token") +
                           ": expected true for a SentencePiece vocabulary (run.c puts BOS first)");
  }
  return std::unique_ptr<Tokenizer>(std::move(t.value()));
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> gguf_tokenizer(const GgufFile& f) {
  auto model = f.get_string("tokenizer.ggml.model");
  if (!model) return model.status();
  auto tokens = f.get_array("tokenizer.ggml.tokens", GgufType::kString);
  if (!tokens) return tokens.status();
  if (tokens.value()->strings.empty() || tokens.value()->strings.size() > INT32_MAX)
    return Status::error(f.where_key("tokenizer.ggml.tokens") +
                         ": expected 1 to 2^31-1 tokens, found " +
                         std::to_string(tokens.value()->strings.size()));
  if (model.value() == "gpt2") return byte_level(f, *tokens.value());
  if (model.value() == "llama") return sentencepiece(f, *tokens.value());
  return Status::error(f.where_key("tokenizer.ggml.model") + ": \"" + std::string(model.value()) +
                       "\" is not supported (supported: gpt2, llama)");
}

Result<std::unique_ptr<Tokenizer>> load_gguf_tokenizer(const std::string& path) {
  auto file = GgufFile::open(path);
  if (!file) return file.status();
  return gguf_tokenizer(file.value());
}

}  // namespace kvlm
