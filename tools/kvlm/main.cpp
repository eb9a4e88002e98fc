// kvlm: command-line front end. Parses the subcommand and its flags (CLI11) and runs it;
// every error from the library arrives here as a Status and becomes a message on standard
// error and a non-zero exit.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "commands.h"
#include "openmp_wait.h"
#include "ops/matmul_bf16amx.h"
#include "ops/matmul_bf16dot.h"
#include "ops/weight_strips.h"

int main(int argc, char** argv) {
  kvlm::cli::set_openmp_wait_and_reexec(argv);
  // KVLM_BF16_DOT=0: BF16 weights keep fp32 activations (no vdpbf16ps; docs/performance.md).
  if (const char* dot = std::getenv("KVLM_BF16_DOT"); dot != nullptr && std::string(dot) == "0")
    kvlm::set_bf16_dot_enabled(false);
  // KVLM_AMX=0: BF16 weights take vdpbf16ps where AMX would run them (docs/performance.md).
  if (const char* amx = std::getenv("KVLM_AMX"); amx != nullptr && std::string(amx) == "0")
    kvlm::set_bf16_amx_enabled(false);
  // KVLM_STRIPS=0: no second copies of the weights for batched decode (F16's column strips,
  // vdpbf16ps's pairs; ops/weight_strips.h).
  if (const char* strips = std::getenv("KVLM_STRIPS");
      strips != nullptr && std::string(strips) == "0")
    kvlm::set_weight_strips_enabled(false);
  CLI::App app{
      "kvlm: transformer inference built around its KV cache (GPT-2 from Hugging Face folders).\n"
      "Run 'kvlm CMD --help' for a command's flags."};
  app.require_subcommand(1);
  int exit_code = 0;
  kvlm::cli::add_demo_command(app, &exit_code);
  kvlm::cli::add_generate_command(app, &exit_code);
  kvlm::cli::add_logits_command(app, &exit_code);
  kvlm::cli::add_kv_size_command(app, &exit_code);
  kvlm::cli::add_tokenize_command(app, &exit_code);
  kvlm::cli::add_detokenize_command(app, &exit_code);
  kvlm::cli::add_bench_command(app, &exit_code);
  kvlm::cli::add_perplexity_command(app, &exit_code);
  kvlm::cli::add_serve_command(app, &exit_code);
  kvlm::cli::add_convert_command(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // app.exit prints the message (or the help); CLI11's own codes (104-114) would break the
    // documented contract that bad input exits with 1.
    return app.exit(e) == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvlm: error: %s\n", e.what());
    return 1;
  }
  return exit_code;
}
