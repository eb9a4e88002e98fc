#include "model/llama2c_generate.h"

namespace kvlm {

Result<Llama2cRun> llama2c_generate(Model& model, const Llama2cTokenizer& tokenizer,
                                    std::string_view prompt, int max_new, const Parallel& par,
                                    TokenSelector select, bool use_cache) {
  if (tokenizer.vocab_size() != model.config().n_vocab)
    return Status::error(tokenizer.source() + ": the tokenizer has " +
                         std::to_string(tokenizer.vocab_size()) + " tokens but the model's vocab " +
                         "has " + std::to_string(model.config().n_vocab));
  Llama2cRun run;
  run.prompt_ids = tokenizer.encode(prompt, /*bos=*/true, /*eos=*/false);
  GenerateOptions options;
  options.max_new_tokens = max_new;
  options.use_cache = use_cache;
  options.select = std::move(select);
  options.on_token = [](int, int32_t token) { return token == Llama2cTokenizer::kBos; };
  auto result = generate(model, {run.prompt_ids}, options, par);
  if (!result) return result.status();
  run.generated_ids = std::move(result->tokens[0]);
  if (!run.generated_ids.empty() && run.generated_ids.back() == Llama2cTokenizer::kBos) {
    run.generated_ids.pop_back();
    run.stopped_on_bos = true;
  }
  std::vector<int32_t> all = run.prompt_ids;
  all.insert(all.end(), run.generated_ids.begin(), run.generated_ids.end());
  auto output = tokenizer.run_c_output(all);
  if (!output) return output.status();
  run.output = std::move(output.value());
  return run;
}

}  // namespace kvlm
