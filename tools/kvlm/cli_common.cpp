#include "cli_common.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "model/gguf_model.h"
#include "model/random_gpt2.h"

namespace kvlm::cli {

void add_weights_flag(CLI::App* cmd, std::string* weights) {
  cmd->add_option("--weights", *weights,
                  "Convert weight matrices on load to f32, f16, bf16, or quantize them to "
                  "q8_0, q4_0, q5_0, q4_k or q6_k (default: as stored; matrices whose rows are "
                  "not whole blocks fall back as llama.cpp's do: q4_k to q5_0, q6_k to q8_0, "
                  "else f16; the types used are reported); q4_k_mix: Q4_K and Q6_K per tensor "
                  "as `kvlm convert --type q4_k_mix` (llama.cpp's Q4_K_M)")
      ->check(CLI::IsMember(
          {"f32", "f16", "bf16", "q8_0", "q4_0", "q5_0", "q4_k", "q6_k", "q4_k_mix"}));
}

void add_model_flags(CLI::App* cmd, ModelFlags* flags, bool model_required) {
  auto* model = cmd->add_option("--model", flags->model,
                                "Model folder (Hugging Face: config.json + model.safetensors)");
  if (model_required) model->required();
  add_weights_flag(cmd, &flags->weights);
  // Bounded well below what makes the OpenMP runtime fail to start its threads (it aborts
  // then, with a message that names no flag).
  cmd->add_option("--threads", flags->threads, "Worker threads, at most 256 (default: all cores)")
      ->check(CLI::Range(0, 256));
}

void report_weight_types(const Model& model, const ModelFlags& flags) {
  const std::string types = model.weight_types();
  if (flags.weights == "q4_k_mix")  // a mix by design: say which types, nothing fell back
    std::fprintf(stderr, "kvlm: --weights q4_k_mix: matrices stored as %s\n", types.c_str());
  else if (!flags.weights.empty() && types.find(',') != std::string::npos)
    std::fprintf(stderr,
                 "kvlm: --weights %s: matrices stored as %s (rows that are not whole %s "
                 "blocks fall back as llama.cpp's do)\n",
                 flags.weights.c_str(), types.c_str(), flags.weights.c_str());
}

Result<std::unique_ptr<Model>> load_model_from_flags(const ModelFlags& flags) {
  KVLM_ASSIGN_OR_RETURN(LoadOptions options, load_options_for_weights(flags.weights));
  options.n_threads = flags.threads;  // 0 (not given): every core
  auto model = load_model(flags.model, options);
  if (model) report_weight_types(*model.value(), flags);
  return model;
}

Result<std::unique_ptr<Model>> make_random_gpt2_from_flags(const ModelFlags& flags) {
  KVLM_ASSIGN_OR_RETURN(const LoadOptions load, load_options_for_weights(flags.weights));
  RandomGpt2Options options;  // seed 1234, as `kvlm demo`
  options.dtype = load.convert_weights.value_or(DType::kF32);
  auto model = make_random_gpt2(gpt2_small_config(), options);
  if (!model) return model.status();
  if (load.q4_k_mix)
    return restore_as_gguf(*model.value(), GgufTypes{DType::kQ4_K, true},
                           parallel_from_flags(flags).n_threads, "<random GPT-2>");
  return std::unique_ptr<Model>(std::move(model.value()));
}

Parallel parallel_from_flags(const ModelFlags& flags) {
  Parallel par;
  par.n_threads =
      flags.threads > 0 ? flags.threads : std::max(1u, std::thread::hardware_concurrency());
  return par;
}

Result<std::vector<int32_t>> parse_id_list(const std::string& text, const std::string& flag) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] == ',' || std::isspace(static_cast<unsigned char>(text[i]))) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < text.size() && text[end] != ',' &&
           !std::isspace(static_cast<unsigned char>(text[end])))
      ++end;
    const std::string token = text.substr(i, end - i);
    char* stop = nullptr;
    errno = 0;
    const long long value = std::strtoll(token.c_str(), &stop, 10);
    if (stop != token.c_str() + token.size() || errno == ERANGE || value < INT32_MIN ||
        value > INT32_MAX)
      return Status::error(flag + ": expected integer token ids separated by commas, found '" +
                           token + "'");
    if (value < 0) return Status::error(flag + ": token id " + token + " is negative");
    ids.push_back(static_cast<int32_t>(value));
    i = end;
  }
  if (ids.empty()) return Status::error(flag + ": empty prompt: give at least one token id");
  return ids;
}

std::string format_float(float value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.9g", static_cast<double>(value));
  return buffer;
}

std::string join_ids(const std::vector<int32_t>& ids, const char* separator) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? separator : "") + std::to_string(ids[i]);
  return s;
}

int fail(const Status& status) {
  std::fprintf(stderr, "kvlm: error: %s\n", status.message().c_str());
  return 1;
}

}  // namespace kvlm::cli
