#include "tokenizer/tokenizer.h"

#include <filesystem>
#include <functional>

#include "model/gguf_tokenizer.h"
#include "tokenizer/bpe_files.h"
#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/llama2c_tokenizer.h"
#include "tokenizer/tokenizer_json.h"

namespace kvlm {

Result<std::string> Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string text;
  for (int32_t id : ids) {
    Result<std::string_view> bytes = token_bytes(id);
    KVLM_RETURN_IF_ERROR(bytes);
    text += bytes.value();
  }
  return text;
}

namespace {

namespace fs = std::filesystem;

Result<std::unique_ptr<Tokenizer>> make_bpe(Result<BpeModel> model) {
  KVLM_RETURN_IF_ERROR(model);
  Result<std::unique_ptr<ByteLevelBpe>> bpe = ByteLevelBpe::create(std::move(model).value());
  KVLM_RETURN_IF_ERROR(bpe);
  return std::unique_ptr<Tokenizer>(std::move(bpe).value());
}

// One way to store a tokenizer: the files a folder must hold, how to load it from their paths,
// and, for a one-file format, the extension that picks it when a file is named directly. To
// support another format, add a row.
struct Format {
  std::vector<const char*> files;
  const char* file_extension;  // nullptr: only found in a folder
  std::function<Result<std::unique_ptr<Tokenizer>>(const std::vector<std::string>& paths)> load;
};

const std::vector<Format>& formats() {
  static const std::vector<Format> formats = {
      // tokenizer.json first: it is the most complete (it lists added special tokens), and it
      // says which kind of tokenizer it is (tokenizer_json.h).
      {{"tokenizer.json"}, ".json", [](const auto& p) { return load_tokenizer_json(p[0]); }},
      {{"vocab.json", "merges.txt"},
       nullptr,
       [](const auto& p) { return make_bpe(load_vocab_and_merges(p[0], p[1])); }},
      {{"encoder.json", "vocab.bpe"},
       nullptr,
       [](const auto& p) { return make_bpe(load_vocab_and_merges(p[0], p[1])); }},
      {{"tokenizer.bin"},  // llama2.c's vocabulary with scores (tok512.bin, tokenizer.bin)
       ".bin",
       [](const auto& p) -> Result<std::unique_ptr<Tokenizer>> {
         auto t = Llama2cTokenizer::load(p[0]);
         if (!t) return t.status();
         return std::unique_ptr<Tokenizer>(std::move(t.value()));
       }},
      {{"model.gguf"},  // the tokenizer a GGUF model file carries (tokenizer.ggml.*)
       ".gguf",
       [](const auto& p) { return load_gguf_tokenizer(p[0]); }},
  };
  return formats;
}

std::string describe_formats() {
  std::string out;
  for (const Format& f : formats()) {
    if (!out.empty()) out += ", or ";
    for (size_t i = 0; i < f.files.size(); ++i) out += (i ? " + " : "") + std::string(f.files[i]);
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> load_tokenizer(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) return Status::error(path + ": no such file or folder");
  if (fs::is_regular_file(st)) {
    const std::string extension = fs::path(path).extension().string();
    for (const Format& f : formats()) {
      if (f.file_extension != nullptr && extension == f.file_extension) return f.load({path});
    }
    std::string named;  // the formats a file can be named directly as
    for (const Format& f : formats()) {
      if (f.file_extension != nullptr)
        named += (named.empty() ? "" : " or ") + std::string(f.files[0]);
    }
    return Status::error(path + ": not a tokenizer file kvlm knows (expected a " + named +
                         ", or a folder holding " + describe_formats() + ")");
  }
  for (const Format& f : formats()) {
    std::vector<std::string> paths;
    for (const char* name : f.files) paths.push_back((fs::path(path) / name).string());
    size_t found = 0;
    for (const std::string& p : paths) found += fs::exists(p, ec) ? 1 : 0;
    if (found == paths.size()) return f.load(paths);
    if (found > 0) {
      // Half a pair is a mistake worth naming rather than skipping to the next format.
      for (const std::string& p : paths) {
        if (!fs::exists(p, ec)) {
          return Status::error(p + ": missing (the folder has the rest of " +
                               std::string(f.files[0]) + " + " + f.files.back() + ")");
        }
      }
    }
  }
  return Status::error(path + ": no tokenizer files found (expected " + describe_formats() + ")");
}

}  // namespace kvlm
