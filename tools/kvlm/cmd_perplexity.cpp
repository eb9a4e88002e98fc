// kvlm perplexity: a text file's perplexity in windows of --ctx tokens (eval/perplexity.h says
// which tokens are scored), and with --compare-kv-dtype or --compare-weights the KL divergence
// and top-1 agreement against a base configuration, both run in the same pass.
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_common.h"
#include "commands.h"
#include "eval/perplexity.h"
#include "kv_flags.h"
#include "tokenizer/tokenizer.h"
#include "util/mapped_file.h"

namespace kvlm::cli {

namespace {

struct PerplexityFlags {
  ModelFlags model;
  std::string tokenizer;
  std::string file;
  int ctx = 0;
  int stride = 0;
  std::string kv_dtype;
  std::string compare_kv_dtype;
  std::string compare_weights;
  WindowFlags window;
  bool json = false;
};

void print_progress(int done, int total) {
  const int width = 30, filled = total ? done * width / total : width;
  std::fprintf(stderr, "\r[%s%s] %d/%d windows", std::string(filled, '#').c_str(),
               std::string(width - filled, ' ').c_str(), done, total);
  if (done == total) std::fputc('\n', stderr);
}

std::string describe(const std::string& weights, const KvStorageOptions& kv) {
  return std::string("weights ") + (weights.empty() ? "as stored" : weights) + ", " +
         kv_dtype_name(kv.dtype) + " KV cache";
}

nlohmann::ordered_json number_or_null(bool present, double value) {
  return present ? nlohmann::ordered_json(value) : nlohmann::ordered_json(nullptr);
}

// The flags that cannot run together or at all, refused before anything loads.
Status check_flags(const PerplexityFlags& flags) {
  if (!flags.compare_kv_dtype.empty() && !flags.compare_weights.empty())
    return Status::error("give --compare-kv-dtype or --compare-weights, not both");
  if (flags.ctx < 0) return Status::error("--ctx must be positive");
  if (flags.window.window > 0 && (flags.ctx != 0 || flags.stride != 0))
    return Status::error(
        "--kv-window scores the whole text as one stream; --ctx and --stride do not apply");
  KVLM_RETURN_IF_ERROR(kv_storage_from_flag(flags.kv_dtype));
  KVLM_RETURN_IF_ERROR(kv_storage_from_flag(flags.compare_kv_dtype, "--compare-kv-dtype"));
  return Status::ok();
}

// The base configuration `base` (a copy of the tested one) is compared against: another KV
// cache type, or the model loaded again with --compare-weights into `base_model`.
Status set_up_base(const PerplexityFlags& flags, Model& model, const Parallel& par,
                   const KvWindow& window, EvalConfig* base, std::unique_ptr<Model>* base_model,
                   std::string* base_weights) {
  if (!flags.compare_kv_dtype.empty()) {
    KVLM_ASSIGN_OR_RETURN(
        base->kv, kv_storage_for_model(flags.compare_kv_dtype, model, par, "--compare-kv-dtype"));
    base->kv.window = window;
  }
  if (!flags.compare_weights.empty()) {
    if (!load_options_for_weights(flags.compare_weights))
      return Status::error("--compare-weights: unknown weight type '" + flags.compare_weights +
                           "'; give one --weights accepts");
    ModelFlags other = flags.model;
    other.weights = *base_weights = flags.compare_weights;
    KVLM_ASSIGN_OR_RETURN(*base_model, load_model_from_flags(other));
    base->model = base_model->get();
  }
  return Status::ok();
}

// The result on stdout: one JSON object with --json, else lines for a reader.
void print_result(const PerplexityFlags& flags, const ModelConfig& config, size_t n_tokens,
                  const PerplexityResult& r, const EvalConfig& test, const EvalConfig& base,
                  const std::string& base_weights, bool compare) {
  if (flags.json) {
    nlohmann::ordered_json j;
    j["ppl"] = r.ppl;
    j["ppl_base"] = number_or_null(compare, r.ppl_base);
    j["kld_mean"] = number_or_null(compare, r.kld_mean);
    j["kld_p99"] = number_or_null(compare, r.kld_p99);
    j["top1_agree"] = number_or_null(compare, r.top1_agree);
    j["tokens"] = r.tokens;
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  const int ctx = flags.ctx > 0 ? flags.ctx : config.n_ctx;
  std::printf("text        %zu tokens, %d windows of %d%s, %lld scored\n", n_tokens, r.windows, ctx,
              flags.stride > 0 ? (", stride " + std::to_string(flags.stride)).c_str() : "",
              static_cast<long long>(r.tokens));
  std::printf("perplexity  %.6f  (%s)\n", r.ppl, describe(flags.model.weights, test.kv).c_str());
  if (compare) {
    std::printf("base        %.6f  (%s)\n", r.ppl_base, describe(base_weights, base.kv).c_str());
    std::printf("KL(base||this)  mean %.3e, p99 %.3e\n", r.kld_mean, r.kld_p99);
    std::printf("top-1 agreement  %.4f%%\n", 100.0 * r.top1_agree);
  }
}

int run_perplexity(const PerplexityFlags& flags) {
  KVLM_CLI_RETURN_IF_ERROR(check_flags(flags));
  auto text = read_text_file(flags.file);
  if (!text) return fail(Status::error("--file: " + text.message()));
  auto model = load_model_from_flags(flags.model);
  if (!model) return fail(model.status());
  const ModelConfig& config = model.value()->config();

  auto tokenizer = load_tokenizer(flags.tokenizer.empty() ? flags.model.model : flags.tokenizer);
  if (!tokenizer)
    return fail(Status::error(tokenizer.message() +
                              (flags.tokenizer.empty() ? " (pass --tokenizer PATH)" : "")));
  const std::vector<int32_t> tokens = tokenizer.value()->encode(text.value(), false);
  for (int32_t id : tokens)
    if (id >= config.n_vocab)
      return fail(Status::error(tokenizer.value()->source() + ": token id " + std::to_string(id) +
                                " is beyond the model's vocabulary of " +
                                std::to_string(config.n_vocab)));

  PerplexityOptions options;
  options.ctx = flags.ctx;
  options.stride = flags.stride;
  if (tokenizer.value()->add_bos() && tokenizer.value()->bos_id())
    options.bos = *tokenizer.value()->bos_id();
  if (isatty(STDERR_FILENO)) options.progress = print_progress;

  const Parallel par = parallel_from_flags(flags.model);
  auto kv = kv_storage_for_model(flags.kv_dtype, *model.value(), par);
  if (!kv) return fail(kv.status());
  auto window = window_from_flags(flags.window);
  if (!window) return fail(window.status());
  kv->window = window.value();
  EvalConfig test{model.value().get(), kv.value()};
  std::unique_ptr<Model> base_model;
  EvalConfig base = test;
  std::string base_weights = flags.model.weights;
  const bool compare = !flags.compare_kv_dtype.empty() || !flags.compare_weights.empty();
  KVLM_CLI_RETURN_IF_ERROR(
      set_up_base(flags, *model.value(), par, window.value(), &base, &base_model, &base_weights));
  auto r = perplexity(tokens, test, compare ? &base : nullptr, options, par);
  if (!r) return fail(r.status());
  print_result(flags, config, tokens.size(), r.value(), test, base, base_weights, compare);
  return 0;
}

}  // namespace

void add_perplexity_command(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<PerplexityFlags>();
  CLI::App* cmd = app.add_subcommand(
      "perplexity", "Perplexity of a text; KL divergence against another cache dtype or weights");
  add_model_flags(cmd, &flags->model, true);
  cmd->add_option("--tokenizer", flags->tokenizer,
                  "Tokenizer file or folder (default: the model folder's own)");
  cmd->add_option("--file", flags->file, "The text to score (UTF-8)")->required();
  cmd->add_option("--ctx", flags->ctx,
                  "Window length in tokens (default: the model's context); without --stride "
                  "each window scores its tokens ctx/2+1..ctx-1, as llama-perplexity");
  cmd->add_option("--stride", flags->stride,
                  "Strided windows (Hugging Face style): windows of --ctx every N tokens, each "
                  "token scored once");
  add_kv_dtype_flag(cmd, &flags->kv_dtype);
  add_window_flags(cmd, &flags->window);
  cmd->add_option("--compare-kv-dtype", flags->compare_kv_dtype,
                  "Also run with this KV cache dtype as the base: KL divergence, top-1 agreement");
  cmd->add_option("--compare-weights", flags->compare_weights,
                  "Also run with the weights converted to this type as the base");
  cmd->add_flag("--json", flags->json,
                "Print {\"ppl\", \"ppl_base\", \"kld_mean\", \"kld_p99\", \"top1_agree\", "
                "\"tokens\"} (null without --compare-*)");
  cmd->callback([flags, exit_code] { *exit_code = run_perplexity(*flags); });
}

}  // namespace kvlm::cli
