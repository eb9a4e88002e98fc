// Flags and helpers shared by the kvlm subcommands: loading the model a user names, parsing
// token-id lists, printing floats the way the JSON outputs promise.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kvlm/status.h"
#include "model/loader.h"
#include "ops/parallel.h"

namespace kvlm::cli {

struct ModelFlags {
  std::string model;    // --model
  std::string weights;  // --weights f32|f16|bf16 (empty: as stored)
  int threads = 0;      // --threads (0: all cores)
};

// Adds --weights (what load_options_for_weights takes) to `cmd`.
void add_weights_flag(CLI::App* cmd, std::string* weights);
// Adds --model (required or not), --weights and --threads to `cmd`.
void add_model_flags(CLI::App* cmd, ModelFlags* flags, bool model_required);
// load_model with --weights; reports (report_weight_types) what the matrices became.
Result<std::unique_ptr<Model>> load_model_from_flags(const ModelFlags& flags);
// With --weights, one line on standard error when not every matrix took that type (rows that
// are not whole blocks: stored_weight_type's fallbacks), counting each type used.
void report_weight_types(const Model& model, const ModelFlags& flags);
Parallel parallel_from_flags(const ModelFlags& flags);
// GPT-2 124M's shape with seeded random weights (seed 1234, as bench and demo make it), made in
// memory in the storage type --weights names (q4_k_mix: through convert's writer).
Result<std::unique_ptr<Model>> make_random_gpt2_from_flags(const ModelFlags& flags);

// Parses "7,3,19" (commas and/or spaces) into ids; `flag` names the source in errors.
Result<std::vector<int32_t>> parse_id_list(const std::string& text, const std::string& flag);

// %.9g: enough digits to round-trip any float.
std::string format_float(float value);
std::string join_ids(const std::vector<int32_t>& ids, const char* separator);

// Prints "kvlm: error: <message>" to standard error and returns the exit code 1.
int fail(const Status& status);

}  // namespace kvlm::cli

#define KVLM_CLI_RETURN_IF_ERROR(expr)                                         \
  do {                                                                         \
    const ::kvlm::Status kvlm_cli_status_ = (expr);                            \
    if (!kvlm_cli_status_.is_ok()) return ::kvlm::cli::fail(kvlm_cli_status_); \
  } while (0)

namespace kvlm::cli {}  // namespace kvlm::cli
