// LoadedModel: a model, its tokenizer, and the conventions decided from both (BOS, end ids,
// llama2.c's run.c rules), so every front end generates the same way.
#include <algorithm>

#include "kvlm/engine.h"
#include "model/loader.h"
#include "tokenizer/llama2c_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace kvlm {

namespace {

Result<std::unique_ptr<Tokenizer>> find_tokenizer(const ModelSource& source) {
  if (!source.tokenizer_path.empty()) return load_tokenizer(source.tokenizer_path);
  auto own = load_tokenizer(source.path);  // the model folder's own files, if any
  if (own) return own;
  return std::unique_ptr<Tokenizer>();  // ids-only use; text prompts are refused later
}

}  // namespace

Result<std::shared_ptr<LoadedModel>> LoadedModel::load(const ModelSource& source) {
  KVLM_ASSIGN_OR_RETURN(LoadOptions options, load_options_for_weights(source.weights));
  options.n_threads = source.n_threads;
  KVLM_ASSIGN_OR_RETURN(std::shared_ptr<Model> model, load_model(source.path, options));
  KVLM_ASSIGN_OR_RETURN(std::shared_ptr<const Tokenizer> tokenizer, find_tokenizer(source));
  return from_parts(std::move(model), std::move(tokenizer));
}

Result<std::shared_ptr<LoadedModel>> LoadedModel::from_parts(
    std::shared_ptr<Model> model, std::shared_ptr<const Tokenizer> tokenizer) {
  if (!model) return Status::error("no model given");
  const ModelConfig& config = model->config();
  if (tokenizer && tokenizer->vocab_size() > config.n_vocab)
    return Status::error(tokenizer->source() + ": the tokenizer has " +
                         std::to_string(tokenizer->vocab_size()) + " tokens but the model only " +
                         std::to_string(config.n_vocab));
  std::shared_ptr<LoadedModel> loaded(new LoadedModel());
  loaded->run_c_ = dynamic_cast<const Llama2cTokenizer*>(tokenizer.get()) != nullptr;
  if (loaded->run_c_) {
    loaded->end_ids_ = {Llama2cTokenizer::kBos};  // run.c stops when the model produces BOS
  } else if (!config.eos_token_ids.empty()) {
    loaded->end_ids_ = config.eos_token_ids;  // every one a Llama 3 config lists
  } else if (config.eos_token_id >= 0) {
    loaded->end_ids_ = {config.eos_token_id};
  }
  loaded->model_ = std::move(model);
  loaded->tokenizer_ = std::move(tokenizer);
  return loaded;
}

int LoadedModel::n_ctx() const {
  return model_->config().n_ctx;
}
int LoadedModel::n_vocab() const {
  return model_->config().n_vocab;
}

Result<std::vector<int32_t>> LoadedModel::encode_prompt(const std::string& text,
                                                        bool allow_special) const {
  if (!tokenizer_)
    return Status::error(
        "a text prompt needs a tokenizer: the model folder has none, so pass "
        "--tokenizer PATH (or give token ids)");
  if (run_c_) {  // as run.c: BOS first, never special tokens
    return static_cast<const Llama2cTokenizer&>(*tokenizer_)
        .encode(text, /*bos=*/true,
                /*eos=*/false);
  }
  // try_encode: a tokenizer.json pattern PCRE2 gives up on is an error, not a mis-split.
  Result<std::vector<int32_t>> encoded = tokenizer_->try_encode(text, allow_special);
  if (!encoded) return encoded.status();
  std::vector<int32_t> ids = std::move(encoded.value());
  // Tokenizers whose post-processor puts BOS first (Hugging Face Llama files) get it here, as
  // transformers' tokenizer(text) does.
  if (tokenizer_->add_bos() && tokenizer_->bos_id()) ids.insert(ids.begin(), *tokenizer_->bos_id());
  // An empty prompt starts from the beginning-of-text token (GPT-2: <|endoftext|>), as
  // OpenAI's unconditional samples do.
  const int bos = model_->config().bos_token_id;
  if (ids.empty() && bos >= 0) ids.push_back(bos);
  return ids;
}

Result<std::string> LoadedModel::display_text(const Completion& completion) const {
  if (!run_c_ || !tokenizer_) return completion.text;
  // run.c prints the prompt and the new text together, then "\n".
  std::vector<int32_t> all = completion.prompt_ids;
  all.insert(all.end(), completion.ids.begin(), completion.ids.end());
  return static_cast<const Llama2cTokenizer&>(*tokenizer_).run_c_output(all);
}

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kEos:
      return "eos";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kError:
      return "error";
  }
  return "none";
}

}  // namespace kvlm
