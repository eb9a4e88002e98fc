// kvlm logits: the last position's logits of each prompt, as JSON (9 significant digits). A
// thin client of the engine (engine/last_logits.h): cached, the last token is computed against
// the cache the rest of the prompt filled; --no-cache, the whole prompt in one pass.
#include <cstdio>
#include <string>

#include "cli_common.h"
#include "commands.h"
#include "engine/last_logits.h"
#include "kv_flags.h"

namespace kvlm::cli {

namespace {

struct LogitsFlags {
  ModelFlags model;
  std::vector<std::string> ids;
  bool no_cache = false;
  bool json = false;
  std::string kv_dtype;  // --kv-dtype
  WindowFlags window;    // --kv-window, --sink-tokens
};

int run_logits(const LogitsFlags& flags) {
  if (!flags.json) return fail(Status::error("kvlm logits prints JSON only: pass --json"));
  std::vector<std::vector<int32_t>> prompts;
  for (const std::string& text : flags.ids) {
    auto ids = parse_id_list(text, "--ids");
    if (!ids) return fail(ids.status());
    prompts.push_back(ids.value());
  }
  if (prompts.empty()) return fail(Status::error("give at least one prompt with --ids"));
  KVLM_CLI_RETURN_IF_ERROR(kv_storage_from_flag(flags.kv_dtype).status());
  KVLM_CLI_RETURN_IF_ERROR(window_from_flags(flags.window).status());
  auto model = load_model_from_flags(flags.model);
  if (!model) return fail(model.status());
  auto loaded = LoadedModel::from_parts(std::move(model.value()), nullptr);  // ids only
  if (!loaded) return fail(loaded.status());
  LastLogitsOptions options;
  options.cached = !flags.no_cache;
  options.threads = flags.model.threads;
  if (!flags.kv_dtype.empty()) options.kv_dtype = flags.kv_dtype;
  options.kv_window = flags.window.window;
  options.sink_tokens = flags.window.sinks;
  auto logits = last_logits(loaded.value(), prompts, options);
  if (!logits) return fail(logits.status());
  std::string out = "{\"logits\":[";
  for (size_t s = 0; s < logits->size(); ++s) {
    out += s ? ",[" : "[";
    const auto& row = (*logits)[s];
    for (size_t i = 0; i < row.size(); ++i) out += (i ? "," : "") + format_float(row[i]);
    out += "]";
  }
  out += "]}\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace

void add_logits_command(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<LogitsFlags>();
  CLI::App* cmd = app.add_subcommand("logits", "Print each prompt's last-position logits");
  add_model_flags(cmd, &flags->model, true);
  cmd->add_option("--ids", flags->ids, "A prompt as comma-separated token ids; repeat for a batch");
  cmd->add_flag("--no-cache", flags->no_cache,
                "One full pass over the prompt (default: prefill all but the last token, then "
                "decode it against the cache)");
  add_kv_dtype_flag(cmd, &flags->kv_dtype);
  add_window_flags(cmd, &flags->window);
  cmd->add_flag("--json", flags->json, "Print {\"logits\": [[...], ...]} (required)");
  cmd->callback([flags, exit_code] { *exit_code = run_logits(*flags); });
}

}  // namespace kvlm::cli
