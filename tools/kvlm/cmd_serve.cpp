// kvlm serve: an OpenAI-compatible HTTP server on the engine (src/serve/).
//   kvlm serve --model PATH [--tokenizer PATH] [--host 127.0.0.1] [--port 8080]
//              [--kv-memory BYTES] [--block-size N] [--max-seqs N] [--max-batch-tokens N]
//              [--max-queue N] [--api-key KEY] [--model-name NAME] [--chat-template NAME]
//              [--threads N] [--weights TYPE] [--kv-dtype D] [--kv-window W [--sink-tokens S]]
// The port answers /health (503 "loading") while the model loads. One line on standard error
// when ready, one per finished request. SIGINT or SIGTERM: stop accepting, end open streams
// (their requests cancelled, each stream closed with a final chunk and [DONE]), exit 0.
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <string>

#include "cli_common.h"
#include "commands.h"
#include "kv_flags.h"
#include "kvlm/engine.h"
#include "model/model.h"
#include "paged_flags.h"
#include "serve/chat_template.h"
#include "serve/server.h"
#include "tokenizer/tokenizer.h"

namespace kvlm::cli {
namespace {

struct ServeFlags {
  std::string model;
  std::string tokenizer;
  std::string weights;  // --weights: as every command that runs a model (load_options_for_weights)
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string kv_memory;
  std::string kv_dtype;  // --kv-dtype
  WindowFlags window;    // --kv-window, --sink-tokens
  int block_size = 16;
  int max_seqs = 16;
  int max_batch_tokens = 512;
  int max_queue = 64;
  std::string api_key;
  std::string model_name;
  std::string chat_template;
  int threads = 0;
  std::string max_body = "8MiB";
  bool random_model = false;  // --random-model: GPT-2 124M's shape, seeded random weights
};

void log_line(const std::string& line) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  std::fprintf(stderr, "kvlm serve: %s\n", line.c_str());
  std::fflush(stderr);
}

// The name clients send as "model": the folder's or file's name unless --model-name says.
std::string default_model_name(const std::string& path) {
  std::filesystem::path p(path);
  while (!p.empty() && p.filename().empty()) p = p.parent_path();  // "dir/" -> "dir"
  return std::filesystem::is_directory(p) ? p.filename().string() : p.stem().string();
}

// tokenizer_config.json lives beside the tokenizer: the --tokenizer folder (or the folder of
// a --tokenizer file), else the model folder.
Result<serve::ChatTemplate> chat_template_for(const ServeFlags& flags) {
  namespace fs = std::filesystem;
  std::string folder = flags.model;
  if (!flags.tokenizer.empty()) {
    folder = fs::is_directory(flags.tokenizer) ? flags.tokenizer
                                               : fs::path(flags.tokenizer).parent_path().string();
  }
  if (!fs::is_directory(folder)) folder = fs::path(flags.model).parent_path().string();
  Result<serve::ChatTemplate> tmpl = serve::read_chat_template(folder);
  if (!tmpl) return tmpl.status();
  if (!flags.chat_template.empty()) {
    Result<serve::ChatTemplateKind> kind = serve::chat_template_from_name(flags.chat_template);
    if (!kind) return kind.status();
    tmpl.value().kind = kind.value();
    tmpl.value().source = "--chat-template";
  }
  return tmpl;
}

Status check_flags(const ServeFlags& f) {
  if (f.port < 0 || f.port > 65535) {
    return Status::error("--port: expected 0 to 65535, found " + std::to_string(f.port));
  }
  if (f.max_seqs < 1)
    return Status::error("--max-seqs: expected >= 1, found " + std::to_string(f.max_seqs));
  if (f.max_queue < 0)
    return Status::error("--max-queue: expected >= 0, found " + std::to_string(f.max_queue));
  if (f.max_batch_tokens < 1) {
    return Status::error("--max-batch-tokens: expected >= 1, found " +
                         std::to_string(f.max_batch_tokens));
  }
  if (f.block_size < 1 || f.block_size > 65536) {
    return Status::error("--block-size: expected 1 to 65536 positions, found " +
                         std::to_string(f.block_size));
  }
  return Status::ok();
}

// --random-model: the GPT-2 124M-shaped model `kvlm bench` and `kvlm demo` make (seed 1234), in
// memory; its tokens are meaningless, its speed is real. Without --tokenizer, prompts are ids.
Result<std::shared_ptr<LoadedModel>> load(const ServeFlags& flags) {
  const ModelFlags model_flags{flags.model, flags.weights, flags.threads};
  if (!flags.random_model) {
    Result<std::shared_ptr<LoadedModel>> loaded =
        LoadedModel::load(ModelSource{flags.model, flags.tokenizer, flags.weights, flags.threads});
    if (loaded) report_weight_types(loaded.value()->model(), model_flags);
    return loaded;
  }
  auto model = make_random_gpt2_from_flags(model_flags);
  if (!model) return model.status();
  std::shared_ptr<const Tokenizer> tokenizer;
  if (!flags.tokenizer.empty()) {
    Result<std::unique_ptr<Tokenizer>> tok = load_tokenizer(flags.tokenizer);
    if (!tok) return Status::error("--tokenizer: " + tok.message());
    tokenizer = std::move(tok.value());
  }
  return LoadedModel::from_parts(std::shared_ptr<Model>(std::move(model.value())), tokenizer);
}

int run_serve(const ServeFlags& flags) {
  if (flags.model.empty() == !flags.random_model) {
    return fail(Status::error("give exactly one of --model PATH or --random-model"));
  }
  KVLM_CLI_RETURN_IF_ERROR(check_flags(flags));
  KVLM_CLI_RETURN_IF_ERROR(kv_storage_from_flag(flags.kv_dtype).status());
  KVLM_CLI_RETURN_IF_ERROR(window_from_flags(flags.window).status());
  EngineOptions engine;
  if (!flags.kv_dtype.empty()) engine.kv_dtype = flags.kv_dtype;
  engine.kv_window = flags.window.window;
  engine.sink_tokens = flags.window.sinks;
  engine.block_size = flags.block_size;
  engine.max_running = flags.max_seqs;
  engine.max_batch_tokens = flags.max_batch_tokens;
  engine.threads = flags.threads;
  if (!flags.kv_memory.empty()) {
    Result<size_t> bytes = parse_byte_size(flags.kv_memory, "--kv-memory");
    if (!bytes) return fail(bytes.status());
    engine.kv_memory_bytes = bytes.value();
  }
  Result<size_t> max_body = parse_byte_size(flags.max_body, "--max-body");
  if (!max_body) return fail(max_body.status());
  Result<serve::ChatTemplate> chat = chat_template_for(flags);
  if (!chat) return fail(chat.status());

  // Signals are taken by sigwait() below; every thread started from here on inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  serve::ServerOptions options;
  options.host = flags.host;
  options.port = flags.port;
  options.max_running = flags.max_seqs;
  options.max_queue = flags.max_queue;
  options.api_key = flags.api_key;
  options.model_name =
      flags.model_name.empty() ? default_model_name(flags.model) : flags.model_name;
  options.max_body_bytes = max_body.value();
  options.log = log_line;
  serve::Server server(options);
  KVLM_CLI_RETURN_IF_ERROR(server.bind());
  server.start();

  Result<std::shared_ptr<LoadedModel>> model = load(flags);
  if (!model) return fail(model.status());
  KVLM_CLI_RETURN_IF_ERROR(server.attach(model.value(), engine, chat.value()));
  const EngineStats stats = server.engine_stats();
  const double mib = static_cast<double>(stats.kv_bytes_total) / (1 << 20);
  char ready[512];
  std::snprintf(ready, sizeof ready,
                "ready on http://%s:%d, model \"%s\" (%s, n_ctx %d), KV cache %.1f MiB in blocks "
                "of %d, max-seqs %d, max-queue %d, chat template %s",
                flags.host.c_str(), server.port(), options.model_name.c_str(), flags.model.c_str(),
                model.value()->n_ctx(), mib, stats.kv_block_size, flags.max_seqs, flags.max_queue,
                serve::chat_template_name(chat.value().kind));
  std::string line = ready;
  if (!flags.weights.empty())
    line += ", --weights " + flags.weights + " (matrices " + model.value()->model().weight_types() +
            ")";
  if (engine.kv_window > 0)
    line += ", --kv-window " + std::to_string(engine.kv_window) + " --sink-tokens " +
            std::to_string(engine.sink_tokens) + " (requests may run past n_ctx)";
  log_line(line);

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  log_line(std::string("received ") + (signal_number == SIGINT ? "SIGINT" : "SIGTERM") +
           ": stopping (open requests cancelled, streams closed)");
  server.shutdown();
  log_line("stopped");
  return 0;
}

}  // namespace

