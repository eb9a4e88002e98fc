// The kvlm program's subcommands. Each lives in its own cmd_<name>.cpp and registers itself
// on the CLI11 app; when chosen, its callback stores the process exit code in *exit_code.
#pragma once

#include <CLI/CLI.hpp>

namespace kvlm::cli {

void add_demo_command(CLI::App& app, int* exit_code);
void add_generate_command(CLI::App& app, int* exit_code);
void add_logits_command(CLI::App& app, int* exit_code);
void add_kv_size_command(CLI::App& app, int* exit_code);
void add_tokenize_command(CLI::App& app, int* exit_code);
void add_detokenize_command(CLI::App& app, int* exit_code);
void add_bench_command(CLI::App& app, int* exit_code);
void add_perplexity_command(CLI::App& app, int* exit_code);
void add_serve_command(CLI::App& app, int* exit_code);
void add_convert_command(CLI::App& app, int* exit_code);

}  // namespace kvlm::cli
