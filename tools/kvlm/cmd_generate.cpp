// kvlm generate: greedy generation from token-id prompts, cached (prefill + decode) or not.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "commands.h"
#include "generate/generate.h"

namespace kvlm::cli {

namespace {

struct GenerateFlags {
  ModelFlags model;
  std::vector<std::string> ids;
  int max_new = 20;
  bool no_cache = false;
  bool json = false;
};

int run_generate(const GenerateFlags& flags) {
  std::vector<std::vector<int32_t>> prompts;
  for (const std::string& text : flags.ids) {
    auto ids = parse_id_list(text, "--ids");
    if (!ids) return fail(ids.status());
    prompts.push_back(ids.value());
  }
  if (prompts.empty()) return fail(Status::error("give at least one prompt with --ids"));
  auto model = load_model_from_flags(flags.model);
  if (!model) return fail(model.status());
  GenerateOptions options;
  options.max_new_tokens = flags.max_new;
  options.use_cache = !flags.no_cache;
  auto result = generate(*model.value(), prompts, options, parallel_from_flags(flags.model));
  if (!result) return fail(result.status());
  const GenerateStats& st = result->stats;
  if (flags.json) {
    nlohmann::ordered_json out;
    out["sequences"] = nlohmann::json::array();
    for (size_t s = 0; s < prompts.size(); ++s)
      out["sequences"].push_back({{"prompt_ids", prompts[s]}, {"ids", result->tokens[s]}});
    out["stats"] = {{"cached", options.use_cache},
                    {"prompt_tokens", st.prompt_tokens},
                    {"generated_tokens", st.generated_tokens},
                    {"rows_computed", st.rows_computed},
                    {"prefill_seconds", st.prefill_seconds},
                    {"decode_seconds", st.decode_seconds},
                    {"kv_cache_bytes", st.kv_bytes_allocated}};
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  for (const auto& tokens : result->tokens) std::printf("%s\n", join_ids(tokens, " ").c_str());
  std::fprintf(stderr,
               "prompt tokens %lld, generated %lld, prefill %.3f s, decode %.3f s, KV cache %lld "
               "bytes%s\n",
               static_cast<long long>(st.prompt_tokens),
               static_cast<long long>(st.generated_tokens), st.prefill_seconds, st.decode_seconds,
               static_cast<long long>(st.kv_bytes_allocated),
               options.use_cache ? "" : " (uncached)");
  return 0;
}

}  // namespace

void add_generate_command(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<GenerateFlags>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate tokens for one or more prompts");
  add_model_flags(cmd, &flags->model, true);
  cmd->add_option("--ids", flags->ids,
                  "A prompt as comma-separated token ids; repeat for a batch (e.g. --ids 7,3,19 "
                  "--ids 9,2)");
  cmd->add_option("--max-new", flags->max_new, "New tokens per prompt (default 20)");
  cmd->add_flag("--no-cache", flags->no_cache,
                "Recompute the whole sequence at every step instead of using the KV cache");
  cmd->add_flag("--json", flags->json, "Print one JSON object with ids and stats");
  cmd->callback([flags, exit_code] { *exit_code = run_generate(*flags); });
}

}  // namespace kvlm::cli
