#include "tokenizer/bpe_files.h"

#include "tokenizer/byte_unicode.h"
#include "util/mapped_file.h"

namespace kvlm {
namespace {

constexpr char kEndOfText[] = "<|endoftext|>";

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

}  // namespace

Status byte_level_vocab_to_model(const VocabEntries& vocab, const JsonCursor& json,
                                 BpeModel* model) {
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

void set_end_of_text(const VocabEntries& vocab, BpeModel* model) {
  auto it = vocab.id_of.find(kEndOfText);
  if (it == vocab.id_of.end()) return;
  model->eos_id = it->second;
  model->bos_id = it->second;
  bool listed = false;
  for (int32_t id : model->special_ids) listed |= id == it->second;
  if (!listed) model->special_ids.push_back(it->second);
}

Result<BpeModel> load_vocab_and_merges(const std::string& vocab_path,
                                       const std::string& merges_path) {
  Result<std::string> vocab_text = read_text_file(vocab_path);
  KVLM_RETURN_IF_ERROR(vocab_text);
  Result<std::string> merges_text = read_text_file(merges_path);
  KVLM_RETURN_IF_ERROR(merges_text);
  return parse_vocab_and_merges(vocab_text.value(), vocab_path, merges_text.value(), merges_path);
}

Result<BpeModel> parse_vocab_and_merges(std::string_view vocab_text, const std::string& vocab_path,
                                        std::string_view merges_text,
                                        const std::string& merges_path) {
  JsonCursor json(vocab_text, vocab_path);
  VocabEntries vocab;
  KVLM_RETURN_IF_ERROR(read_vocab_object(json, &vocab));
  if (!json.at_end()) {
    return json.error_at(json.offset(),
                         "invalid JSON: unexpected text after the vocabulary object");
  }
  BpeModel model;
  model.source = vocab_path + " + " + merges_path;
  KVLM_RETURN_IF_ERROR(byte_level_vocab_to_model(vocab, json, &model));
  KVLM_RETURN_IF_ERROR(
      parse_merges_txt(merges_text, merges_path, vocab, vocab_path, &model.merges));
  set_end_of_text(vocab, &model);
  return model;
}

}  // namespace kvlm