void add_serve_command(CLI::App& app, int* exit_code) {
  auto* cmd =
      app.add_subcommand("serve",
                         "OpenAI-compatible HTTP server: /v1/completions, /v1/chat/completions, "
                         "/v1/models, /health, /metrics, /tokenize, /detokenize (docs/serving.md)");
  auto f = std::make_shared<ServeFlags>();
  cmd->add_option("--model", f->model, "Model folder or llama2.c .bin");
  cmd->add_flag("--random-model", f->random_model,
                "Serve a GPT-2 124M-shaped model with seeded random weights, made in memory "
                "(load tests; prompts as token ids unless --tokenizer is given)");
  cmd->add_option("--tokenizer", f->tokenizer, "Tokenizer folder or file (default: the model's)");
  cmd->add_option("--host", f->host, "Address to listen on (default 127.0.0.1)");
  cmd->add_option("--port", f->port, "Port (default 8080; 0: any free port, printed when ready)");
  cmd->add_option("--kv-memory", f->kv_memory,
                  "KV cache size (67108864, 64MiB, 1.5GB); default: --max-seqs full contexts");
  cmd->add_option("--block-size", f->block_size, "Positions per cache block (default 16)");
  add_weights_flag(cmd, &f->weights);
  add_kv_dtype_flag(cmd, &f->kv_dtype);
  add_window_flags(cmd, &f->window);
  cmd->add_option("--max-seqs", f->max_seqs, "Sequences running at once (default 16)");
  cmd->add_option("--max-batch-tokens", f->max_batch_tokens,
                  "Tokens per engine step, decode and prefill chunks together (default 512)");
  cmd->add_option("--max-queue", f->max_queue,
                  "Sequences that may wait beyond --max-seqs; more get 503 (default 64)");
  cmd->add_option("--api-key", f->api_key, "Require 'Authorization: Bearer KEY'");
  cmd->add_option("--model-name", f->model_name,
                  "The model's name in the API (default: the model folder's name)");
  cmd->add_option("--chat-template", f->chat_template,
                  "chatml, llama2, llama3 or mistral (default: from tokenizer_config.json)");
  cmd->add_option("--threads", f->threads, "Worker threads (default: all cores)");
  cmd->add_option("--max-body", f->max_body, "Largest request body (default 8MiB); more: 413");
  cmd->callback([=] { *exit_code = run_serve(*f); });
}

}  // namespace kvlm::cli
