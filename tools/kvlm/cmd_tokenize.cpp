// kvlm tokenize / detokenize: text <-> token ids with a model's tokenizer.
//   kvlm tokenize   (--model DIR | --tokenizer PATH) [--special] [--json]   text on stdin
//   kvlm detokenize (--model DIR | --tokenizer PATH)                          ids on stdin
// Text is read and written as raw bytes, so `kvlm tokenize ... | kvlm detokenize ...` gives back
// exactly the input. The tokenizer itself lives in src/tokenizer.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_common.h"
#include "commands.h"
#include "tokenizer/tokenizer.h"

namespace kvlm::cli {
namespace {

struct TokenizerFlags {
  std::string model;      // --model DIR
  std::string tokenizer;  // --tokenizer PATH
};

void add_tokenizer_flags(CLI::App* cmd, TokenizerFlags* flags) {
  cmd->add_option("--model", flags->model,
                  "Model folder; its own tokenizer files are used (tokenizer.json, "
                  "vocab.json + merges.txt, or encoder.json + vocab.bpe)");
  cmd->add_option("--tokenizer", flags->tokenizer,
                  "A folder holding tokenizer files, or a tokenizer.json file");
}

Result<std::unique_ptr<Tokenizer>> load_from_flags(const TokenizerFlags& flags) {
  if (flags.model.empty() == flags.tokenizer.empty()) {
    return Status::error("give exactly one of --model DIR or --tokenizer PATH");
  }
  if (!flags.model.empty()) {
    Result<std::unique_ptr<Tokenizer>> tok = load_tokenizer(flags.model);
    if (!tok) return Status::error("--model: " + tok.message());
    return tok;
  }
  Result<std::unique_ptr<Tokenizer>> tok = load_tokenizer(flags.tokenizer);
  if (!tok) return Status::error("--tokenizer: " + tok.message());
  return tok;
}

std::string read_stdin() {
  std::string text;
  char buf[1 << 16];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0) text.append(buf, n);
  return text;
}

// Ids separated by commas and/or whitespace, or the {"ids": [...]} that `tokenize --json` prints
// (or a bare JSON array). Empty input is no ids.
Result<std::vector<int32_t>> parse_ids(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\r\n,");
  if (first == std::string::npos) return std::vector<int32_t>{};
  if (text[first] != '{' && text[first] != '[') return parse_id_list(text, "standard input");
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  const nlohmann::json* ids = &doc;
  if (doc.is_object() && doc.contains("ids")) ids = &doc["ids"];
  if (!ids->is_array()) {
    return Status::error(
        "standard input: expected ids separated by commas or spaces, a JSON array, or "
        "{\"ids\": [...]}");
  }
  std::vector<int32_t> out;
  for (const nlohmann::json& id : *ids) {
    if (!id.is_number_integer() || id.get<int64_t>() < INT32_MIN || id.get<int64_t>() > INT32_MAX) {
      return Status::error("standard input: expected integer token ids, found " + id.dump());
    }
    out.push_back(id.get<int32_t>());
  }
  return out;
}

int run_tokenize(const TokenizerFlags& flags, bool special, bool json) {
  Result<std::unique_ptr<Tokenizer>> tok = load_from_flags(flags);
  if (!tok) return fail(tok.status());
  const Result<std::vector<int32_t>> encoded = tok.value()->try_encode(read_stdin(), special);
  if (!encoded) return fail(encoded.status());
  const std::vector<int32_t>& ids = encoded.value();
  if (json) {
    std::printf("%s\n", nlohmann::json{{"ids", ids}}.dump().c_str());
  } else {
    std::printf("%s\n", join_ids(ids, " ").c_str());
  }
  return 0;
}

int run_detokenize(const TokenizerFlags& flags) {
  Result<std::unique_ptr<Tokenizer>> tok = load_from_flags(flags);
  if (!tok) return fail(tok.status());
  Result<std::vector<int32_t>> ids = parse_ids(read_stdin());
  if (!ids) return fail(ids.status());
  Result<std::string> text = tok.value()->decode(ids.value());
  if (!text) return fail(text.status());
  // Raw bytes, no newline added: the text may end inside a character, or without a newline.
  std::fwrite(text.value().data(), 1, text.value().size(), stdout);
  return 0;
}

}  // namespace

void add_tokenize_command(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand(
      "tokenize", "Encode standard input to token ids (space separated, or JSON with --json)");
  auto flags = std::make_shared<TokenizerFlags>();
  auto special = std::make_shared<bool>(false);
  auto json = std::make_shared<bool>(false);
  add_tokenizer_flags(cmd, flags.get());
  cmd->add_flag("--special", *special,
                "Encode special-token text such as <|endoftext|> as that token (default: as "
                "ordinary text, like OpenAI's encoder)");
  cmd->add_flag("--json", *json, "Print {\"ids\": [...]}");
  cmd->callback([=] { *exit_code = run_tokenize(*flags, *special, *json); });
}

void add_detokenize_command(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand(
      "detokenize",
      "Decode token ids from standard input (separated by commas or whitespace, or the JSON "
      "that tokenize --json prints) and write the text");
  auto flags = std::make_shared<TokenizerFlags>();
  add_tokenizer_flags(cmd, flags.get());
  cmd->callback([=] { *exit_code = run_detokenize(*flags); });
}

}  // namespace kvlm::cli
