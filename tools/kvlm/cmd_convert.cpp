// kvlm convert: writes a model as a GGUF file that kvlm and llama.cpp both load.
//   kvlm convert --model PATH --out FILE.gguf [--type
//   f32|f16|bf16|q8_0|q4_0|q5_0|q4_k|q6_k|q4_k_mix]
//                [--tokenizer PATH | --no-tokenizer] [--threads N]
// The model is anything `--model` takes (a Hugging Face folder, a llama2.c model.bin, a GGUF);
// its tokenizer (the folder's own, or --tokenizer) goes into the file's tokenizer.ggml.* keys.
// Writing is in src/model/gguf_export.cpp.
#include <algorithm>
#include <cstdio>
#include <thread>

#include "cli_common.h"
#include "commands.h"
#include "model/gguf_export.h"
#include "model/loader.h"
#include "tokenizer/tokenizer.h"

namespace kvlm::cli {
namespace {

struct ConvertFlags {
  std::string model;
  std::string out;
  std::string type = "f32";
  std::string tokenizer;
  bool no_tokenizer = false;
  int threads = 0;  // 0: all cores
};

int run_convert(const ConvertFlags& flags) {
  const GgufTypes types = parse_gguf_types(flags.type).value_or(GgufTypes{});
  auto model = load_model(flags.model, LoadOptions{});
  if (!model) return fail(model.status());
  std::unique_ptr<Tokenizer> tokenizer;
  if (!flags.no_tokenizer) {
    const std::string path = flags.tokenizer.empty() ? flags.model : flags.tokenizer;
    auto loaded = load_tokenizer(path);
    if (loaded) {
      tokenizer = std::move(loaded.value());
      if (tokenizer->vocab_size() > model.value()->config().n_vocab)
        return fail(Status::error(
            tokenizer->source() + ": the tokenizer has " + std::to_string(tokenizer->vocab_size()) +
            " tokens but the model only " + std::to_string(model.value()->config().n_vocab)));
    } else if (!flags.tokenizer.empty()) {
      return fail(Status::error("--tokenizer: " + loaded.message()));
    } else {
      std::fprintf(stderr, "kvlm convert: no tokenizer written (%s; pass --tokenizer PATH)\n",
                   loaded.message().c_str());
    }
  }
  const int threads = flags.threads > 0
                          ? flags.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto status = write_gguf(*model.value(), tokenizer.get(), types, flags.out, threads);
  if (!status.is_ok()) return fail(status);
  std::fprintf(stderr, "kvlm convert: wrote %s (%s%s)\n", flags.out.c_str(), flags.type.c_str(),
               tokenizer ? ", with tokenizer" : "");
  return 0;
}

}  // namespace

void add_convert_command(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<ConvertFlags>();
  CLI::App* cmd = app.add_subcommand("convert", "Write a model as a GGUF file");
  cmd->add_option("--model", flags->model,
                  "Model: Hugging Face folder, llama2.c model.bin or GGUF file")
      ->required();
  cmd->add_option("--out", flags->out, "GGUF file to write")->required();
  cmd->add_option("--type", flags->type,
                  "Storage type of the weight matrices (norms and biases stay f32); q4_k_mix: "
                  "Q4_K with Q6_K for the head, attn_v and ffn_down (llama.cpp's Q4_K_M rule "
                  "without Q5_K)")
      ->check(CLI::IsMember(
          {"f32", "f16", "bf16", "q8_0", "q4_0", "q5_0", "q4_k", "q6_k", "q4_k_mix"}));
  auto* tok = cmd->add_option("--tokenizer", flags->tokenizer,
                              "Tokenizer to store (default: the model folder's own)");
  cmd->add_flag("--no-tokenizer", flags->no_tokenizer, "Write no tokenizer")->excludes(tok);
  cmd->add_option("--threads", flags->threads,
                  "Threads quantizing the matrices, at most 256 (default: all cores; the bytes "
                  "written do not depend on it)")
      ->check(CLI::Range(0, 256));
  cmd->callback([flags, exit_code] { *exit_code = run_convert(*flags); });
}

}  // namespace kvlm::cli
